#include "secrets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace redlock::cli {
namespace {

constexpr std::size_t max_secret_bytes = 64 * 1024;

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

// For the TCP schemes (redis://, rediss://, and a Redis Cluster's or a Sentinel
// group's redis+cluster://, rediss+cluster://, redis+sentinel://, rediss+sentinel://,
// whose one set of credentials serves every node): where the part after "://" starts, and where
// the user info's '@' is (npos: none). The '@' is the last one, as the library
// parses it.
struct authority {
  bool tcp = false;
  std::size_t rest = 0;
  std::size_t at = std::string_view::npos;
  std::size_t colon = std::string_view::npos;  // in the user info; npos: no password
};

authority split(std::string_view uri) {
  authority a;
  for (std::string_view scheme : {"redis://", "rediss://", "redis+cluster://", "rediss+cluster://",
                                  "redis+sentinel://", "rediss+sentinel://"}) {
    if (starts_with_ci(uri, scheme)) a.rest = scheme.size();
  }
  if (a.rest == 0) return a;
  a.tcp = true;
  const std::size_t at = uri.rfind('@');
  if (at == std::string_view::npos || at < a.rest) return a;
  a.at = at;
  const std::size_t colon = uri.substr(a.rest, at - a.rest).find(':');
  if (colon != std::string_view::npos) a.colon = a.rest + colon;
  return a;
}

std::string percent_encode(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string mode_string(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Reads at most max_secret_bytes + 1 bytes.
bool read_all(int fd, std::string& out, int& err) {
  out.clear();
  char buf[4096];
  while (out.size() <= max_secret_bytes) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

bool uri_has_password(std::string_view uri) { return split(uri).colon != std::string_view::npos; }

bool add_password(std::string_view uri, const std::string& password, std::string& out, std::string& error) {
  const authority a = split(uri);
  if (!a.tcp) {
    if (starts_with_ci(uri, "unix://")) {
      error = "cannot give " + std::string(uri) +
              " a password: unix:// node URIs carry no credentials in this version";
      return false;
    }
    out = std::string(uri);  // the library names what is wrong with it
    return true;
  }
  if (a.colon != std::string_view::npos) {
    out = std::string(uri);
    return true;
  }
  const std::string scheme(uri.substr(0, a.rest));
  if (a.at == std::string_view::npos) {
    out = scheme + ":" + percent_encode(password) + "@" + std::string(uri.substr(a.rest));
  } else {
    out = scheme + std::string(uri.substr(a.rest, a.at - a.rest)) + ":" + percent_encode(password) +
          std::string(uri.substr(a.at));
  }
  return true;
}

std::string remove_password(std::string_view uri) {
  const authority a = split(uri);
  if (a.colon == std::string_view::npos) return std::string(uri);
  const std::string_view user = uri.substr(a.rest, a.colon - a.rest);
  if (user.empty()) return std::string(uri.substr(0, a.rest)) + std::string(uri.substr(a.at + 1));
  return std::string(uri.substr(0, a.colon)) + std::string(uri.substr(a.at));
}

std::vector<std::pair<std::size_t, std::size_t>> password_spans(std::string_view arg) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  std::size_t begin = 0;
  if (arg.rfind("--", 0) == 0) {
    const std::size_t eq = arg.find('=');
    if (eq == std::string_view::npos) return spans;
    begin = eq + 1;
  }
  while (begin <= arg.size()) {
    std::size_t end = arg.find(',', begin);
    if (end == std::string_view::npos) end = arg.size();
    std::string_view uri = arg.substr(begin, end - begin);
    const std::size_t blanks = uri.find_first_not_of(" \t");
    if (blanks != std::string_view::npos) {
      uri.remove_prefix(blanks);
      const authority a = split(uri);
      if (a.colon != std::string_view::npos) {
        const std::size_t offset = begin + blanks;
        spans.emplace_back(offset + a.colon + 1, offset + a.at);
      }
    }
    begin = end + 1;
  }
  return spans;
}

std::string mask_passwords(std::string_view arg, std::string_view mask) {
  std::string out;
  std::size_t from = 0;
  for (const auto& [b, e] : password_spans(arg)) {
    if (b == e) continue;  // an empty password hides nothing
    out.append(arg.substr(from, b - from)).append(mask);
    from = e;
  }
  return out.append(arg.substr(from));
}

void scrub_argv(int argc, char** argv, const std::vector<std::size_t>& which) noexcept {
  try {
    std::vector<std::string> args(argv, argv + argc);
    std::size_t first = static_cast<std::size_t>(argc);
    for (std::size_t i : which) {
      if (i == 0 || i >= args.size()) continue;
      first = std::min(first, i);
    }
    if (first >= args.size()) return;
    // The area from argv[first] to the end of the last argument, if the arguments
    // lie one after the other in it (as the kernel lays them out).
    std::size_t area = 0;
    bool contiguous = true;
    for (std::size_t i = first; i < args.size() && contiguous; ++i) {
      contiguous = argv[i] == argv[first] + area;
      area += args[i].size() + 1;
    }
    if (!contiguous) {
      // Each argument in its own place: masked there, its freed bytes zeroed.
      for (std::size_t i : which) {
        if (i < first || i >= args.size()) continue;
        std::string m = mask_passwords(args[i], password_mask);
        if (m.size() > args[i].size()) m = mask_passwords(args[i], "*");
        std::memcpy(argv[i], m.c_str(), m.size());
        std::memset(argv[i] + m.size(), 0, args[i].size() - m.size());
      }
      return;
    }
    auto masked = [&](std::string_view mask) {
      std::vector<std::string> out(args.begin() + static_cast<std::ptrdiff_t>(first), args.end());
      for (std::size_t i : which) {
        if (i >= first && i < args.size()) out[i - first] = mask_passwords(args[i], mask);
      }
      return out;
    };
    auto size_of = [](const std::vector<std::string>& v) {
      std::size_t n = 0;
      for (const std::string& a : v) n += a.size() + 1;
      return n;
    };
    std::vector<std::string> out = masked(password_mask);
    if (size_of(out) > area) out = masked("*");
    if (size_of(out) > area) return;  // cannot happen: a password is at least one byte
    char* const end = argv[first] + area;
    char* p = argv[first];
    for (std::size_t i = 0; i < out.size(); ++i) {
      argv[first + i] = p;
      std::memcpy(p, out[i].c_str(), out[i].size() + 1);
      p += out[i].size() + 1;
    }
    std::memset(p, 0, static_cast<std::size_t>(end - p));
  } catch (...) {
    // Out of memory: the arguments stay as they were.
  }
}

bool read_password_file(const std::string& path, std::string& password, std::string& error) {
  const std::string name = "password file \"" + path + "\"";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    error = name + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  if (!ok) {
    error = name + ": cannot stat: " + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    ok = false;
    error = name + " is not a regular file";
  } else if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    ok = false;
    error = name + " is readable by " + ((st.st_mode & S_IROTH) != 0 ? "others" : "its group") +
            " (mode " + mode_string(st.st_mode) + "); make it private: chmod 600";
  }
  std::string content;
  int err = 0;
  if (ok && !read_all(fd, content, err)) {
    ok = false;
    error = name + ": cannot read: " + std::strerror(err);
  }
  ::close(fd);
  if (!ok) return false;
  if (content.size() > max_secret_bytes) {
    error = name + " is larger than 64 KiB";
    return false;
  }
  if (!content.empty() && content.back() == '\n') {  // one line ending: \n or \r\n
    content.pop_back();
    if (!content.empty() && content.back() == '\r') content.pop_back();
  }
  if (content.empty()) {
    error = name + " is empty";
    return false;
  }
  password = std::move(content);
  return true;
}

bool read_token(int fd, std::string& token, std::string& error) {
  std::string content;
  int err = 0;
  if (!read_all(fd, content, err)) {
    error = std::string("cannot read the token from stdin: ") + std::strerror(err);
    return false;
  }
  if (content.size() > max_secret_bytes) {
    error = "the token on stdin is longer than 64 KiB";
    return false;
  }
  if (!content.empty() && content.back() == '\n') content.pop_back();
  if (!content.empty() && content.back() == '\r') content.pop_back();
  if (content.find('\n') != std::string::npos) {
    error = "stdin holds more than one line; give the token alone";
    return false;
  }
  if (content.empty()) {
    error = "no token on stdin";
    return false;
  }
  token = std::move(content);
  return true;
}

}  // namespace redlock::cli
