// election: campaign (a waiting, fenced, auto-extended acquire, then one round
// that publishes the identity), and observe (one read round). Both stand on the
// client's acquire/extend/release; the two election scripts are sent as plain
// rounds (ops/plain_round.h), their answers read as values.
#include "redlock/election.h"

#include <climits>
#include <map>
#include <mutex>

#include "engine/core.h"
#include "pure/decision.h"
#include "primitives/election_scripts.h"
#include "primitives/leader_view.h"
#include "pure/keys.h"
#include "ops/async_op.h"
#include "ops/plain_round.h"
#include "ops/support.h"
#include "ops/watchdog.h"
#include "api/sync.h"

namespace redlock {
namespace detail {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr std::size_t kMaxIdentityBytes = 512;

std::string record_key(const core& c, const std::string& resource) { return leader_record_key(c.key_for(resource)); }

// Observe on the loop thread.
void observe(core& c, std::string resource, std::function<void(leader_info)> done) {
  auto views = std::make_shared<std::vector<node_leader_view>>(c.size());
  auto parse = [views](std::size_t node, const resp_value& r) {
    using kind = resp_value::kind;
    if (r.type != kind::array || r.elements.size() != 3) return false;
    node_leader_view& v = (*views)[node];
    auto text = [](const resp_value& e, std::optional<std::string>& out) {
      if (e.type == kind::nil) return true;
      if (e.type != kind::string) return false;
      out = e.text;
      return true;
    };
    if (!text(r.elements[0], v.lock_sha1) || !text(r.elements[1], v.record)) return false;
    if (r.elements[2].type != kind::integer) return false;
    v.pttl = r.elements[2].integer;
    v.answered = true;
    return true;
  };
  const std::size_t quorum = c.size() / 2 + 1;
  const std::string key = c.key_for(resource);
  const std::string rkey = record_key(c, resource);
  plain_round(c, {"EVAL", kElectionObserve, "2", key, rkey}, parse, [views, quorum, done = std::move(done)](report rep) {
    leader_info info;
    const leader_decision d = decide_leader(*views, quorum);
    if (!d.quorum_answered) {
      rep.error = errc::unavailable;
    } else if (d.leader) {
      info.identity = d.leader->identity;
      info.term = d.leader->term;
      info.ttl = d.ttl;
    }
    info.report = std::move(rep);
    done(std::move(info));
  });
}

}  // namespace

struct leadership_access {
  static leadership make(lock l, std::string role, std::string identity) {
    leadership out;
    out.term_ = l.fence().value_or(0);
    out.lock_ = std::move(l);
    out.role_ = std::move(role);
    out.identity_ = std::move(identity);
    return out;
  }
};

// The campaigns of one election, by id. Loop thread only, except ids.
struct campaigns {
  std::atomic<std::uint64_t> ids{0};
  std::mutex mu;
  std::map<std::uint64_t, std::function<void()>> cancels;  // guarded by mu; loop-thread functions
};

namespace {

// The retry deadline of one acquire of a campaign without a deadline.
constexpr milliseconds kUnboundedSlice = std::chrono::hours(24);
// Publications short of a quorum in a row after which a campaign ends.
constexpr int kMaxPublishFailures = 3;

// One campaign's lifecycle on the loop thread: acquire (waiting, fenced,
// auto-extended) -> publish -> done; a publication short of a quorum releases
// and acquires again while the deadline allows.
class campaign_op final : public async_op<campaign_op, campaign_result> {
 public:
  campaign_op(client& cl, std::shared_ptr<core> c, std::string role, std::string identity, campaign_options o,
              std::function<void(campaign_result)> done)
      : async_op(std::move(done)),
        client_(cl),
        core_(std::move(c)),
        role_(std::move(role)),
        identity_(std::move(identity)),
        options_(std::move(o)),
        started_(core_->now()) {}

  void start() {
    if (identity_.empty() || identity_.size() > kMaxIdentityBytes) {
      return finish_with(refused(errc::invalid_argument, "identity must be 1 to 512 bytes"));
    }
    if (role_.empty()) return finish_with(refused(errc::invalid_argument, "role must not be empty"));
    if (options_.retry_delay.count() <= 0) {
      return finish_with(refused(errc::invalid_argument, "retry_delay must be greater than 0"));
    }
    attempt();
  }

  void cancel() {
    if (finished()) return;
    cancelled_ = true;
    if (acquiring_) client_.cancel(acquire_id_);
    // A publication in flight finishes as cancelled when it completes.
  }

 private:
  report refused(errc e, const std::string& why) const {
    report r;
    r.error = e;
    for (const auto& n : core_->nodes()) r.nodes.push_back(node_result{n.display, node_status::pending, {}, {}});
    if (!r.nodes.empty()) r.nodes.front().detail = why;
    return r;
  }

  void attempt() {
    // A cancel that came while the previous lock was being released.
    if (cancelled_) return finish_with(refused(errc::cancelled, "campaign cancelled"));
    acquire_options ao;
    ao.ttl = options_.ttl;
    ao.fencing = true;
    ao.auto_extend = true;
    ao.extend_interval = options_.extend_interval;
    ao.retry.base_delay = options_.retry_delay;
    ao.retry.max_delay = options_.retry_delay;
    ao.retry.max_attempts = INT_MAX;
    if (options_.deadline.count() > 0) {
      const auto left = std::chrono::ceil<milliseconds>(started_ + options_.deadline - core_->now());
      if (left.count() <= 0) return finish_with(last_failure_.error ? last_failure_ : refused(errc::contended, "deadline"));
      ao.retry.deadline = left;
    } else {
      // Without a bound: a finite one all the same, so that the acquire waits for
      // release notifications (they need a retry deadline); the campaign acquires
      // again when it passes (review 13, E1).
      ao.retry.deadline = kUnboundedSlice;
    }
    // Lost (the watchdog could not extend in time, the keys were gone, the client
    // shut down): the candidate does not lead any more, so no observer may go on
    // naming it. Its keys may still be on a quorum (an extension that ran where its
    // reply was lost, a shutdown with validity left): the ownership-checked delete
    // goes to every node with the rollback's guarantee — again to each node that
    // does not confirm it, until it does or the TTL has passed; at a shutdown, for
    // the drain bound (core::begin_stop). Only a leadership handed out can be
    // demoted: a lock lost while its publication was in flight is the campaign's
    // business, not the caller's.
    auto handed = std::make_shared<bool>(false);
    handed_out_ = handed;
    detail::core* cp = core_.get();  // the lock's handle keeps its core alive
    ao.on_lost = [cp, ttl = options_.ttl, demoted = options_.on_demoted, handed](const lease& l,
                                                                                 const report& r) {
      deliver_release(*cp, release_command(*cp, l), std::vector<bool>(cp->size(), true), ttl,
                      /*prompt=*/true);
      if (demoted && *handed) demoted(r);
    };
    acquiring_ = true;
    auto self = keep();
    acquire_id_ = client_.acquire_async(election::resource_for(role_), std::move(ao),
                                        [self](acquire_result r) { self->acquired(std::move(r)); });
  }

  void acquired(acquire_result r) {
    acquiring_ = false;
    // Every release of this lock that falls short of a quorum — after a failed
    // publication, a cancel, resign(), the leadership's destructor — is delivered
    // again to the nodes that did not confirm it (held::redeliver_release): a node
    // that ran the publication unheard, or missed the resign, would otherwise let
    // observers name a candidate that does not lead, for the rest of the TTL.
    if (r) {
      if (auto h = core_->watch().handles().handle_for(r.lock.info())) h->redeliver_release = true;
    }
    if (cancelled_) return finish_with(refused(errc::cancelled, "campaign cancelled"));  // r.lock releases
    if (!r) {
      // An unbounded campaign's acquire reached its slice's deadline: go on.
      if (options_.deadline.count() == 0 && retryable(r.report.error)) {
        last_failure_ = std::move(r.report);
        return attempt();
      }
      return finish_with(std::move(r.report));
    }
    lock_ = std::move(r.lock);
    const lease l = lock_.info();
    const std::string term = std::to_string(l.fence.value_or(0));
    auto ok = std::make_shared<std::size_t>(0);
    auto parse = [ok](std::size_t, const resp_value& rep) {
      if (rep.type != resp_value::kind::integer) return false;
      if (rep.integer == 1) ++*ok;
      return true;
    };
    auto self = keep();
    plain_round(*core_,
                {"EVAL", kElectionPublish, "2", core_->key_for(l.resource), record_key(*core_, l.resource), l.token, term,
                 identity_},
                parse, [self, ok](report rep) { self->published(*ok, rep); });
  }

  void published(std::size_t ok, report rep) {
    if (cancelled_) return finish_with(refused(errc::cancelled, "campaign cancelled"));  // lock_ releases
    if (ok >= core_->size() / 2 + 1 && lock_.owns_lock()) {
      campaign_result res;
      res.report = std::move(rep);
      res.leadership = leadership_access::make(std::move(lock_), role_, identity_);
      *handed_out_ = true;  // loop thread, as on_lost
      finish(std::move(res));
      return;
    }
    rep.error = errc::unavailable;
    last_failure_ = rep;
    auto self = keep();
    // The lock was won but its record not published on a quorum: release and try
    // again — at most kMaxPublishFailures times in a row. A refusal that does not
    // go away (an ACL without the record key, a script error) would otherwise loop
    // acquire + publish + release at network speed (review 13b, A7d); the
    // campaign then ends with the last publication's report (unavailable).
    if (++publish_failures_ >= kMaxPublishFailures) {
      return lock_.release_async([self, rep](report) { self->finish_with(rep); });
    }
    lock_.release_async([self](report) { self->attempt(); });
  }

  void finish_with(report r) {
    if (finished()) return;
    campaign_result res;
    res.report = std::move(r);
    finish(std::move(res));
  }

  client& client_;
  std::shared_ptr<core> core_;
  std::string role_, identity_;
  campaign_options options_;
  steady_clock::time_point started_;
  std::uint64_t acquire_id_ = 0;
  bool acquiring_ = false;
  bool cancelled_ = false;
  lock lock_;
  report last_failure_;
  std::shared_ptr<bool> handed_out_;  // the current attempt's leadership was handed out (loop thread)
  int publish_failures_ = 0;          // consecutive publications short of a quorum
};

}  // namespace
}  // namespace detail

std::string election::resource_for(std::string_view role) { return "election:" + std::string(role); }

election::election(client& c) : client_(c), campaigns_(std::make_shared<detail::campaigns>()) {}

std::uint64_t election::campaign_async(std::string role, std::string identity, campaign_options options,
                                       std::function<void(campaign_result)> done) {
  const std::uint64_t id = campaigns_->ids.fetch_add(1) + 1;
  auto c = client_.core_;
  auto reg = campaigns_;
  auto finish = std::make_shared<std::function<void(campaign_result)>>(std::move(done));
  auto op = std::make_shared<detail::campaign_op>(client_, c, std::move(role), std::move(identity), std::move(options),
                                                  [reg, id, finish](campaign_result r) {
                                                    {
                                                      std::lock_guard<std::mutex> g(reg->mu);
                                                      reg->cancels.erase(id);
                                                    }
                                                    (*finish)(std::move(r));
                                                  });
  {
    std::lock_guard<std::mutex> g(reg->mu);
    std::weak_ptr<detail::campaign_op> w = op;
    reg->cancels[id] = [w] {
      if (auto o = w.lock()) o->cancel();
    };
  }
  if (!c->post([op] { op->start(); })) {
    // The loop has finished (client.h, "Callbacks"): answered here, cancelled.
    {
      std::lock_guard<std::mutex> g(reg->mu);
      reg->cancels.erase(id);
    }
    campaign_result r;
    r.report.error = errc::cancelled;
    for (const auto& n : c->nodes()) r.report.nodes.push_back(node_result{n.display, node_status::cancelled, "client shut down", {}});
    (*finish)(std::move(r));
  }
  return id;
}

void election::cancel(std::uint64_t campaign_id) {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> g(campaigns_->mu);
    auto it = campaigns_->cancels.find(campaign_id);
    if (it == campaigns_->cancels.end()) return;
    fn = it->second;
  }
  client_.core_->post(std::move(fn));
}

campaign_result election::campaign(std::string_view role, std::string_view identity,
                                   const campaign_options& options) {
  auto c = client_.core_;
  auto refused = [c](errc e) {
    campaign_result r;
    r.report.error = e;
    for (const auto& n : c->nodes()) r.report.nodes.push_back(node_result{n.display, node_status::pending, {}, {}});
    return r;
  };
  return detail::run_sync<campaign_result>(
      *c,
      [this, role = std::string(role), identity = std::string(identity), options](
          std::function<void(campaign_result)> done) mutable {
        auto op = std::make_shared<detail::campaign_op>(client_, client_.core_, std::move(role), std::move(identity),
                                                        std::move(options), std::move(done));
        op->start();
      },
      refused);
}

leader_info election::observe(std::string_view role) {
  auto c = client_.core_;
  auto refused = [c](errc e) {
    leader_info r;
    r.report.error = e;
    for (const auto& n : c->nodes()) r.report.nodes.push_back(node_result{n.display, node_status::pending, {}, {}});
    return r;
  };
  const auto called = c->now();
  return detail::run_sync<leader_info>(
      *c,
      [c, called, res = resource_for(role)](std::function<void(leader_info)> done) mutable {
        detail::observe(*c, std::move(res), [c, called, done = std::move(done)](leader_info i) {
          i.report.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(c->now() - called);
          done(std::move(i));
        });
      },
      refused);
}

}  // namespace redlock
