// `redlock elect` and `redlock leader` as processes against real redis-server
// nodes: five candidates; kill -9 of the leader, resign (its command exits) and
// SIGSTOP of the leader past its TTL; terms strictly increase; and a history
// checker over every candidate's belief stamps (tests/cli/elect_child.cc) on one
// CLOCK_MONOTONIC. Every wait is bounded.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis_node.h"

extern char** environ;

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* cli_path = REDLOCK_CLI_PATH;
constexpr const char* child_path = REDLOCK_ELECT_CHILD_PATH;
constexpr milliseconds ttl{1000};
constexpr milliseconds retry_delay{100};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The processes whose parent is `parent` (from /proc).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* d = ::readdir(dir)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + d->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if ((rest >> state >> ppid) && ppid == parent) out.push_back(static_cast<pid_t>(std::atol(d->d_name)));
  }
  ::closedir(dir);
  return out;
}

// `redlock elect` in a process group of its own (with its command), stdout and
// stderr to files. The destructor SIGKILLs the group and reaps the process.
class candidate {
 public:
  candidate(const std::string& id, const std::string& nodes, const std::string& dir)
      : id_(id), err_path_(dir + "/err." + id) {
    std::vector<std::string> argv = {cli_path,      "elect",        "job",
                                     "--id",        id,             "--nodes",
                                     nodes,         "--ttl",        std::to_string(ttl.count()) + "ms",
                                     "--retry-delay", std::to_string(retry_delay.count()) + "ms",
                                     "--kill-after", "500ms",       "--node-timeout",
                                     "100ms",       "--",           child_path,
                                     dir + "/beliefs",             dir + "/stop." + id};
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "REDLOCK_", 8) != 0) env.emplace_back(*e);
    }
    std::vector<char*> cenv;
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int out = ::open((err_path_ + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(255);
    }
    ::setpgid(pid_, pid_);
  }
  ~candidate() {
    ::kill(-pid_, SIGKILL);
    if (!exited_) {
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  const std::string& id() const { return id_; }
  void signal_group(int signo) const { ::kill(-pid_, signo); }
  // The group and the command's: elect runs its command in a process group of its
  // own (its direct child; elect's watcher is not its child).
  void signal_groups(int signo) const {
    signal_group(signo);
    for (pid_t child : children_of(pid_)) {
      const pid_t pgid = ::getpgid(child);
      if (pgid > 1 && pgid != pid_) ::kill(-pgid, signo);
    }
  }
  // The exit status once it has exited (128 + signal when killed), else nullopt.
  std::optional<int> poll() {
    if (!exited_) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) != pid_) return std::nullopt;
      exited_ = true;
      code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    return code_;
  }
  std::optional<int> wait_exit(milliseconds limit) {
    const auto end = steady::now() + limit;
    while (steady::now() < end) {
      if (auto c = poll()) return c;
      std::this_thread::sleep_for(10ms);
    }
    return poll();
  }
  std::string stderr_text() const {
    std::ifstream f(err_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  std::string id_;
  std::string err_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

struct leader_view {
  int code = -1;
  std::string json;
  std::optional<std::string> leader;
  std::optional<unsigned long long> term;
  long long ttl_ms = -1;
};

// `redlock leader job --json`.
leader_view read_leader(const std::string& nodes, const std::string& role = "job") {
  leader_view v;
  const std::string cmd = std::string("env -u REDLOCK_NODES ") + cli_path + " leader " + role + " --json --nodes " +
                          nodes + " --node-timeout 100ms";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return v;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) v.json += buf;
  const int st = ::pclose(p);
  v.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::smatch m;
  if (std::regex_search(v.json, m, std::regex("\"leader\":\"([^\"]*)\""))) v.leader = m[1];
  if (std::regex_search(v.json, m, std::regex("\"term\":([0-9]+)"))) v.term = std::stoull(m[1]);
  if (std::regex_search(v.json, m, std::regex("\"ttl_ms\":([0-9]+)"))) v.ttl_ms = std::stoll(m[1]);
  return v;
}

// Polls `redlock leader` until it names a leader other than `not_this` (bounded).
std::optional<leader_view> wait_leader(const std::string& nodes, milliseconds limit,
                                       const std::optional<std::string>& not_this = std::nullopt) {
  const auto end = steady::now() + limit;
  while (steady::now() < end) {
    leader_view v = read_leader(nodes);
    if (v.leader && v.leader != not_this) return v;
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

// One stamp of a leader's command: who, which term, when.
struct stamp {
  std::string id;
  unsigned long long term;
  long long ns;
};

std::vector<stamp> read_beliefs(const std::string& path) {
  std::vector<stamp> out;
  std::ifstream f(path);
  std::string id;
  unsigned long long term = 0;
  long long ns = 0;
  while (f >> id >> term >> ns) out.push_back({id, term, ns});
  return out;
}

struct belief {
  std::string id;
  unsigned long long term;
  long long from, to;
};

// The history checker. A leader's stamps, per term, form its belief (the command
// stamps every 5 ms while it runs). The leader the test stopped (SIGSTOP of elect
// and its command, `paused_term`) believes until its last stamp before the pause
// (a gap of more than 200 ms): the test cannot see its validity, and stamps after
// the pause are the command's last breath between SIGCONT and the SIGTERM that
// elect sends when its watchdog finds the leadership lost. Those must stop within
// `zombie_bound` (and elect must exit 70: the test checks that). The library's own
// test (tests/integration/election_test.cc) clips beliefs by the exact validity.
// Beliefs of different terms must not overlap, and a later belief must have a
// greater term; a term has one leader.
void check_history(const std::vector<stamp>& stamps, unsigned long long paused_term, milliseconds zombie_bound) {
  std::map<unsigned long long, std::vector<stamp>> by_term;
  for (const auto& s : stamps) by_term[s.term].push_back(s);
  std::vector<belief> beliefs;
  for (auto& [term, v] : by_term) {
    std::sort(v.begin(), v.end(), [](const stamp& a, const stamp& b) { return a.ns < b.ns; });
    for (const auto& s : v) EXPECT_EQ(s.id, v.front().id) << "term " << term << " has two leaders";
    belief b{v.front().id, term, v.front().ns, v.front().ns};
    bool paused = false;
    long long zombie_from = 0;
    for (std::size_t k = 1; k < v.size(); ++k) {
      if (term == paused_term && !paused && v[k].ns - v[k - 1].ns > 200'000'000LL) {
        paused = true;
        zombie_from = v[k].ns;
      }
      if (!paused) b.to = v[k].ns;
    }
    if (paused) {
      EXPECT_LE(v.back().ns - zombie_from, std::chrono::nanoseconds(zombie_bound).count())
          << "term " << term << " ran on long after its pause";
    }
    beliefs.push_back(b);
  }
  std::sort(beliefs.begin(), beliefs.end(), [](const belief& a, const belief& b) { return a.from < b.from; });
  for (std::size_t k = 1; k < beliefs.size(); ++k) {
    EXPECT_LT(beliefs[k - 1].to, beliefs[k].from)
        << beliefs[k - 1].id << " (term " << beliefs[k - 1].term << ") and " << beliefs[k].id << " (term "
        << beliefs[k].term << ") both believed they led";
    EXPECT_GT(beliefs[k].term, beliefs[k - 1].term);
  }
}

// Waits until the command of `term` has stamped (bounded).
bool wait_stamp(const std::string& path, unsigned long long term, milliseconds limit) {
  const auto end = steady::now() + limit;
  while (steady::now() < end) {
    for (const auto& s : read_beliefs(path)) {
      if (s.term == term) return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/redlock-elect-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (d == nullptr) throw std::runtime_error("mkdtemp");
  return d;
}

std::size_t index_of(const std::vector<std::unique_ptr<candidate>>& cs, const std::string& id) {
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (cs[i]->id() == id) return i;
  }
  return cs.size();
}

TEST(elect_cli, five_candidates_survive_kill9_resign_and_sigstop_of_the_leader) {
  redis_cluster cl(5);
  const std::string nodes = join(cl.uris());
  const std::string dir = temp_dir();
  std::vector<std::unique_ptr<candidate>> cs;
  for (int i = 0; i < 5; ++i) cs.push_back(std::make_unique<candidate>("cand-" + std::to_string(i), nodes, dir));

  // One leader.
  auto first = wait_leader(nodes, 5000ms);
  ASSERT_TRUE(first) << "no leader";
  ASSERT_EQ(first->code, 0);
  ASSERT_TRUE(first->term);
  EXPECT_GT(first->ttl_ms, 0);
  EXPECT_LE(first->ttl_ms, ttl.count());
  std::size_t li = index_of(cs, *first->leader);
  ASSERT_LT(li, cs.size());
  for (std::size_t i = 0; i < cs.size(); ++i) EXPECT_FALSE(cs[i]->poll()) << cs[i]->id() << " exited";

  ASSERT_TRUE(wait_stamp(dir + "/beliefs", *first->term, 2000ms));

  // kill -9 of the leader (and its command): a new leader within TTL + the wake-up bound.
  const auto killed_at = steady::now();
  cs[li]->signal_group(SIGKILL);
  auto second = wait_leader(nodes, ttl + retry_delay + 2000ms, first->leader);
  ASSERT_TRUE(second) << "no new leader after kill -9";
  const auto takeover = steady::now() - killed_at;
  // TTL + retry delay, plus the acquire/fence/publish rounds and this poll's own
  // process start (bounded generously for a loaded machine).
  EXPECT_LT(takeover, ttl + retry_delay + 700ms);
  ASSERT_TRUE(second->term);
  EXPECT_GT(*second->term, *first->term);
  EXPECT_EQ(cs[li]->wait_exit(1000ms), std::optional<int>(128 + SIGKILL));

  // Resign: the leader's command exits 0, elect resigns and exits 0; a waiting
  // candidate takes over within a few round trips (its retry delay, then three rounds).
  li = index_of(cs, *second->leader);
  ASSERT_LT(li, cs.size());
  ASSERT_TRUE(wait_stamp(dir + "/beliefs", *second->term, 2000ms));
  std::ofstream(dir + "/stop." + cs[li]->id()) << "";
  EXPECT_EQ(cs[li]->wait_exit(2000ms), std::optional<int>(0)) << cs[li]->stderr_text();
  const auto resigned_at = steady::now();
  auto third = wait_leader(nodes, 2000ms, second->leader);
  ASSERT_TRUE(third) << "no new leader after resign";
  EXPECT_LT(steady::now() - resigned_at, retry_delay + 500ms);
  ASSERT_TRUE(third->term);
  EXPECT_GT(*third->term, *second->term);

  // SIGSTOP of the leader (elect and its command) past its TTL: another leads
  // meanwhile; on SIGCONT the old leader finds its leadership lost (the loss
  // token fires), stops its command and exits 70.
  li = index_of(cs, *third->leader);
  ASSERT_LT(li, cs.size());
  ASSERT_TRUE(wait_stamp(dir + "/beliefs", *third->term, 2000ms));
  cs[li]->signal_groups(SIGSTOP);
  auto fourth = wait_leader(nodes, ttl + retry_delay + 2000ms, third->leader);
  ASSERT_TRUE(fourth) << "no new leader while the old one is stopped";
  ASSERT_TRUE(fourth->term);
  EXPECT_GT(*fourth->term, *third->term);
  std::this_thread::sleep_for(200ms);
  cs[li]->signal_groups(SIGCONT);
  EXPECT_EQ(cs[li]->wait_exit(3000ms), std::optional<int>(70)) << cs[li]->stderr_text();
  EXPECT_NE(cs[li]->stderr_text().find("was lost"), std::string::npos) << cs[li]->stderr_text();
  const leader_view still = read_leader(nodes);
  EXPECT_EQ(still.leader, fourth->leader);  // the resumed one did not disturb the new leader
  EXPECT_EQ(still.term, fourth->term);

  // End: the last leader resigns; the history of every term.
  const std::string last = *fourth->leader;
  ASSERT_TRUE(wait_stamp(dir + "/beliefs", *fourth->term, 2000ms));
  std::ofstream(dir + "/stop." + last) << "";
  EXPECT_EQ(cs[index_of(cs, last)]->wait_exit(2000ms), std::optional<int>(0));
  cs.clear();
  const auto stamps = read_beliefs(dir + "/beliefs");
  EXPECT_GE(stamps.size(), 20u);
  check_history(stamps, *third->term, 1000ms);
  std::map<unsigned long long, std::string> terms;
  for (const auto& s : stamps) terms[s.term] = s.id;
  EXPECT_GE(terms.size(), 4u);
}

TEST(elect_cli, leader_prints_null_and_exits_0_when_nobody_leads) {
  redis_cluster cl(3);
  const leader_view v = read_leader(join(cl.uris()), "idle");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.json, "{\"role\":\"idle\",\"leader\":null,\"term\":null,\"ttl_ms\":0}\n");
}

TEST(elect_cli, leader_exits_69_without_a_quorum) {
  redis_cluster cl(3);
  cl[0].kill();
  cl[1].kill();
  const leader_view v = read_leader(join(cl.uris()), "idle");
  EXPECT_EQ(v.code, 69);
}

}  // namespace
}  // namespace redlock::test
