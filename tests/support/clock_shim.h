// Control of the clock shim (clock_shim.c, built as the shared library
// redlock_clock_shim): shifts a redis-server's wall clock while it runs.
//
// A shimmed node is a redis_node started with LD_PRELOAD=<shim> and
// REDLOCK_CLOCK_SHIM_FILE=<its offset file> in its environment. redis_node passes
// the test process's environment to the server (fork + execv), so both variables
// are set in this process only around the start (scoped_env) and restored after.
//
// Thread safety: clock_shim_control may be used from any thread. scoped_env edits
// the process environment: create one only while no other thread reads it (in
// practice: start shimmed nodes before starting clients); scoped_env instances are
// serialised among themselves by a global mutex.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "redis_node.h"

namespace redlock::test {

// The path of the built shim library: $REDLOCK_CLOCK_SHIM if set, else the path
// compiled in (REDLOCK_CLOCK_SHIM_PATH). Throws std::runtime_error if neither
// names an existing file.
std::string clock_shim_library();

// The offset file one shimmed process reads (an offset, or a frozen instant). set_offset() replaces the file
// atomically (write a temporary file, rename), so the reader sees the old or the
// new offset, never a torn one; the process picks it up within ~1 ms.
class clock_shim_control {
 public:
  // Creates `path` with offset 0. Throws std::runtime_error.
  explicit clock_shim_control(std::string path);
  // Removes the file. Never throws.
  ~clock_shim_control();
  clock_shim_control(const clock_shim_control&) = delete;
  clock_shim_control& operator=(const clock_shim_control&) = delete;

  // Shifts the clock by `offset` from the kernel's (it runs on).
  void set_offset(std::chrono::milliseconds offset);
  std::chrono::milliseconds offset() const;
  // Stops the clock at `since_epoch`: every read returns exactly that instant until
  // the next freeze() or set_offset(). Picked up within ~1 ms, like an offset.
  void freeze(std::chrono::microseconds since_epoch);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  mutable std::mutex mu_;
  std::chrono::milliseconds offset_{0};
};

// Sets environment variables for the scope and restores their previous values
// (or unsets them) afterwards. See the thread-safety note above.
class scoped_env {
 public:
  explicit scoped_env(std::vector<std::pair<std::string, std::string>> vars);
  ~scoped_env();
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;  // name, (was set, value)
};

// A redis_node whose wall clock the test controls. Starts the server at
// construction (offset 0). start()/restart() run with the shim preloaded again;
// the offset file lives beside the node's directory, so it survives
// restart(keep_data = false).
class shimmed_node {
 public:
  explicit shimmed_node(node_config cfg = {});
  ~shimmed_node();
  shimmed_node(const shimmed_node&) = delete;
  shimmed_node& operator=(const shimmed_node&) = delete;

  redis_node& node() { return *node_; }
  redis_node* operator->() { return node_.get(); }
  clock_shim_control& clock() { return *clock_; }

  void start();
  void restart(bool keep_data);

 private:
  std::vector<std::pair<std::string, std::string>> env() const;
  std::string offset_path_;
  std::unique_ptr<clock_shim_control> clock_;
  std::unique_ptr<redis_node> node_;
};

}  // namespace redlock::test
