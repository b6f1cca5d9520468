// A connection's life, top to bottom: connect (with backoff after a failure) ->
// link up -> handshake (AUTH/HELLO, INFO, TIME: the guards' inputs) -> ready ->
// requests submitted, encoded, pipelined -> replies matched in order, each judged
// by the guards (a grant's exclusion travels in its reply_event) -> deadlines and
// stalls -> a failed link fails every request in flight once -> reconnect; and
// shutdown, which cancels what is left. Loop thread only.
#include "node/connection.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "protocol/info.h"
#include "protocol/reply.h"
#include "pure/retry.h"

namespace redlock::detail {
namespace {

constexpr std::uint64_t kNoDeadline = ~std::uint64_t{0};

// The writes whose grants must reach the replicas before they count.
bool confirmed_write(script_id id) noexcept {
  return acquires(id) || extends(id) || id == script_id::fence_commit;
}

}  // namespace

connection::connection(node_host& owner, std::size_t index, node_address address)
    : host_(owner),
      index_(index),
      address_(std::move(address)),
      guards_(guard_settings::of(owner.options(), owner.restart_quarantine())) {}

connection::~connection() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

void connection::start() { connect_now(); }

void connection::connect_now() {
  backoff_timer_ = 0;
  if (state_ == state::closed) return;
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = redisReaderCreate();
  partial_reply_bytes_ = 0;
  last_reply_ms_ = 0;
  scripts_loaded_ = 0;
  connect_deadline_ms_ = host_.now_ms() + static_cast<std::uint64_t>(host_.options().connect_timeout.count());
  connect_timer_ = host_.schedule(host_.options().connect_timeout, [this] {
    connect_timer_ = 0;
    std::string detail = "connect/handshake took longer than " +
                         std::to_string(host_.options().connect_timeout.count()) + " ms";
    if (link_ != nullptr && state_ == state::connecting) {
      if (std::string why = link_->stalled_on(); !why.empty()) detail += ": " + why;
    }
    fail_connection(node_status::timeout, std::move(detail));
  });
  state_ = state::connecting;
  node_status status = node_status::connection_error;
  std::string error;
  link_ = host_.io().open(address_, connect_deadline_ms_, *this, status, error);
  if (!link_) fail_connection(status, std::move(error));
}

void connection::on_link_down(node_status status, std::string detail) {
  // A TLS verification failure is as permanent as a refused password: reconnects
  // go on in the background (a certificate may be fixed server-side), at the
  // longest backoff.
  const bool permanent = status == node_status::tls_error;
  // A redis:// stream that came up and was reset before the first reply of the
  // handshake: what a TLS-only node does with our plaintext (it stops reading at
  // the first record header, closes with the rest unread, and its alert is lost
  // to the reset). Only a hint: a Redis node answers, even to refuse, and one
  // that merely closes (end of stream) gets none.
  if (status == node_status::connection_error && !address_.tls && state_ == state::handshake &&
      last_reply_ms_ == 0 && detail.find("connection reset") != std::string::npos) {
    detail += " before any reply (if the node only speaks TLS, use rediss://)";
  }
  fail_connection(status, std::move(detail), permanent);
}

void connection::on_link_up() {
  state_ = state::handshake;
  // An ACL may have changed since: the next refusal says so again.
  evalsha_refused_ = false;
  scripts_refused_by_acl_ = false;
  // scripts_unknown_ stays until the handshake shows another server (a new run_id):
  // rename-command needs a restart, and a reconnect must not give the node its vote
  // back for one more plain SET NX (adversarial pass, issue 23).
  guards_.forget_memory();  // read again on every connection: CONFIG SET may have changed it
  // The credentials for this attempt: the URI's, or the provider's (called once per
  // attempt that reached the server, so a rotated secret is picked up by the next
  // reconnect). A provider that throws fails this attempt like a refused connect: it
  // is retried with backoff. Its exception text is not shown (it may hold secrets).
  std::string username = address_.username;
  std::string password = address_.password;
  bool auth = address_.has_password && !no_auth_;
  if (const auto& provider = host_.options().credentials_provider; provider && !no_auth_) {
    try {
      credentials c = provider(address_.display);
      username = std::move(c.username);
      password = std::move(c.password);
      auth = !password.empty();
    } catch (...) {
      return fail_connection(node_status::connection_error,
                             "credentials_provider threw an exception (its text is not shown: it may hold secrets); "
                             "retrying with backoff");
    }
  }
  handshake::plan p;
  p.auth = auth;
  p.username = std::move(username);
  p.password = std::move(password);
  p.db = address_.db;
  p.voting = push_ == nullptr;
  p.restart_guard = host_.options().restart_quarantine.count() != 0;
  p.clock_guard = host_.options().clock_jump_threshold.count() > 0;
  p.confirm_replication = confirm_;
  handshake_.begin(p, out_);
  if (handshake_.asks_time()) time_sent_ = host_.now();
  host_.want_flush(this);
}

void connection::on_link_data(const char* data, std::size_t n) {
  if (redisReaderFeed(reader_, data, n) != REDIS_OK) {
    fail_connection(node_status::protocol_error, "reply buffer error");
    return;
  }
  partial_reply_bytes_ += n;
  // Until this link is replaced or dropped (a reply may fail the connection).
  const link* current = link_.get();
  while (link_ != nullptr && link_.get() == current) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      fail_connection(node_status::protocol_error,
                      "not a Redis reply: " + (reader_->errstr[0] ? printable_line(reader_->errstr) : "parse error"));
      return;
    }
    if (reply == nullptr) {
      // Bytes that do not complete a reply neither count as progress for the stall
      // detector nor may pile up: the reader holds at most max_reply_bytes (plus
      // one read buffer) of an unfinished reply.
      const std::size_t cap = host_.options().max_reply_bytes;
      if (partial_reply_bytes_ > cap) {
        fail_connection(node_status::protocol_error, "reply larger than max_reply_bytes (" + std::to_string(cap) +
                                                         " bytes): connection closed");
      }
      return;
    }
    // A complete reply: progress. What stays buffered belongs to the next one (the
    // parts of it already parsed out of the buffer are not counted: at most one
    // read buffer).
    last_reply_ms_ = host_.now_ms();
    partial_reply_bytes_ = reader_->len - reader_->pos;
    std::unique_ptr<redisReply, reply_deleter> r(static_cast<redisReply*>(reply));
    if (state_ == state::handshake) {
      on_handshake_reply(r.get());
    } else if (state_ == state::ready) {
      on_request_reply(std::move(r));
    }
  }
}

void connection::on_handshake_reply(redisReply* r) {
  const handshake::answer a = handshake_.take(*r);
  if (a.verdict == handshake::answer::next::fail) return fail_connection(a.status, a.detail, a.permanent);
  if (a.carries == handshake::answer::content::server_info) {
    on_info(a.text);
    // Another server (restarted, replaced) may run scripts: it gets its vote back until
    // it refuses one. (A server whose run_id is unknown, INFO refused, stays as it was.)
    if (scripts_unknown_ && guards_.run_id() != scripts_unknown_run_id_) scripts_unknown_ = false;
  } else if (a.carries == handshake::answer::content::memory_info) {
    on_info_memory(a.text);
  } else if (a.carries == handshake::answer::content::replicas) {
    replicas_ = a.replicas;
    no_vote_ = a.no_vote;
    // The mark survives a reconnect to the same server (its run_id): a drop while the
    // link was down is a drop too. Another server (or the first handshake) starts
    // its own mark; a restart is the restart guard's.
    if (a.no_vote.empty()) mark_.observe(guards_.run_id(), info_replicas(a.text, a.replicas), host_.now_ms());
  } else if (a.carries == handshake::answer::content::server_time) {
    // Compared with the sample from before the reconnect (if any): a jump while
    // the connection was down is a jump too.
    if (const auto server_us = a.server_us) {
      const auto rtt = host_.now() - time_sent_;
      observe_server_time(*server_us, time_sent_ + rtt / 2,
                          std::chrono::duration_cast<std::chrono::microseconds>(rtt).count() / 2 + 1);
    }
  }
  if (a.verdict == handshake::answer::next::ready) become_ready();
}

void connection::on_info(std::string_view info) {
  const std::string run_id = info_field(info, "run_id");
  const std::string uptime = info_field(info, "uptime_in_seconds");
  if (run_id.empty() || uptime.empty()) return;
  const auto now = host_.now();
  const std::optional<quarantine_note> note = guards_.observe_server(run_id, uptime, now);
  if (note && host_.observing()) note_quarantine(*note, now);
}

void connection::on_info_memory(std::string_view info) {
  // Kept printable: they reach reports, node_view and the CLI.
  std::string policy = printable_line(info_field(info, "maxmemory_policy"), 64);
  std::string maxmemory = printable_line(info_field(info, "maxmemory"), 32);
  guards_.observe_memory(std::move(policy), std::move(maxmemory));
  if (eviction_risk_of(guards_.maxmemory_policy()) == eviction_risk::none) return;
  if (!host_.options().on_warning && !host_.observing()) return;
  warning w;
  w.code = warning_code::eviction_policy;
  w.node = address_.display;
  w.message = eviction_warning_text(address_.display, guards_.maxmemory_policy(), guards_.maxmemory());
  host_.warn(w);
}

std::string connection::acquire_exclusion(std::chrono::steady_clock::time_point now,
                                          std::chrono::milliseconds quarantine) const {
  const std::string* same = guards_.run_id().empty() ? nullptr : host_.same_server(index_, guards_.run_id());
  std::string why = guards_.acquire_exclusion(now, quarantine, same);
  if (why.empty() && scripts_refused()) why = kScriptsUnknownExclusion;
  return why;
}

void connection::note_quarantine(const quarantine_note& note, std::chrono::steady_clock::time_point at) {
  node_quarantine_event e;
  e.at = at;
  e.index = index_;
  e.node = address_.display;
  e.reason = note.reason;
  e.until = note.until;
  e.detail = note.detail;
  guards_.note_reported(note.reason);
  host_.emit(&observer::on_node_quarantined, e, "on_node_quarantined");
  arm_quarantine_timer();
}

void connection::arm_quarantine_timer() {
  // One timer per node while it is quarantined (observers only): "cleared" is
  // sent when the end of the latest quarantine has passed on the client's clock.
  if (quarantine_timer_ != 0 || state_ == state::closed || host_.closing()) return;
  const auto now = host_.now();
  const auto end = guards_.quarantine_end();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now) + std::chrono::milliseconds(1);
  quarantine_timer_ = host_.schedule(std::max(left, std::chrono::milliseconds(1)), [this] {
    quarantine_timer_ = 0;
    const auto t = host_.now();
    const auto until = guards_.quarantine_end();
    if (t < until) return arm_quarantine_timer();  // extended meanwhile (or the timer ran early)
    node_quarantine_event e;
    e.at = t;
    e.index = index_;
    e.node = address_.display;
    e.reason = guards_.last_reason();
    e.until = until;
    e.detail = "quarantine over: the node votes on acquires again";
    host_.emit(&observer::on_node_cleared, e, "on_node_cleared");
  });
}

bool connection::time_sample_due() const {
  return guards_.time_sample_due([this] { return host_.now(); });
}

void connection::observe_server_time(std::int64_t server_us, std::chrono::steady_clock::time_point local_mid,
                                     std::int64_t half_rtt_us) {
  const std::optional<quarantine_note> note = guards_.observe_server_time(server_us, local_mid, half_rtt_us);
  if (note && host_.observing()) note_quarantine(*note, host_.now());
}

void connection::become_ready() {
  if (connect_timer_ != 0) host_.cancel_timer(connect_timer_);
  connect_timer_ = 0;
  state_ = state::ready;
  if (ever_connected_ && push_ == nullptr) host_.note_reconnect();
  if (host_.observing() && push_ == nullptr) {
    reported_down_ = false;
    node_event e;
    e.at = host_.now();
    e.index = index_;
    e.node = address_.display;
    host_.emit(&observer::on_node_up, e, "on_node_up");
  }
  ever_connected_ = true;
  failures_ = 0;
  permanent_failure_ = false;
  const std::uint64_t ready_deadline =
      host_.now_ms() + static_cast<std::uint64_t>(host_.options().command_timeout.count());
  for (request& r : queue_) {
    if (!r.sent && !r.expired) {
      r.overdue_ms = std::min(r.overdue_ms, ready_deadline);
      if (r.deadline_ms != kNoDeadline) r.deadline_ms = r.overdue_ms;
      encode(r);  // after the deadline is set: a WAIT takes its time from it
    }
  }
  if (deadline_timer_ != 0) host_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
  arm_deadline_timer();
  // Requests that expired while connecting were never sent: drop them.
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const request& r) { return !r.sent; }),
               queue_.end());
  host_.want_flush(this);
  if (push_ != nullptr) push_->on_sub_ready(index_);
}

void connection::encode(request& r) {
  // Every acquire form (the plain SET, and the acquire scripts) gets a TIME right
  // behind it when the clock-jump guard wants a sample: the guard judges the very
  // reply that grants, with no extra round trip, and the scripts never call TIME
  // themselves (a user whose ACL lacks +time can still lock; its refused TIME is
  // consumed without a sample).
  // Extensions too: an extension a node runs while its clock is stepped back sets
  // an expiry that a later forward correction brings early; the holder must see
  // that jump at the very reply that extends (round::on_reply).
  const script_id id = r.cmd->script();
  r.with_time = (acquires(id) || extends(id)) && time_sample_due();
  if (id == script_id::acquire_set) {
    // The plain SET form, unless this server rejected it before (then EVAL).
    const bool plain = !r.force_eval && !r.cmd->force_eval() && !set_get_unsupported_;
    out_.append(!plain ? r.cmd->eval_form() : r.with_time ? r.cmd->timed_form() : r.cmd->sha_form());
    if (!plain && r.with_time) append_resp(out_, {"TIME"});
    append_wait(r);
    r.used_sha = plain;
    r.sent = true;
    return;
  }
  const unsigned bit = 1u << static_cast<unsigned>(id);
  const bool use_sha = !r.force_eval && !r.cmd->force_eval() && !evalsha_refused_ && (scripts_loaded_ & bit) != 0;
  out_.append(use_sha ? r.cmd->sha_form() : r.cmd->eval_form());
  if (r.with_time) append_resp(out_, {"TIME"});
  append_wait(r);
  // Replies come in order: once EVAL is queued, later EVALSHAs on this connection
  // find the script loaded.
  scripts_loaded_ |= bit;
  r.used_sha = use_sha;
  r.sent = true;
}

void connection::submit(std::shared_ptr<const wire> cmd, bool force_eval, std::shared_ptr<sink> s,
                        std::uint32_t tag) {
  if (state_ == state::backoff || state_ == state::closed || state_ == state::idle) {
    reply_event ev;
    ev.status = state_ == state::closed ? node_status::cancelled : down_status_;
    ev.detail = state_ == state::closed ? std::string_view("client shut down") : std::string_view(down_detail_);
    ev.unsent = true;
    s->on_reply(index_, tag, ev);
    return;
  }
  request r;
  r.cmd = std::move(cmd);
  r.force_eval = force_eval;
  r.target = std::move(s);
  r.tag = tag;
  r.submitted = host_.now();
  const std::uint64_t now_ms = host_.now_ms();
  const auto cmd_ms = static_cast<std::uint64_t>(host_.options().command_timeout.count());
  // During the first connect, the connect timeout bounds the wait for the
  // connection and the command timeout starts when the request is written
  // (become_ready()). A node that was connected before and is reconnecting gets
  // only the command timeout: it is suspect.
  r.overdue_ms = now_ms + cmd_ms;
  if (state_ != state::ready && !ever_connected_) {
    r.overdue_ms = std::max(r.overdue_ms, connect_deadline_ms_ + cmd_ms);
  }
  r.deadline_ms = r.cmd->untimed() ? kNoDeadline : r.overdue_ms;
  queue_.push_back(std::move(r));
  if (state_ == state::ready) {
    encode(queue_.back());
    host_.want_flush(this);
  }
  if (deadline_timer_ == 0) {
    arm_deadline_timer();
  } else if (queue_.back().deadline_ms < deadline_armed_at_) {
    host_.cancel_timer(deadline_timer_);
    deadline_timer_ = 0;
    arm_deadline_timer();
  }
}


void connection::flush() {
  dirty_ = false;
  if (out_.empty() || link_ == nullptr ||
      (state_ != state::ready && state_ != state::handshake)) {
    return;
  }
  // The requests encoded since the last flush go out now (or wait in libuv's write
  // queue, which only a server that stopped reading fills): the stall detector
  // counts from here. They are at the back of the queue.
  const std::uint64_t now_ms = host_.now_ms();
  for (auto it = queue_.rbegin(); it != queue_.rend() && it->sent && it->written_ms == kUnwritten; ++it) {
    it->written_ms = now_ms;
  }
  if (std::string error = link_->write(out_); !error.empty()) {
    fail_connection(node_status::connection_error, std::move(error));
  }
}

void connection::resend_with_body(request& r) {
  // The same request again, as EVAL with the script body; its latency still counts
  // from the first submission.
  const auto submitted = r.submitted;
  const std::uint32_t tag = r.tag;
  submit(std::move(r.cmd), true, std::move(r.target), tag);
  if (!queue_.empty() && queue_.back().tag == tag) queue_.back().submitted = submitted;
}

void connection::complete(request& r, const reply_event& ev) {
  std::shared_ptr<sink> target = std::move(r.target);
  if (target) target->on_reply(index_, r.tag, ev);
}

void connection::append_wait(request& r) {
  r.wait_for = 0;
  r.counted = false;
  if (!confirm_ || !confirmed_write(r.cmd->script())) return;
  if (replicas_ > 0 && no_vote_.empty()) {
    // Half the time left, so that WAIT answers before the request's own deadline
    // (WAIT 0 would block for ever: at least 1 ms).
    const std::uint64_t now = host_.now_ms();
    const std::uint64_t cmd_ms = static_cast<std::uint64_t>(host_.options().command_timeout.count());
    const std::uint64_t left =
        r.deadline_ms == kNoDeadline ? cmd_ms : (r.deadline_ms > now ? r.deadline_ms - now : 0);
    const std::string n = std::to_string(replicas_);
    const std::string t = std::to_string(std::max<std::uint64_t>(left / 2, 1));
    append_resp(out_, {"WAIT", n, t});
    r.wait_for = replicas_;
  }
  // The replicas attached now, after the write (and its WAIT): the count the WAIT
  // used may be stale (a replica attached since), and one attached later gets the
  // write by its sync. Also whether the server is still a master.
  append_resp(out_, {"INFO", "replication"});
  r.counted = true;
}

void connection::on_request_reply(std::unique_ptr<redisReply, reply_deleter> owned) {
  if (push_ != nullptr && owned->type == REDIS_REPLY_ARRAY && owned->elements == 3 &&
      owned->element[0]->type == REDIS_REPLY_STRING &&
      std::string_view(owned->element[0]->str, owned->element[0]->len) == "message") {
    push_->on_push(index_, *owned);
    return;
  }
  if (queue_.empty()) {
    fail_connection(node_status::protocol_error, "reply without a request");
    return;
  }
  bool time_sampled = false;
  // A request's replies: its own, then its pipelined TIME and WAIT (if any), all
  // held until the last is in.
  std::unique_ptr<redisReply, reply_deleter> wait_reply;
  std::unique_ptr<redisReply, reply_deleter> count_reply;
  const std::size_t extra = (queue_.front().with_time ? 1u : 0u) + (queue_.front().wait_for > 0 ? 1u : 0u) +
                            (queue_.front().counted ? 1u : 0u);
  if (extra > 0) {
    held_.push_back(std::move(owned));
    if (held_.size() <= extra) return;
    owned = std::move(held_[0]);
    std::size_t next = 1;
    if (queue_.front().with_time) {
      const std::unique_ptr<redisReply, reply_deleter> time_reply = std::move(held_[next++]);
      // An error (TIME not permitted to this user) leaves the guard without a sample.
      if (const auto server_us = parse_time_reply(time_reply.get())) {
        const auto submitted = queue_.front().submitted;
        const auto rtt = host_.now() - submitted;
        observe_server_time(*server_us, submitted + rtt / 2,
                            std::chrono::duration_cast<std::chrono::microseconds>(rtt).count() / 2 + 1);
        time_sampled = true;
      }
    }
    if (queue_.front().wait_for > 0) wait_reply = std::move(held_[next++]);
    if (queue_.front().counted) count_reply = std::move(held_[next]);
    held_.clear();
  }
  redisReply* reply = owned.get();
  request r = std::move(queue_.front());
  queue_.pop_front();
  if (host_.observing() && host_.options().slow_node_threshold.count() > 0) {
    // Every reply, also one that arrives after its request timed out.
    const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(host_.now() - r.submitted);
    if (latency > host_.options().slow_node_threshold) {
      node_slow_event e;
      e.at = host_.now();
      e.index = index_;
      e.node = address_.display;
      e.latency = latency;
      e.kind = kind_of(r.cmd->script());
      host_.emit(&observer::on_node_slow, e, "on_node_slow");
    }
  }
  if (r.expired) {
    host_.note_quiet();
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR && r.used_sha && r.cmd->script() == script_id::acquire_set &&
      std::string_view(reply->str, reply->len).rfind("ERR syntax error", 0) == 0) {
    // A server older than 7.0 refuses SET ... NX ... GET: use the script from now on.
    set_get_unsupported_ = true;
    return resend_with_body(r);
  }
  if (reply->type == REDIS_REPLY_ERROR && r.used_sha && r.cmd->script() != script_id::acquire_set &&
      is_evalsha_unavailable(std::string_view(reply->str, reply->len))) {
    // EVALSHA refused (the user's ACL, or renamed) where EVAL may run: the body from now on.
    evalsha_refused_ = true;
    return resend_with_body(r);
  }
  if (reply->type == REDIS_REPLY_ERROR && std::string_view(reply->str, reply->len).rfind("NOSCRIPT", 0) == 0) {
    // The script cache was flushed (SCRIPT FLUSH, restart): send the body again.
    scripts_loaded_ &= ~(1u << static_cast<unsigned>(r.cmd->script()));
    if (r.used_sha) return resend_with_body(r);
  }
  reply_event ev;
  ev.reply = reply;
  ev.time_sampled = time_sampled;
  ev.latency = std::chrono::duration_cast<std::chrono::microseconds>(host_.now() - r.submitted);
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string_view e(reply->str, reply->len);
    // Scripts unknown here (renamed or disabled: until another server answers) or refused
    // by the user's ACL (until the next handshake): this node votes on no acquire (a
    // plain SET NX would grant a lock nobody could release).
    if (is_scripts_unknown(e)) {
      scripts_unknown_ = true;
      scripts_unknown_run_id_ = guards_.run_id();
    }
    if (is_scripts_refused_by_acl(e)) scripts_refused_by_acl_ = true;
    if (is_auth_error(e)) {
      ev.status = node_status::auth_error;
      ev.reply = nullptr;
      std::string d = first_line(reply->str, reply->len);
      ev.detail = d;
      complete(r, ev);
      host_.note_quiet();
      return;
    }
  }
  // The guards also judge this very reply, should it grant (round::on_reply counts
  // the vote only if excluded_by is ""): an acquire's, sampled or not, and an
  // extension's that carried a TIME (observed above).
  std::string excluded;  // ev.excluded_by's text; "" (nothing allocated) unless a guard excludes
  const script_id id = r.cmd->script();
  if (time_sampled || acquires(id)) {
    const auto now = host_.now();
    const auto quarantine = host_.restart_quarantine();
    if (!acquires(id)) {
      excluded = guards_.grant_exclusion(node_guards::grant::extension, now, quarantine, nullptr);
    } else {
      const std::string* same = guards_.run_id().empty() ? nullptr : host_.same_server(index_, guards_.run_id());
      excluded = guards_.grant_exclusion(
          id == script_id::acquire_fenced ? node_guards::grant::fenced_acquire : node_guards::grant::acquire, now,
          quarantine, same);
      if (excluded.empty() && scripts_refused()) excluded = kScriptsUnknownExclusion;
    }
  }
  if (r.counted) {
    // How many replicas have this write (and every earlier one of this connection):
    // WAIT's answer (0 when none was sent), against the replicas attached after it.
    const long long k = !wait_reply ? 0 : wait_reply->type == REDIS_REPLY_INTEGER ? wait_reply->integer : -1;
    std::string not_master;
    int attached = 0;
    if (count_reply && count_reply->type == REDIS_REPLY_STRING) {
      attached = handshake::replicas_of(std::string_view(count_reply->str, count_reply->len), not_master);
    } else {
      not_master = "INFO replication refused after the write: its replicas cannot be counted";
    }
    no_vote_ = not_master;
    if (not_master.empty()) replicas_ = attached;  // what the next write waits for
    const long long needed = std::max<long long>(attached, r.wait_for);
    // Fewer replicas than this master had: one may have left it to follow a promoted
    // one (a failover, whose other replicas Sentinel or the cluster moves one by one
    // and which then drop what only this master gave them). No write counts until
    // every one is attached again or the endpoint confirms this server is still the
    // master (confirm_master, replica_mark).
    if (not_master.empty()) {
      mark_.observe(guards_.run_id(),
                    info_replicas(std::string_view(count_reply->str, count_reply->len), attached), host_.now_ms());
    }
    if (!not_master.empty()) {
      ev.unreplicated = true;
      if (excluded.empty()) excluded = not_master;
    } else if (mark_.dropped()) {
      ev.unreplicated = true;
      if (excluded.empty()) {
        excluded = "written, but " + mark_.drop_text() +
                   " (a failover?): no write counts until every replica it had is attached again, or until its "
                   "master is confirmed by a query sent once a failover begun before the drop would have ended";
      }
    } else if (k < needed) {
      ev.unreplicated = true;
      if (excluded.empty()) {
        excluded = k < 0 ? "written, but WAIT was refused (" +
                               (wait_reply->type == REDIS_REPLY_ERROR ? first_line(wait_reply->str, wait_reply->len)
                                                                      : std::string("not an integer")) +
                               "): not confirmed by its replicas"
                         : "written, but confirmed by " + std::to_string(k) + " of its " + std::to_string(needed) +
                               " replicas in the time left";
      }
    }
  }
  ev.excluded_by = excluded;
  complete(r, ev);
  host_.note_quiet();
}

std::uint64_t connection::stall_ms() const noexcept {
  // A connection whose oldest outstanding request has had no reply for this long
  // since it was written, and that completed no reply at all in that time, is
  // stalled (paused server, black hole, a trickle of bytes that never ends a
  // reply): it is closed and reconnected. An idle connection is never stalled: the
  // time counts from the write, not from the last byte received. Generous, because
  // a starved client machine looks the same.
  return std::max<std::uint64_t>(4 * static_cast<std::uint64_t>(host_.options().command_timeout.count()), 1000);
}

std::uint64_t connection::stall_at(std::uint64_t now) const noexcept {
  for (const request& r : queue_) {
    if (!r.sent) continue;
    // Not written yet (the flush follows in this loop iteration): counts as now.
    const std::uint64_t written = r.written_ms == kUnwritten ? now : r.written_ms;
    return std::max(r.overdue_ms, std::max(written, last_reply_ms_) + stall_ms());
  }
  return 0;
}

void connection::arm_deadline_timer() {
  // Deadlines grow along the queue (each is its submission + command_timeout), so
  // the first timed request still waiting holds the earliest one: no full scan
  // (untimed requests, rare, are stepped over).
  std::uint64_t next = 0;
  for (const request& r : queue_) {
    if (!r.expired && r.deadline_ms != kNoDeadline) {
      next = r.deadline_ms;
      break;
    }
  }
  const std::uint64_t now = host_.now_ms();
  if (const std::uint64_t stall = stall_at(now); stall != 0 && (next == 0 || stall < next)) next = stall;
  if (next == 0) return;
  deadline_armed_at_ = next;
  deadline_timer_ = host_.schedule(std::chrono::milliseconds(next > now ? next - now : 0), [this] {
    deadline_timer_ = 0;
    on_deadline_timer();
  });
}

void connection::on_deadline_timer() {
  const std::uint64_t now = host_.now_ms();
  const std::uint64_t cmd_ms = static_cast<std::uint64_t>(host_.options().command_timeout.count());
  struct expiry {
    std::shared_ptr<sink> target;
    std::uint32_t tag;
    bool unsent;
  };
  std::vector<expiry> expired;
  for (request& r : queue_) {
    if (r.expired || r.deadline_ms == kNoDeadline) continue;
    if (r.deadline_ms > now) break;  // deadlines grow along the queue
    r.expired = true;
    expired.push_back(expiry{std::move(r.target), r.tag, !r.sent});
  }
  const std::uint64_t stall = stall_at(now);
  const bool stalled = stall != 0 && stall <= now;
  const std::string detail = "no reply within " + std::to_string(cmd_ms) + " ms";
  for (auto& e : expired) {
    reply_event ev;
    ev.status = node_status::timeout;
    ev.detail = detail;
    ev.unsent = e.unsent;
    if (e.target) e.target->on_reply(index_, e.tag, ev);
  }
  if (stalled && state_ == state::ready) {
    fail_connection(node_status::timeout,
                    "node stalled: no reply for " + std::to_string(stall_ms()) + " ms to a request it was sent");
    return;
  }
  if (deadline_timer_ == 0) arm_deadline_timer();
  host_.note_quiet();
}

void connection::fail_connection(node_status status, std::string detail, bool permanent) {
  if (state_ == state::closed || state_ == state::backoff) return;
  if (connect_timer_ != 0) host_.cancel_timer(connect_timer_);
  connect_timer_ = 0;
  if (deadline_timer_ != 0) host_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
  link_.reset();
  out_.clear();
  held_.clear();
  down_status_ = status == node_status::timeout && !ever_connected_ ? node_status::connection_error : status;
  if (status == node_status::auth_error) down_status_ = node_status::auth_error;
  down_detail_ = detail;
  permanent_failure_ = permanent;
  const bool was_ready = state_ == state::ready;
  state_ = state::backoff;
  ++failures_;
  // Events are about the node's voting connection, not a waiters' subscriber
  // connection to it (push_: lib/notify.h).
  if (host_.observing() && push_ == nullptr && (was_ready || !reported_down_)) {
    // Before the requests it fails (their operations may finish now). Once per
    // outage: when a node that was up goes down, or the first failed attempt of a
    // node not seen up yet; later failed attempts of the same outage are
    // reconnect_scheduled events only.
    reported_down_ = true;
    node_event e;
    e.at = host_.now();
    e.index = index_;
    e.node = address_.display;
    e.status = down_status_;
    e.detail = detail;
    host_.emit(&observer::on_node_down, e, "on_node_down");
  }
  // Fail everything outstanding. Collect first: sinks may submit again.
  std::deque<request> pending;
  pending.swap(queue_);
  for (request& r : pending) {
    if (r.expired) continue;
    reply_event ev;
    ev.status = status;
    ev.detail = detail;
    ev.unsent = !r.sent;
    complete(r, ev);
  }
  if (push_ != nullptr) push_->on_sub_down(index_);
  if (host_.closing()) {
    state_ = state::closed;
    host_.note_quiet();
    return;
  }
  // Capped exponential backoff with jitter in [d/2, d].
  const auto& o = host_.options();
  const std::chrono::milliseconds delay =
      reconnect_delay(o.reconnect_min_backoff, o.reconnect_max_backoff, failures_, permanent, host_.jitter());
  backoff_timer_ = host_.schedule(delay, [this] { connect_now(); });
  if (host_.observing() && push_ == nullptr) {
    reconnect_scheduled e;
    e.at = host_.now();
    e.index = index_;
    e.node = address_.display;
    e.backoff = delay;
    e.reason = down_detail_;
    host_.emit(&observer::on_reconnect_scheduled, e, "on_reconnect_scheduled");
  }
  host_.note_quiet();
}

bool connection::quiet() const noexcept {
  for (const request& r : queue_) {
    if (!r.expired) return false;
  }
  return true;
}

void connection::shutdown() {
  if (connect_timer_ != 0) host_.cancel_timer(connect_timer_);
  if (backoff_timer_ != 0) host_.cancel_timer(backoff_timer_);
  if (deadline_timer_ != 0) host_.cancel_timer(deadline_timer_);
  if (quarantine_timer_ != 0) host_.cancel_timer(quarantine_timer_);
  connect_timer_ = backoff_timer_ = deadline_timer_ = quarantine_timer_ = 0;
  state_ = state::closed;
  link_.reset();
  held_.clear();
  std::deque<request> pending;
  pending.swap(queue_);
  for (request& r : pending) {
    if (r.expired) continue;
    reply_event ev;
    ev.status = node_status::cancelled;
    ev.detail = "client shut down";
    ev.unsent = !r.sent;
    complete(r, ev);
  }
}

void connection::confirm_master(std::uint64_t asked_ms, std::uint64_t settle_ms) {
  mark_.confirm(asked_ms, settle_ms);
}

}  // namespace redlock::detail
