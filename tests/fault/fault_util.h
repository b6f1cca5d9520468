// Shared pieces of the fault scenarios: the contention workload (acquire,
// read-sleep-write a counter, release; recorded in a history), worker processes,
// the fenced resource, soak sizing and the figures each scenario reports.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fault_proxy.h"
#include "history.h"
#include "redis_node.h"
#include "redlock/redlock.h"
#include "test_util.h"

namespace redlock::test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// REDLOCK_SOAK_SECONDS (default 0): how long each scenario repeats its body.
std::chrono::seconds soak_duration();

// Runs `body(round)` min_rounds times, then again while the soak duration (from
// the first call) has not passed. Stops early after a fatal failure. Returns the
// number of rounds run.
int repeat_for_soak(const std::function<void(int round)>& body, int min_rounds = 1);

// The figures of one scenario: printed as one "FIGURES ..." line and recorded as
// test properties, so the run log carries them.
struct figures {
  std::string scenario;
  int runs = 0;
  std::uint64_t operations = 0;
  std::uint64_t faults = 0;
  std::uint64_t violations = 0;
  std::string extra;  // free text: latencies, counts
  void publish() const;
};

// Client options for the scenarios: the integration tests' timeouts (generous for
// a loaded 2-core CI machine with sanitizers, far below the TTLs).
client_options scenario_options(const std::vector<std::string>& uris);

// A fault_proxy (in pass mode) in front of every node; `uris` receives their URIs.
std::vector<std::unique_ptr<fault_proxy>> proxy_each(redis_cluster& nodes, std::vector<std::string>& uris);

// A counter that critical sections increment by read, sleep, write (no atomic
// read-modify-write, on purpose).
class counter {
 public:
  virtual ~counter() = default;
  virtual std::int64_t read() = 0;
  virtual void write(std::int64_t v) = 0;
};

class memory_counter final : public counter {
 public:
  std::int64_t read() override { return value_.load(); }
  void write(std::int64_t v) override { value_.store(v); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// A counter in a key of one redis-server (its own connection, 2 s timeouts;
// thread-safe). Throws std::runtime_error if the server cannot be reached.
class redis_counter final : public counter {
 public:
  redis_counter(int port, std::string key);
  ~redis_counter() override;
  std::int64_t read() override;
  void write(std::int64_t v) override;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// A resource in one redis-server that checks fencing tokens with
// redlock::fenced_write_script and logs every accepted token, in apply order, in
// the same atomic script (the library's script text runs unchanged inside it).
// Thread-safe.
class fenced_resource {
 public:
  fenced_resource(int port, std::string name);
  ~fenced_resource();
  // True if the resource accepted the write.
  bool write(std::uint64_t fence, const std::string& value);
  // The accepted tokens in the order the resource applied them.
  std::vector<std::uint64_t> accepted();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// The contention workload of one client.
struct workload {
  std::string resource;
  std::string owner;  // unique per client
  std::chrono::milliseconds ttl{2000};
  std::chrono::microseconds hold{2000};       // sleep between the counter's read and write
  std::chrono::microseconds pause_max{3000};  // random pause after a failed attempt
  bool fencing = false;
  counter* shared_counter = nullptr;  // optional (S)
  fenced_resource* fenced = nullptr;  // optional (F), needs fencing
};

// Per-attempt record, for latency and error checks.
struct attempt {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::string error;    // "" = success
  std::string message;  // report::message() of a failure
};

struct workload_result {
  std::uint64_t attempts = 0;
  std::uint64_t grants = 0;
  std::int64_t increments = 0;       // counter writes done
  std::uint64_t skipped_writes = 0;  // validity too short to write safely
  std::uint64_t fenced_accepted = 0;
  std::uint64_t fenced_refused = 0;
  std::uint64_t release_failures = 0;       // release() returned an error
  std::vector<std::string> release_errors;  // their messages (first 10)
  std::vector<attempt> log;                 // only when keep_log
};

// Runs the workload on `c` until `stop` is set or `until` passes: acquire (one
// attempt), on success read-sleep-write the counter and fenced write (only while
// validity remains), release. Records grants and failures in `h`.
workload_result run_workload(client& c, const workload& w, history& h, const std::atomic<bool>& stop,
                             steady::time_point until, bool keep_log = false);

// The error name used in histories and attempt logs ("contended", ...).
std::string error_name(std::error_code ec);

// One round of the contention workload: `clients` clients (each its own client
// object and thread) run `base` (owner names "<prefix><i>") until `length` has
// passed, while `nemesis` runs on the calling thread (it should return by then).
struct contention_round {
  std::vector<std::string> uris;
  int clients = 10;
  workload base;
  std::string owner_prefix = "c";
  std::function<void(client_options&)> tune;  // adjust the clients' options
  std::chrono::milliseconds length{4000};
  // Runs on the calling thread while the clients run; may watch the history.
  std::function<void(steady::time_point until, const history& h)> nemesis;
};

struct contention_outcome {
  history h;
  std::vector<workload_result> results;
  std::uint64_t attempts() const;
  std::uint64_t release_failures() const;
  std::int64_t increments() const;
};

contention_outcome run_contention(const contention_round& spec);

// A worker process: the test binary re-executed with --redlock-worker, running
// run_workload against `nodes` and writing its history to a file.
struct worker_spec {
  std::string mode = "contend";    // or "pause_holder" (see client_pause_test.cc)
  std::vector<std::string> extra;  // more key=value arguments for the mode
  std::vector<std::string> nodes;
  workload w;  // shared_counter / fenced are ignored: use the ports
  std::chrono::milliseconds duration{3000};
  int counter_port = 0;  // 0 = no counter
  std::string counter_key;
  int fenced_port = 0;  // 0 = no fenced resource
  std::string fenced_name;
};

class worker_process {
 public:
  // Spawns the worker (posix_spawn of /proc/self/exe). Throws std::runtime_error.
  explicit worker_process(const worker_spec& spec);
  // Kills the worker if it still runs; removes its output file.
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  pid_t pid() const { return pid_; }
  // Waits (<= limit) for the exit; false on timeout. Then exit_code() is valid.
  bool wait(std::chrono::milliseconds limit);
  int exit_code() const { return status_; }
  // The worker's history and counter figures (valid after a successful wait()).
  history result_history() const;
  std::int64_t increments() const;
  // The output file's text (valid after a successful wait()).
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string out_path_;
  std::string output_;
};

// The --redlock-worker entry point (argv after the flag). Returns the exit code.
int worker_main(int argc, char** argv);
// The "pause_holder" worker mode (client_pause_test.cc); `kv` holds the key=value
// arguments.
int pause_holder_main(const std::map<std::string, std::string>& kv);
// The "sigpipe_probe" worker mode (churn_test.cc).
int sigpipe_probe_main(const std::map<std::string, std::string>& kv);

// Percentile (0..100) of `v` (sorted copy); 0 for an empty vector.
double percentile(std::vector<double> v, double p);

}  // namespace redlock::test
