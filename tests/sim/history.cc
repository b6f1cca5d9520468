#include "history.h"

#include <cinttypes>
#include <algorithm>
#include <cstdio>

namespace redlock::simtest {

const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::acquire:
      return "acquire";
    case op_kind::extend:
      return "extend";
    case op_kind::release:
      return "release";
  }
  return "?";
}

void history::note(std::int64_t t_us, int client, int resource, std::string text) {
  timeline.push_back(timeline_entry{t_us, client, resource, std::move(text)});
}

namespace {
struct fnv {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 0x100000001b3ull;
    }
  }
  void i64(std::int64_t v) {
    // Byte by byte, little-endian whatever the host: the digest is the same everywhere.
    for (int i = 0; i < 8; ++i) {
      const auto b = static_cast<unsigned char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
      bytes(&b, 1);
    }
  }
  void str(const std::string& s) {
    i64(static_cast<std::int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
};
}  // namespace

std::uint64_t history::digest() const {
  fnv f;
  for (const auto& e : timeline) {
    f.i64(e.t_us);
    f.i64(e.client);
    f.i64(e.resource);
    f.str(e.text);
  }
  for (const auto& o : ops) {
    f.i64(o.id);
    f.i64(static_cast<int>(o.kind));
    f.i64(o.call_us);
    f.i64(o.done_us);
    f.i64(o.completions);
    f.str(o.result);
  }
  for (const auto& h : holds) {
    f.str(h.token);
    f.i64(h.fence ? static_cast<std::int64_t>(*h.fence) : -1);
    f.i64(h.complete_us);
    for (const auto& iv : h.belief) {
      f.i64(iv.from);
      f.i64(iv.to);
    }
  }
  for (const auto& w : writes) {
    f.i64(w.hold);
    f.i64(w.arrived_us);
    f.i64(w.accepted ? 1 : 0);
  }
  return f.h;
}

std::string history::format_time(std::int64_t t_us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%4" PRId64 ".%06" PRId64, t_us / 1'000'000, t_us % 1'000'000);
  return buf;
}

std::string history::format(const timeline_entry& e) const {
  std::string out = format_time(e.t_us);
  out += e.client >= 0 ? " c" + std::to_string(e.client) : std::string(" --");
  out += e.resource >= 0 ? " r" + std::to_string(e.resource) : std::string("   ");
  out += ' ';
  out += e.text;
  return out;
}

std::string history::slice(const std::function<bool(const timeline_entry&)>& pick, std::size_t max_lines) const {
  std::vector<const timeline_entry*> picked;
  for (const auto& e : timeline) {
    if (pick(e)) picked.push_back(&e);
  }
  std::string out;
  const std::size_t skip = picked.size() > max_lines ? picked.size() - max_lines : 0;
  if (skip > 0) out += "    ... " + std::to_string(skip) + " earlier lines left out\n";
  for (std::size_t i = skip; i < picked.size(); ++i) out += "    " + format(*picked[i]) + "\n";
  return out;
}

std::string history::slice(std::int64_t from, std::int64_t to, int resource, std::size_t max_lines) const {
  return slice(
      [&](const timeline_entry& e) {
        return e.t_us >= from && e.t_us <= to && (resource < 0 || e.resource < 0 || e.resource == resource);
      },
      max_lines);
}

std::string history::slice_for(const hold_record& a, const hold_record& b, std::int64_t to,
                               std::int64_t lookback_us) const {
  const std::int64_t start = std::min(a.invoke_us, b.invoke_us);
  return slice([&](const timeline_entry& e) {
    if (e.t_us > to) return false;
    if (e.client < 0) return e.t_us >= start - lookback_us;
    return e.t_us >= start && e.resource == a.resource && (e.client == a.client || e.client == b.client);
  });
}

std::string history::format_hold(const hold_record& h) const {
  std::string out = "hold #" + std::to_string(h.id) + " of c" + std::to_string(h.client) + " on r" +
                    std::to_string(h.resource) + " (token " + h.token.substr(0, 8) + "..";
  if (h.fence) out += ", fence " + std::to_string(*h.fence);
  out += h.auto_extend ? ", watchdog" : "";
  out += "): acquire called " + format_time(h.invoke_us) + ", succeeded " + format_time(h.complete_us);
  out += "; believed held in";
  if (h.belief.empty()) out += " (nothing)";
  for (const auto& iv : h.belief) out += " [" + format_time(iv.from) + ", " + format_time(iv.to) + ")";
  if (h.release_call_us >= 0) out += "; release called " + format_time(h.release_call_us);
  if (h.on_lost_us >= 0) out += "; on_lost " + format_time(h.on_lost_us);
  return out;
}

}  // namespace redlock::simtest
