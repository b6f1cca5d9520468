// A lock holder process for tests/integration/fencing_test.cc: it takes a fenced
// lock over real Redlock nodes, reads a counter kept in a resource redis-server,
// waits for "go" on stdin, and writes the counter + 1 back. The test SIGSTOPs it
// between its read and its write, past its TTL (a GC pause), lets another holder
// take the lock, and then lets it resume.
//
// Usage: fencing_holder NODES PORT RESOURCE DATA_KEY SEEN_KEY TTL_MS READ WRITE
//   NODES     the lock nodes' URIs, comma-separated
//   PORT      the resource redis-server on 127.0.0.1
//   RESOURCE  the lock's resource name
//   DATA_KEY  the counter in the resource; SEEN_KEY the highest token it has seen
//   TTL_MS    the lock's TTL (no watchdog)
//   READ      plain (GET) | fenced (redlock::fenced_read_script)
//   WRITE     fenced (redlock::fenced_write_script) | cas (redlock::fenced_compare_and_set_script)
//
// One line on stdout per step:
//   fence <N>                        the lock is held with fencing token N
//   read <value>|nil|stale           the value read (stale: the fenced read refused the token)
//   write written|stale|changed <ms> the write's outcome and the lock's remaining validity
//   error <text>                     then exit status 2
// Exit status 0 after the write (or after a stale read), 3 when stdin closes before
// "go" (the test gave up). The process dies with the test (PR_SET_PDEATHSIG).
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "redlock/redlock.h"

namespace {

using namespace std::chrono_literals;

[[noreturn]] void fail(const std::string& what) {
  std::printf("error %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(2);
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

class resource {
 public:
  explicit resource(int port) {
    const timeval tv{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c_ == nullptr || c_->err != 0) fail("cannot connect to the resource");
    (void)redisSetTimeout(c_, tv);
  }
  ~resource() { redisFree(c_); }
  resource(const resource&) = delete;
  resource& operator=(const resource&) = delete;

  reply_ptr run(const std::vector<std::string>& argv) {
    std::vector<const char*> args;
    std::vector<std::size_t> lens;
    for (const auto& a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), args.data(), lens.data()));
    if (r == nullptr) fail(std::string("resource: ") + c_->errstr);
    reply_ptr p(r);
    if (p->type == REDIS_REPLY_ERROR) fail("resource: " + std::string(p->str, p->len));
    return p;
  }

 private:
  redisContext* c_ = nullptr;
};

std::string text(const redisReply* r) {
  if (r->type == REDIS_REPLY_NIL) return "nil";
  if (r->type != REDIS_REPLY_STRING) fail("resource: a string or nil reply was expected");
  return std::string(r->str, r->len);
}

// Blocks until a "go" line arrives on stdin; false on EOF. Survives SIGSTOP/SIGCONT
// (a read interrupted by them is retried).
bool wait_for_go() {
  std::string line;
  char ch = 0;
  for (;;) {
    const ssize_t n = ::read(0, &ch, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (ch == '\n') {
      if (line == "go") return true;
      line.clear();
    } else {
      line += ch;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Die with the test, also while stopped (SIGKILL needs no SIGCONT).
  const pid_t parent = ::getppid();
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 3;
  if (argc != 9) fail("usage: fencing_holder NODES PORT RESOURCE DATA_KEY SEEN_KEY TTL_MS READ WRITE");
  const std::vector<std::string> nodes = split(argv[1], ',');
  const int port = std::atoi(argv[2]);
  const std::string res = argv[3], data = argv[4], seen = argv[5];
  const auto ttl = std::chrono::milliseconds(std::atoll(argv[6]));
  const std::string read_mode = argv[7], write_mode = argv[8];
  if (read_mode != "plain" && read_mode != "fenced") fail("READ must be plain or fenced");
  if (write_mode != "fenced" && write_mode != "cas") fail("WRITE must be fenced or cas");

  redlock::client_options co;
  co.nodes = nodes;
  // Generous for a loaded machine running sanitizers, far below the TTLs used.
  co.command_timeout = 500ms;
  co.connect_timeout = 2000ms;
  redlock::client client(co);

  redlock::acquire_options o;
  o.ttl = ttl;
  o.fencing = true;
  // Retries until an earlier holder's keys expired (bounded by the deadline).
  o.retry.max_attempts = 100000;
  o.retry.base_delay = 20ms;
  o.retry.max_delay = 100ms;
  o.retry.deadline = 30000ms;
  auto r = client.acquire(res, o);
  if (!r) fail("acquire: " + r.report.message());
  if (!r.lock.fence()) fail("acquire: no fence");
  const std::string fence = std::to_string(*r.lock.fence());
  say("fence " + fence);

  resource store(port);
  std::string value;
  if (read_mode == "plain") {
    value = text(store.run({"GET", data}).get());
  } else {
    reply_ptr rr = store.run({"EVAL", redlock::fenced_read_script, "2", data, seen, fence});
    if (rr->type != REDIS_REPLY_ARRAY || rr->elements != 2 || rr->element[0]->type != REDIS_REPLY_INTEGER) {
      fail("fenced read: unexpected reply");
    }
    if (rr->element[0]->integer == 0) {
      say("read stale");
      return 0;
    }
    value = text(rr->element[1]);
  }
  say("read " + value);

  // The test stops this process here, past its TTL, and sends "go" before SIGCONT.
  if (!wait_for_go()) return 3;

  const long long current = value == "nil" ? 0 : std::atoll(value.c_str());
  const std::string next = std::to_string(current + 1);
  std::string outcome;
  if (write_mode == "fenced") {
    reply_ptr wr = store.run({"EVAL", redlock::fenced_write_script, "2", data, seen, fence, next});
    if (wr->type != REDIS_REPLY_INTEGER) fail("fenced write: unexpected reply");
    outcome = wr->integer == 1 ? "written" : wr->integer == 0 ? "stale" : "unexpected";
  } else {
    std::vector<std::string> cmd{"EVAL", redlock::fenced_compare_and_set_script, "2", data, seen, fence,
                                 next};
    if (value != "nil") cmd.push_back(value);  // no expected value: the key must be absent
    reply_ptr wr = store.run(cmd);
    if (wr->type != REDIS_REPLY_INTEGER) fail("compare-and-set: unexpected reply");
    outcome = wr->integer == 1    ? "written"
              : wr->integer == 0  ? "stale"
              : wr->integer == -1 ? "changed"
                                  : "unexpected";
  }
  say("write " + outcome + " " + std::to_string(r.lock.remaining_validity().count()));
  return 0;
}
