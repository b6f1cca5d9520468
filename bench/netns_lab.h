// Nodes at a distance: each redis-server runs in a network namespace of its own,
// joined to the benchmark's namespace by a veth pair whose two ends carry loopback
// addresses (127.B.k.1/30 here, 127.B.k.2/30 in the namespace, with
// route_localnet=1 on both ends so the kernel routes 127/8 over them): the
// project's traffic stays on 127.0.0.0/8. The distance itself (a delay) is added by
// a delay proxy process (child_process.h) in front of each node.
//
// Needs root and iproute2's `ip` (netns, veth). Everything it creates carries the
// benchmark's pid in its name (rlb<pid>n<k> namespaces, rlb<pid>r<k>/rlb<pid>v<k>
// veths, /tmp/redlock-bench-netns-<pid>-* for the servers' files) and is removed by
// the destructor, also when the constructor throws; the servers and proxies die with
// the benchmark (PR_SET_PDEATHSIG), and the namespaces (with their veths) and
// directories left by a benchmark that was killed are removed by the next lab that
// starts.
//
// Thread-safety: one thread at a time (the benchmark's main thread).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "child_process.h"

namespace redlock::bench {

class netns_lab {
 public:
  // "" if a lab can be made here; else why not (for a "skipped: ..." line).
  static std::string unavailable();

  // Makes `nodes` (1..9) namespaces with a redis-server in each, listening on
  // node_host(i):node_port(i), and waits until each answers PING (through the
  // veth). Throws std::runtime_error after removing what it made.
  explicit netns_lab(std::size_t nodes);
  // Kills the servers, deletes the namespaces and the veths. Never throws.
  ~netns_lab();
  netns_lab(const netns_lab&) = delete;
  netns_lab& operator=(const netns_lab&) = delete;

  std::size_t size() const noexcept { return servers_.size(); }
  std::string node_host(std::size_t i) const;
  int node_port(std::size_t) const noexcept { return 6379; }
  pid_t server_pid(std::size_t i) const { return servers_.at(i)->pid(); }
  std::vector<int> server_pids() const;

 private:
  void cleanup() noexcept;
  std::string ns_name(std::size_t k) const;

  int tag_;        // the pid in the names
  int octet_;      // B in 127.B.k.x
  std::size_t made_ = 0;  // namespaces created so far (cleanup deletes these)
  std::string dir_;       // server directories and logs
  std::vector<std::unique_ptr<child_process>> servers_;
};

}  // namespace redlock::bench
