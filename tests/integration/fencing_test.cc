// Fencing at the resource: what redlock/fencing.h's scripts protect, against real
// redis-server processes.
//
// FencedRmw: a read-modify-write of a counter by two lock holders that are separate
// processes (tests/integration/fencing_holder.cc, started with posix_spawn, so this
// multithreaded test never forks without exec: safe under ASan and TSan). Holder A
// reads, is SIGSTOPped past its TTL (a GC pause), B takes the lock with a higher
// fence and reads, A resumes and writes, then B writes. With a plain read and
// fenced_write_script both writes are accepted and one increment is lost; with
// fenced_read_script (or a compare-and-set) none is.
//
// FencingScripts: the scripts' contracts, edge cases and error replies, run on one
// redis-server. FenceCounterKeys: no key prefix makes a lock key a fence counter.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

extern char** environ;

namespace redlock::test {
namespace {

using std::chrono::milliseconds;
using clk = std::chrono::steady_clock;

std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

// ------------------------------------------------------------------ holder process

// One fencing_holder child: its stdin and stdout are pipes to this process.
// Not thread-safe; the destructor SIGKILLs and reaps a child still running.
class holder_process {
 public:
  explicit holder_process(const std::vector<std::string>& args) {
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);  // dup2 clears O_CLOEXEC on 0 and 1
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> full{REDLOCK_FENCING_HOLDER_PATH};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    }
  }
  ~holder_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    }
    if (to_child_ >= 0) ::close(to_child_);
    if (from_child_ >= 0) ::close(from_child_);
  }
  holder_process(const holder_process&) = delete;
  holder_process& operator=(const holder_process&) = delete;

  pid_t pid() const { return pid_; }

  // The next line the child prints (without '\n'). Throws on EOF, on an "error"
  // line, or when none arrives within `limit`.
  std::string next_line(milliseconds limit) {
    const auto end = clk::now() + limit;
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (line.rfind("error ", 0) == 0)
          throw std::runtime_error("holder " + std::to_string(pid_) + ": " + line);
        return line;
      }
      const auto left = std::chrono::duration_cast<milliseconds>(end - clk::now());
      if (left <= milliseconds(0))
        throw std::runtime_error("holder " + std::to_string(pid_) + ": no line in time");
      pollfd p{from_child_, POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      char chunk[256];
      const ssize_t got = ::read(from_child_, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw std::runtime_error("holder " + std::to_string(pid_) + ": exited early; output: " + buf_);
      buf_.append(chunk, static_cast<std::size_t>(got));
    }
  }
  // The next line, which must start with `word` + ' '; returns the rest.
  std::string expect(const std::string& word, milliseconds limit) {
    const std::string line = next_line(limit);
    if (line.rfind(word + " ", 0) != 0)
      throw std::runtime_error("expected '" + word + " ...', got '" + line + "'");
    return line.substr(word.size() + 1);
  }
  void send(const std::string& line) {
    const std::string s = line + "\n";
    if (::write(to_child_, s.data(), s.size()) != static_cast<ssize_t>(s.size()))
      throw std::runtime_error("write");
  }
  // SIGSTOP, and wait (bounded) until the kernel reports the child stopped.
  void stop() {
    ::kill(pid_, SIGSTOP);
    const auto end = clk::now() + 5000ms;
    int st = 0;
    while (clk::now() < end) {
      const pid_t w = ::waitpid(pid_, &st, WUNTRACED | WNOHANG);
      if (w == pid_ && WIFSTOPPED(st)) return;
      if (w == pid_) throw std::runtime_error("holder exited instead of stopping");
      std::this_thread::sleep_for(2ms);
    }
    throw std::runtime_error("holder did not stop");
  }
  void resume() { ::kill(pid_, SIGCONT); }
  // Waits (bounded) for the child to exit; its exit status, or -1 if killed by a signal.
  int wait_exit(milliseconds limit) {
    const auto end = clk::now() + limit;
    int st = 0;
    while (clk::now() < end) {
      const pid_t w = ::waitpid(pid_, &st, WNOHANG);
      if (w == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(5ms);
    }
    throw std::runtime_error("holder did not exit");
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buf_;
};

// ------------------------------------------------------------------ read-modify-write

class FencedRmw : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A write to a holder that exited early fails with EPIPE (and the test with it)
    // instead of killing the test binary.
    ::signal(SIGPIPE, SIG_IGN);
    locks_ = new redis_cluster(3);
    store_ = new redis_node();
  }
  static void TearDownTestSuite() {
    delete locks_;
    delete store_;
    locks_ = nullptr;
    store_ = nullptr;
  }

  // What happened in one run of the interleaving.
  struct outcome {
    std::uint64_t fence_a = 0, fence_b = 0;
    std::string read_a, read_b;    // the values read ("nil" if absent)
    std::string write_a, write_b;  // written | stale | changed
    long long validity_a_ms = -1;  // A's remaining validity when it wrote
    std::string final_value;
    int accepted = 0;  // increments the resource accepted
  };

  // How a holder reads (plain | fenced) and writes (fenced | cas): fencing_holder's
  // READ and WRITE arguments.
  struct pattern {
    std::string read, write;
  };

  // Counter starts at 10. A reads, is SIGSTOPped past its TTL; B acquires (a higher
  // fence) and reads; A resumes and writes; then B writes.
  static outcome interleave(const pattern& pa, const pattern& pb) {
    const std::string res = unique("rmw"), data = "counter:" + res, seen = "counter:" + res + ":seen";
    EXPECT_EQ(store_->command({"SET", data, "10"}), "OK");
    std::string nodes;
    for (const auto& u : locks_->uris()) nodes += (nodes.empty() ? "" : ",") + u;
    auto args = [&](const char* ttl_ms, const pattern& p) {
      return std::vector<std::string>{nodes,  std::to_string(store_->port()), res, data, seen, ttl_ms, p.read,
                                      p.write};
    };
    outcome o;
    holder_process a(args("1500", pa));
    o.fence_a = std::stoull(a.expect("fence", 30000ms));
    o.read_a = a.expect("read", 10000ms);
    a.stop();  // the pause: A's lock keys expire while it is stopped
    holder_process b(args("30000", pb));
    o.fence_b = std::stoull(b.expect("fence", 30000ms));  // after A's keys expired
    o.read_b = b.expect("read", 10000ms);
    a.send("go");  // queued in the pipe; A reads it once it runs again
    a.resume();
    const std::string wa = a.expect("write", 10000ms);
    o.write_a = wa.substr(0, wa.find(' '));
    o.validity_a_ms = std::stoll(wa.substr(wa.find(' ') + 1));
    b.send("go");
    const std::string wb = b.expect("write", 10000ms);
    o.write_b = wb.substr(0, wb.find(' '));
    EXPECT_EQ(a.wait_exit(10000ms), 0);
    EXPECT_EQ(b.wait_exit(10000ms), 0);
    o.final_value = store_->get(data).value_or("nil");
    o.accepted = (o.write_a == "written") + (o.write_b == "written");
    return o;
  }

  static redis_cluster* locks_;
  static redis_node* store_;
};
redis_cluster* FencedRmw::locks_ = nullptr;
redis_node* FencedRmw::store_ = nullptr;

// The hole: fenced_write_script after a plain GET. Both writes carry valid,
// increasing fences and both are accepted; the counter went up by one for two
// increments. This pins that the pre-existing pattern does not protect a
// read-modify-write (docs/fencing.md says so, with this timeline).
TEST_F(FencedRmw, plain_read_then_fenced_write_loses_an_update_when_the_paused_holder_resumes) {
  const auto o = interleave({"plain", "fenced"}, {"plain", "fenced"});
  EXPECT_GT(o.fence_b, o.fence_a);
  EXPECT_EQ(o.validity_a_ms, 0) << "A must write after its lock expired";
  EXPECT_EQ(o.read_a, "10");
  EXPECT_EQ(o.read_b, "10");
  EXPECT_EQ(o.write_a, "written");
  EXPECT_EQ(o.write_b, "written");
  EXPECT_EQ(o.accepted, 2);
  EXPECT_EQ(o.final_value, "11") << "two accepted increments, one lost";
}

// B's fenced read tells the resource about fence B before A's write: A is refused,
// B's increment lands, and the counter equals the increments accepted.
TEST_F(FencedRmw, fenced_read_then_fenced_write_refuses_the_paused_holder_and_loses_no_update) {
  const auto o = interleave({"fenced", "fenced"}, {"fenced", "fenced"});
  EXPECT_GT(o.fence_b, o.fence_a);
  EXPECT_EQ(o.validity_a_ms, 0);
  EXPECT_EQ(o.read_a, "10");
  EXPECT_EQ(o.read_b, "10");
  EXPECT_EQ(o.write_a, "stale");
  EXPECT_EQ(o.write_b, "written");
  EXPECT_EQ(o.final_value, std::to_string(10 + o.accepted));
  EXPECT_EQ(o.final_value, "11");
}

// The protection comes from the newer holder's fenced read: A uses the old pattern
// throughout (plain read, fenced_write_script) and is still refused. (The converse
// does not hold: a newer holder that reads plainly tells the resource nothing, so
// every holder of the resource must read fenced.)
TEST_F(FencedRmw, fenced_read_by_the_newer_holder_refuses_an_older_holder_that_read_plainly) {
  const auto o = interleave({"plain", "fenced"}, {"fenced", "fenced"});
  EXPECT_GT(o.fence_b, o.fence_a);
  EXPECT_EQ(o.validity_a_ms, 0);
  EXPECT_EQ(o.write_a, "stale");
  EXPECT_EQ(o.write_b, "written");
  EXPECT_EQ(o.final_value, std::to_string(10 + o.accepted));
  EXPECT_EQ(o.final_value, "11");
}

TEST_F(FencedRmw, fenced_read_then_compare_and_set_refuses_the_paused_holder_as_stale) {
  const auto o = interleave({"fenced", "cas"}, {"fenced", "cas"});
  EXPECT_GT(o.fence_b, o.fence_a);
  EXPECT_EQ(o.validity_a_ms, 0);
  EXPECT_EQ(o.write_a, "stale");
  EXPECT_EQ(o.write_b, "written");
  EXPECT_EQ(o.final_value, std::to_string(10 + o.accepted));
  EXPECT_EQ(o.final_value, "11");
}

// Compare-and-set after a plain read: the resource has not heard of fence B when
// A writes, so A's increment (based on a value still current) is accepted; B's
// compare then fails on the changed value, and B knows it must re-read. No update
// is lost either way.
TEST_F(FencedRmw, compare_and_set_after_a_plain_read_refuses_the_write_based_on_a_changed_value) {
  const auto o = interleave({"plain", "cas"}, {"plain", "cas"});
  EXPECT_GT(o.fence_b, o.fence_a);
  EXPECT_EQ(o.validity_a_ms, 0);
  EXPECT_EQ(o.write_a, "written");
  EXPECT_EQ(o.write_b, "changed");
  EXPECT_EQ(o.final_value, std::to_string(10 + o.accepted));
  EXPECT_EQ(o.final_value, "11");
}

// ------------------------------------------------------------------ the scripts

class FencingScripts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { node_ = new redis_node(); }
  static void TearDownTestSuite() {
    delete node_;
    node_ = nullptr;
  }
  void SetUp() override {
    data_ = unique("res");
    seen_ = data_ + ":seen";
  }

  static std::string eval(const char* script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) {
    std::vector<std::string> argv{"EVAL", script, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return node_->command(argv);
  }
  std::string read(const std::string& tok) { return eval(fenced_read_script, {data_, seen_}, {tok}); }
  std::string write(const std::string& tok, const std::string& v) {
    return eval(fenced_write_script, {data_, seen_}, {tok, v});
  }
  // Expects data_ to be absent.
  std::string cas(const std::string& tok, const std::string& v) {
    return eval(fenced_compare_and_set_script, {data_, seen_}, {tok, v});
  }
  std::string cas(const std::string& tok, const std::string& v, const std::string& expected) {
    return eval(fenced_compare_and_set_script, {data_, seen_}, {tok, v, expected});
  }
  std::string value() { return node_->get(data_).value_or("(absent)"); }
  std::string seen() { return node_->get(seen_).value_or("(absent)"); }

  static redis_node* node_;
  std::string data_, seen_;
};
redis_node* FencingScripts::node_ = nullptr;

TEST_F(FencingScripts, fenced_read_on_first_use_registers_the_token_and_returns_nil_for_a_missing_value) {
  EXPECT_EQ(read("5"), "[1, (nil)]");
  EXPECT_EQ(seen(), "5");
  EXPECT_EQ(value(), "(absent)");
  // A refusal is told apart from a missing value by the first element.
  EXPECT_EQ(read("4"), "[0, (nil)]");
  EXPECT_EQ(seen(), "5");
}

TEST_F(FencingScripts, fenced_read_returns_the_value_and_refuses_an_older_token_without_registering_it) {
  ASSERT_EQ(node_->command({"SET", data_, "v1"}), "OK");
  EXPECT_EQ(read("7"), "[1, v1]");
  EXPECT_EQ(read("6"), "[0, (nil)]");  // the value is not handed to a stale holder
  EXPECT_EQ(seen(), "7");
  EXPECT_EQ(value(), "v1");
}

TEST_F(FencingScripts, fenced_read_accepts_the_same_token_again_and_raises_the_highest_seen_for_a_newer_one) {
  EXPECT_EQ(read("5"), "[1, (nil)]");
  EXPECT_EQ(read("5"), "[1, (nil)]");
  EXPECT_EQ(seen(), "5");
  EXPECT_EQ(read("9"), "[1, (nil)]");
  EXPECT_EQ(seen(), "9");
}

TEST_F(FencingScripts, fenced_write_after_a_newer_fenced_read_is_refused) {
  EXPECT_EQ(write("5", "from-5"), "1");  // first use: no highest seen yet
  EXPECT_EQ(seen(), "5");
  EXPECT_EQ(read("6"), "[1, from-5]");
  EXPECT_EQ(write("5", "late"), "0");
  EXPECT_EQ(value(), "from-5");
  // The same holder writes as often as it likes (equal token).
  EXPECT_EQ(write("6", "a"), "1");
  EXPECT_EQ(write("6", "b"), "1");
  EXPECT_EQ(value(), "b");
  EXPECT_EQ(seen(), "6");
}

TEST_F(FencingScripts, compare_and_set_writes_only_a_current_token_over_the_expected_value) {
  EXPECT_EQ(cas("5", "a"), "1");  // no expected value: the key must be absent
  EXPECT_EQ(value(), "a");
  EXPECT_EQ(seen(), "5");
  EXPECT_EQ(cas("5", "b"), "-1");  // ... and it is not any more
  EXPECT_EQ(value(), "a");
  EXPECT_EQ(cas("6", "b", "x"), "-1");  // value differs: nothing changes, 6 is not recorded
  EXPECT_EQ(value(), "a");
  EXPECT_EQ(seen(), "5");
  EXPECT_EQ(cas("6", "b", "a"), "1");
  EXPECT_EQ(value(), "b");
  EXPECT_EQ(seen(), "6");
  EXPECT_EQ(cas("5", "c", "b"), "0");  // stale, although the value matches
  EXPECT_EQ(value(), "b");
  EXPECT_EQ(cas("6", "c", "b"), "1");  // the same holder again
  EXPECT_EQ(value(), "c");
  EXPECT_EQ(cas("7", "d", ""), "-1");  // the empty string is a value, not "absent"
  EXPECT_EQ(value(), "c");
}

// A-B-A: A (5) read 0; B (6) set it to 1, C (7) back to 0. A's compare would
// succeed on the value alone; the token refuses it.
TEST_F(FencingScripts, compare_and_set_refuses_an_older_holder_whose_expected_value_reappeared) {
  ASSERT_EQ(node_->command({"SET", data_, "0"}), "OK");
  const std::string a_read = value();
  EXPECT_EQ(cas("6", "1", "0"), "1");
  EXPECT_EQ(cas("7", "0", "1"), "1");
  EXPECT_EQ(value(), a_read);
  EXPECT_EQ(cas("5", "1", a_read), "0");
  EXPECT_EQ(value(), "0");
}

TEST_F(FencingScripts, tokens_below_2_pow_53_compare_exactly) {
  EXPECT_EQ(read("0"), "[1, (nil)]");  // the absent highest seen counts as 0
  EXPECT_EQ(write("9007199254740990", "a"), "1");
  EXPECT_EQ(write("9007199254740991", "b"), "1");  // 2^53 - 1, the largest accepted
  EXPECT_EQ(write("9007199254740990", "c"), "0");
  EXPECT_EQ(read("9007199254740990"), "[0, (nil)]");
  EXPECT_EQ(value(), "b");
}

TEST_F(FencingScripts, leading_zeros_compare_as_numbers) {
  EXPECT_EQ(write("10", "a"), "1");
  EXPECT_EQ(read("009"), "[0, (nil)]");
  EXPECT_EQ(read("011"), "[1, a]");
  EXPECT_EQ(write("10", "b"), "0");
}

TEST_F(FencingScripts, a_token_that_is_not_digits_below_2_pow_53_is_an_error_and_changes_nothing) {
  ASSERT_EQ(node_->command({"SET", data_, "v"}), "OK");
  ASSERT_EQ(node_->command({"SET", seen_, "5"}), "OK");
  const std::vector<std::string> not_digits{"abc", "",   "-1",  "+6",   "1.5", "6.0", "1e3",
                                            " 6",  "6 ", "6\n", "0x10", "inf", "nan"};
  const std::vector<std::string> too_large{"9007199254740992", "9007199254740993", "18446744073709551615",
                                           "1" + std::string(400, '0')};
  for (const auto& bad : not_digits) {
    SCOPED_TRACE("token '" + bad + "'");
    EXPECT_EQ(read(bad).rfind("(error) ERR fencing token is not a number", 0), 0u) << read(bad);
    EXPECT_EQ(write(bad, "w").rfind("(error) ERR fencing token is not a number", 0), 0u) << write(bad, "w");
    EXPECT_EQ(cas(bad, "w", "v").rfind("(error) ERR fencing token is not a number", 0), 0u)
        << cas(bad, "w", "v");
  }
  for (const auto& bad : too_large) {
    SCOPED_TRACE("token '" + bad + "'");
    EXPECT_EQ(read(bad).rfind("(error) ERR fencing token is not below 2^53", 0), 0u) << read(bad);
    EXPECT_EQ(write(bad, "w").rfind("(error) ERR fencing token is not below 2^53", 0), 0u) << write(bad, "w");
    EXPECT_EQ(cas(bad, "w", "v").rfind("(error) ERR fencing token is not below 2^53", 0), 0u)
        << cas(bad, "w", "v");
  }
  EXPECT_EQ(value(), "v");
  EXPECT_EQ(seen(), "5");
}

TEST_F(FencingScripts, a_highest_seen_key_that_is_not_a_number_is_an_error_and_changes_nothing) {
  ASSERT_EQ(node_->command({"SET", data_, "v"}), "OK");
  ASSERT_EQ(node_->command({"SET", seen_, "garbage"}), "OK");
  const std::string msg = "(error) ERR the highest-seen key does not hold a fencing token";
  EXPECT_EQ(read("5").rfind(msg, 0), 0u) << read("5");
  EXPECT_EQ(write("5", "w").rfind(msg, 0), 0u) << write("5", "w");
  EXPECT_EQ(cas("5", "w", "v").rfind(msg, 0), 0u) << cas("5", "w", "v");
  EXPECT_EQ(value(), "v");
  EXPECT_EQ(seen(), "garbage");
}

TEST_F(FencingScripts, keys_of_another_type_are_wrongtype_and_register_no_token) {
  ASSERT_EQ(node_->command({"RPUSH", data_, "x"}), "1");
  EXPECT_NE(read("5").find("WRONGTYPE"), std::string::npos) << read("5");
  EXPECT_NE(cas("5", "w", "x").find("WRONGTYPE"), std::string::npos) << cas("5", "w", "x");
  EXPECT_EQ(seen(), "(absent)");
  const std::string other = unique("res");
  ASSERT_EQ(node_->command({"RPUSH", other + ":seen", "x"}), "1");
  EXPECT_NE(eval(fenced_write_script, {other, other + ":seen"}, {"5", "w"}).find("WRONGTYPE"),
            std::string::npos);
  EXPECT_FALSE(node_->exists(other));
  // fenced_write_script SETs the resource key whatever it held (documented).
  EXPECT_EQ(write("5", "w"), "1");
  EXPECT_EQ(value(), "w");
}

TEST_F(FencingScripts, missing_keys_or_arguments_are_errors) {
  EXPECT_EQ(eval(fenced_read_script, {data_}, {"5"}).rfind("(error) ERR fenced read:", 0), 0u);
  EXPECT_EQ(eval(fenced_read_script, {data_, seen_}, {}).rfind("(error) ERR fenced read:", 0), 0u);
  EXPECT_EQ(eval(fenced_write_script, {data_, seen_}, {"5"}).rfind("(error) ERR fenced write:", 0), 0u);
  EXPECT_EQ(eval(fenced_write_script, {data_}, {"5", "v"}).rfind("(error) ERR fenced write:", 0), 0u);
  EXPECT_EQ(eval(fenced_compare_and_set_script, {data_, seen_}, {"5"})
                .rfind("(error) ERR fenced compare-and-set:", 0),
            0u);
  EXPECT_EQ(eval(fenced_compare_and_set_script, {data_, seen_}, {"5", "v", "e", "x"})
                .rfind("(error) ERR fenced compare-and-set:", 0),
            0u);
  EXPECT_EQ(value(), "(absent)");
  EXPECT_EQ(seen(), "(absent)");
}

// fencing.h promises that each script can be wrapped in a larger one (the fault
// harness's fenced resource does that with fenced_write_script).
TEST_F(FencingScripts, each_script_runs_as_the_body_of_a_lua_function) {
  auto wrapped = [](const char* script) {
    return std::string("local function f()\n") + script + "end\nreturn f()\n";
  };
  const std::string r = wrapped(fenced_read_script), w = wrapped(fenced_write_script),
                    c = wrapped(fenced_compare_and_set_script);
  EXPECT_EQ(node_->command({"EVAL", w, "2", data_, seen_, "5", "a"}), "1");
  EXPECT_EQ(node_->command({"EVAL", r, "2", data_, seen_, "6"}), "[1, a]");
  EXPECT_EQ(node_->command({"EVAL", c, "2", data_, seen_, "6", "b", "a"}), "1");
  EXPECT_EQ(node_->command({"EVAL", w, "2", data_, seen_, "5", "late"}), "0");
  EXPECT_EQ(node_->command({"EVAL", r, "2", data_, seen_, "x"})
                .rfind("(error) ERR fencing token is not a number", 0),
            0u);
  EXPECT_EQ(value(), "b");
}

// The absent value is a nil for a RESP3 client too (Lua false, not a boolean). The
// harness's hiredis speaks RESP2 only, so this reads the raw bytes.
TEST_F(FencingScripts, fenced_read_of_a_missing_value_is_nil_on_resp3) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(node_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto bulk = [](const std::string& a) { return "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n"; };
  const std::string eval =
      "*6\r\n" + bulk("EVAL") + bulk(fenced_read_script) + bulk("2") + bulk(data_) + bulk(seen_) + bulk("5");
  const std::string out = "*2\r\n" + bulk("HELLO") + bulk("3") + eval;
  ASSERT_EQ(::write(fd, out.data(), out.size()), static_cast<ssize_t>(out.size()));
  const std::string want = "*2\r\n:1\r\n_\r\n";  // RESP3 array [1, null]
  std::string in;
  const auto end = clk::now() + 3000ms;
  while (clk::now() < end &&
         (in.size() < want.size() || in.compare(in.size() - want.size(), want.size(), want) != 0)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got <= 0) break;
    in.append(chunk, static_cast<std::size_t>(got));
  }
  ::close(fd);
  ASSERT_GE(in.size(), want.size()) << in;
  EXPECT_EQ(in.substr(in.size() - want.size()), want)
      << "reply tail: " << in.substr(in.size() > 40 ? in.size() - 40 : 0);
}

}  // namespace
}  // namespace redlock::test

// === A key prefix cannot make a lock key collide with a fence counter (adversarial review of the
// issue-9 hardening)
namespace redlock::test {
namespace fence_keys {  // the section's helpers stay apart from the file's
namespace {

// Guarantee (item 11, docs/fencing.md: names ending in ":fence" are reserved so
// that no lock key collides with a fence counter). Attack: the check is on the
// resource name, not on the key: a client whose key_prefix ends in "orders:" locking
// "fence" uses the key "orders:fence", the fence counter of "orders" for a client
// without a prefix. The lock is then contended forever (SET NX finds the counter).
TEST(FenceCounterKeys, a_key_prefix_cannot_make_a_lock_key_collide_with_a_fence_counter) {
  redis_cluster nodes(3);
  client plain(options_for(nodes.uris()));
  client_options po = options_for(nodes.uris());
  po.key_prefix = "orders:";
  client prefixed(po);
  ASSERT_TRUE(wait_connected(plain));
  ASSERT_TRUE(wait_connected(prefixed));
  acquire_options fenced = once(5000ms);
  fenced.fencing = true;
  {
    auto r = plain.acquire("orders", fenced);
    ASSERT_TRUE(r) << r.report.message();
    ASSERT_FALSE(r.lock.release().error);
  }
  auto other = prefixed.acquire("fence", once(5000ms));
  EXPECT_TRUE(other || other.report.error == errc::invalid_argument)
      << "key 'orders:fence' is the fence counter of 'orders': " << other.report.message();
}

}  // namespace
}  // namespace fence_keys
}  // namespace redlock::test
