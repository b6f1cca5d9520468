#include "clock_shim.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace redlock::test {
namespace {

std::mutex& env_mutex() {
  static std::mutex mu;
  return mu;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("clock_shim: open " + tmp + ": " + std::strerror(errno));
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error("clock_shim: write " + tmp + ": " + std::strerror(err));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("clock_shim: rename " + tmp + ": " + std::strerror(errno));
}

}  // namespace

std::string clock_shim_library() {
  std::string path;
  if (const char* env = std::getenv("REDLOCK_CLOCK_SHIM"); env != nullptr && *env != '\0') {
    path = env;
  } else {
#ifdef REDLOCK_CLOCK_SHIM_PATH
    path = REDLOCK_CLOCK_SHIM_PATH;
#endif
  }
  if (path.empty() || ::access(path.c_str(), R_OK) != 0)
    throw std::runtime_error("clock shim library not found (set REDLOCK_CLOCK_SHIM): '" + path + "'");
  return path;
}

clock_shim_control::clock_shim_control(std::string path) : path_(std::move(path)) { set_offset({}); }

clock_shim_control::~clock_shim_control() {
  ::unlink(path_.c_str());
  ::unlink((path_ + ".tmp").c_str());
}

void clock_shim_control::set_offset(std::chrono::milliseconds offset) {
  std::lock_guard<std::mutex> lk(mu_);
  write_file_atomically(path_, std::to_string(offset.count()) + "\n");
  offset_ = offset;
}

void clock_shim_control::freeze(std::chrono::microseconds since_epoch) {
  std::lock_guard<std::mutex> lk(mu_);
  write_file_atomically(path_, "@" + std::to_string(since_epoch.count()) + "\n");
}

std::chrono::milliseconds clock_shim_control::offset() const {
  std::lock_guard<std::mutex> lk(mu_);
  return offset_;
}

scoped_env::scoped_env(std::vector<std::pair<std::string, std::string>> vars) : lock_(env_mutex()) {
  for (auto& [name, value] : vars) {
    const char* old = std::getenv(name.c_str());
    saved_.push_back({name, {old != nullptr, old != nullptr ? std::string(old) : std::string()}});
    ::setenv(name.c_str(), value.c_str(), 1);
  }
}

scoped_env::~scoped_env() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second.first) {
      ::setenv(it->first.c_str(), it->second.second.c_str(), 1);
    } else {
      ::unsetenv(it->first.c_str());
    }
  }
}

shimmed_node::shimmed_node(node_config cfg) {
  // Named like the harness's directories, so a crashed test's file is cleaned up
  // by the next test process (redis_node removes /tmp/redlock-test-<dead pid>-*).
  std::string tmpl = "/tmp/redlock-test-" + std::to_string(::getpid()) + "-clock-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error("clock_shim: mkstemp: " + std::string(std::strerror(errno)));
  ::close(fd);
  offset_path_ = tmpl;
  clock_ = std::make_unique<clock_shim_control>(offset_path_);
  scoped_env guard(env());
  node_ = std::make_unique<redis_node>(std::move(cfg));
}

shimmed_node::~shimmed_node() { node_.reset(); }

std::vector<std::pair<std::string, std::string>> shimmed_node::env() const {
  return {{"LD_PRELOAD", clock_shim_library()}, {"REDLOCK_CLOCK_SHIM_FILE", offset_path_}};
}

void shimmed_node::start() {
  scoped_env guard(env());
  node_->start();
}

void shimmed_node::restart(bool keep_data) {
  scoped_env guard(env());
  node_->restart(keep_data);
}

}  // namespace redlock::test
