// A strict parser of the Prometheus text exposition format 0.0.4, for tests: it
// checks what a scraper relies on and reports the first violation with its line.
//
// The rules, from https://prometheus.io/docs/instrumenting/exposition_formats/
// ("Text format details"):
//   - lines end with "\n", the last one too; empty lines and blanks around tokens
//     are ignored;
//   - "#" lines are comments, except "# HELP name docstring" (docstring escapes
//     \\ and \n only; one HELP per name) and "# TYPE name type" (type one of
//     counter, gauge, histogram, summary, untyped; one TYPE per name, before the
//     name's first sample);
//   - a sample is: metric_name [ "{" label="value" { "," label="value" } [","] "}" ] value [ timestamp ]
//     with metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*,
//     label values escaping \\ \" \n (a line feed cannot appear raw), values Go
//     floats (NaN, +Inf, -Inf included), timestamps int64;
//   - all lines of a metric family form one uninterrupted group, HELP and TYPE
//     first; each name + label set appears once;
//   - a histogram x has x_bucket samples with an "le" label, in increasing le
//     order, cumulative (non-decreasing), one of them le="+Inf" equal to x_count;
//     x_sum and x_count; a summary's quantiles are in increasing order.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prom_text {

using labels = std::map<std::string, std::string>;

struct sample {
  std::string name;  // as written: x, x_bucket, x_sum, x_count
  labels label;
  double value = 0;
  std::optional<std::int64_t> timestamp;
};

struct family {
  std::string name;
  std::string type = "untyped";
  std::optional<std::string> help;
  bool typed = false;
  std::vector<sample> samples;
};

struct exposition {
  std::vector<family> families;
  std::string error;  // empty = valid

  explicit operator bool() const { return error.empty(); }

  const family* find(std::string_view name) const {
    for (const family& f : families)
      if (f.name == name) return &f;
    return nullptr;
  }
  // The value of the sample with exactly this name and these labels.
  std::optional<double> value(std::string_view name, const labels& l = {}) const {
    for (const family& f : families)
      for (const sample& s : f.samples)
        if (s.name == name && s.label == l) return s.value;
    return std::nullopt;
  }
  // Every sample of this name.
  std::vector<const sample*> all(std::string_view name) const {
    std::vector<const sample*> out;
    for (const family& f : families)
      for (const sample& s : f.samples)
        if (s.name == name) out.push_back(&s);
    return out;
  }
};

namespace detail {

inline bool blank(char c) { return c == ' ' || c == '\t'; }
inline bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

inline bool valid_metric_name(std::string_view n) {
  if (n.empty() || !(name_start(n[0]) || n[0] == ':')) return false;
  for (char c : n)
    if (!(name_char(c) || c == ':')) return false;
  return true;
}

inline bool valid_label_name(std::string_view n) {
  if (n.empty() || !name_start(n[0])) return false;
  for (char c : n)
    if (!name_char(c)) return false;
  return true;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string_view next_token(std::string_view& s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  std::size_t n = 0;
  while (n < s.size() && !blank(s[n])) ++n;
  std::string_view t = s.substr(0, n);
  s.remove_prefix(n);
  return t;
}

// A Go strconv.ParseFloat value: decimal or exponent form, optional sign, or
// NaN / Inf / Infinity in any case with an optional sign.
inline std::optional<double> parse_float(std::string_view t) {
  if (t.empty()) return std::nullopt;
  bool neg = false;
  std::string_view body = t;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  std::string lower;
  for (char c : body) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "inf" || lower == "infinity")
    return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (body.empty() || body[0] == '+' || body[0] == '-') return std::nullopt;
  double v = 0;
  auto r = std::from_chars(body.data(), body.data() + body.size(), v);
  if (r.ec != std::errc() || r.ptr != body.data() + body.size()) return std::nullopt;
  return neg ? -v : v;
}

inline std::optional<std::int64_t> parse_int64(std::string_view t) {
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  std::int64_t v = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class parser {
 public:
  exposition run(std::string_view text) {
    if (!text.empty() && text.back() != '\n') return fail(0, "the last line does not end with a line feed");
    std::size_t line_no = 0;
    while (!text.empty()) {
      ++line_no;
      std::size_t nl = text.find('\n');
      std::string_view raw = text.substr(0, nl);
      text.remove_prefix(nl + 1);
      std::string_view ln = trim(raw);
      if (ln.empty()) continue;
      std::string err = ln[0] == '#' ? comment(ln) : sample_line(ln);
      if (!err.empty()) return fail(line_no, err + ": " + std::string(raw));
    }
    for (const family& f : out_.families) {
      std::string err = check_family(f);
      if (!err.empty()) return fail(0, "family " + f.name + ": " + err);
    }
    return std::move(out_);
  }

 private:
  exposition out_;
  std::set<std::string> closed_;                   // families whose group has ended
  std::set<std::pair<std::string, labels>> seen_;  // name + labels of every sample

  exposition fail(std::size_t line_no, const std::string& what) {
    exposition e;
    e.error = (line_no > 0 ? "line " + std::to_string(line_no) + ": " : std::string()) + what;
    return e;
  }

  family* current() { return out_.families.empty() ? nullptr : &out_.families.back(); }

  // The family that lines about `name` belong to, starting a new group if needed;
  // null if that family's group already ended.
  family* enter(const std::string& name) {
    family* f = current();
    if (f != nullptr && f->name == name) return f;
    if (f != nullptr) closed_.insert(f->name);
    if (closed_.count(name) != 0) return nullptr;
    family nf;
    nf.name = name;
    out_.families.push_back(std::move(nf));
    return current();
  }

  std::string comment(std::string_view ln) {
    std::string_view rest = ln.substr(1);
    std::string_view keyword = next_token(rest);
    if (keyword != "HELP" && keyword != "TYPE") return {};
    std::string name(next_token(rest));
    if (!valid_metric_name(name)) return "HELP/TYPE with an invalid metric name";
    family* f = enter(name);
    if (f == nullptr) return "HELP/TYPE for " + name + " after its group ended";
    if (!f->samples.empty()) return "HELP/TYPE for " + name + " after its samples";
    if (keyword == "HELP") {
      if (f->help) return "a second HELP line for " + name;
      std::string_view doc = rest;
      while (!doc.empty() && blank(doc.front())) doc.remove_prefix(1);
      std::string help;
      for (std::size_t i = 0; i < doc.size(); ++i) {
        if (doc[i] != '\\') {
          help += doc[i];
          continue;
        }
        if (++i == doc.size()) return "HELP ends in a lone backslash";
        if (doc[i] == '\\')
          help += '\\';
        else if (doc[i] == 'n')
          help += '\n';
        else
          return "invalid escape in HELP";
      }
      f->help = help;
      return {};
    }
    if (f->typed) return "a second TYPE line for " + name;
    std::string type(next_token(rest));
    if (!next_token(rest).empty()) return "TYPE with more than two tokens";
    if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" && type != "untyped")
      return "unknown type '" + type + "'";
    f->type = type;
    f->typed = true;
    return {};
  }

  // The family a sample name belongs to: x for x_bucket/x_sum/x_count when x is
  // typed histogram (x_sum, x_count: or summary) and is the current group.
  std::string family_of(const std::string& name) {
    family* f = current();
    if (f != nullptr && f->typed) {
      for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
        if (!ends_with(name, suffix)) continue;
        std::string base = name.substr(0, name.size() - suffix.size());
        if (base != f->name) continue;
        if (f->type == "histogram" || (f->type == "summary" && suffix != "_bucket")) return base;
      }
    }
    return name;
  }

  std::string sample_line(std::string_view ln) {
    sample s;
    std::size_t i = 0;
    while (i < ln.size() && !blank(ln[i]) && ln[i] != '{') ++i;
    s.name = std::string(ln.substr(0, i));
    if (!valid_metric_name(s.name)) return "invalid metric name";
    while (i < ln.size() && blank(ln[i])) ++i;
    if (i < ln.size() && ln[i] == '{') {
      ++i;
      for (;;) {
        while (i < ln.size() && blank(ln[i])) ++i;
        if (i < ln.size() && ln[i] == '}') {
          ++i;
          break;
        }
        std::size_t start = i;
        while (i < ln.size() && name_char(ln[i])) ++i;
        std::string lname(ln.substr(start, i - start));
        if (!valid_label_name(lname)) return "invalid label name";
        while (i < ln.size() && blank(ln[i])) ++i;
        if (i >= ln.size() || ln[i] != '=') return "expected '=' after label name";
        ++i;
        while (i < ln.size() && blank(ln[i])) ++i;
        if (i >= ln.size() || ln[i] != '"') return "expected '\"' to open a label value";
        ++i;
        std::string value;
        for (;;) {
          if (i >= ln.size()) return "unterminated label value";
          char c = ln[i++];
          if (c == '"') break;
          if (c != '\\') {
            value += c;
            continue;
          }
          if (i >= ln.size()) return "unterminated label value";
          char e = ln[i++];
          if (e == '\\')
            value += '\\';
          else if (e == '"')
            value += '"';
          else if (e == 'n')
            value += '\n';
          else
            return "invalid escape in a label value";
        }
        if (!s.label.emplace(lname, value).second) return "label " + lname + " twice";
        while (i < ln.size() && blank(ln[i])) ++i;
        if (i < ln.size() && ln[i] == ',') {
          ++i;
          continue;
        }
        if (i < ln.size() && ln[i] == '}') {
          ++i;
          break;
        }
        return "expected ',' or '}' after a label value";
      }
    }
    std::string_view rest = ln.substr(i);
    std::string_view value = next_token(rest);
    auto v = parse_float(value);
    if (!v) return "invalid value '" + std::string(value) + "'";
    s.value = *v;
    std::string_view ts = next_token(rest);
    if (!ts.empty()) {
      auto t = parse_int64(ts);
      if (!t) return "invalid timestamp";
      s.timestamp = *t;
    }
    if (!next_token(rest).empty()) return "trailing tokens";
    if (!seen_.insert({s.name, s.label}).second) return "a second line for the same name and labels";
    family* f = enter(family_of(s.name));
    if (f == nullptr) return "sample of " + s.name + " after its family's group ended";
    f->samples.push_back(std::move(s));
    return {};
  }

  static std::string check_family(const family& f) {
    if (f.type == "histogram") return check_histogram(f);
    if (f.type == "summary") return check_summary(f);
    return {};
  }

  static std::string check_histogram(const family& f) {
    struct series {
      std::vector<std::pair<double, double>> buckets;  // (le, value) in order
      std::optional<double> sum, count;
    };
    std::map<labels, series> by_labels;
    for (const sample& s : f.samples) {
      labels l = s.label;
      if (s.name == f.name + "_bucket") {
        auto le = l.find("le");
        if (le == l.end()) return "a bucket without le";
        auto bound = parse_float(le->second);
        if (!bound || std::isnan(*bound)) return "a bucket with le=\"" + le->second + "\"";
        l.erase(le);
        by_labels[l].buckets.emplace_back(*bound, s.value);
      } else if (s.name == f.name + "_sum") {
        by_labels[l].sum = s.value;
      } else if (s.name == f.name + "_count") {
        by_labels[l].count = s.value;
      } else {
        return "sample " + s.name + " in a histogram";
      }
    }
    for (const auto& [l, h] : by_labels) {
      if (h.buckets.empty()) return "a series without buckets";
      for (std::size_t i = 1; i < h.buckets.size(); ++i) {
        if (!(h.buckets[i].first > h.buckets[i - 1].first)) return "buckets not in increasing le order";
        if (h.buckets[i].second < h.buckets[i - 1].second) return "bucket counts not cumulative";
      }
      if (!std::isinf(h.buckets.back().first) || h.buckets.back().first < 0) return "no le=\"+Inf\" bucket";
      if (!h.count) return "no _count";
      if (!h.sum) return "no _sum";
      if (h.buckets.back().second != *h.count) return "the +Inf bucket differs from _count";
    }
    return {};
  }

  static std::string check_summary(const family& f) {
    std::map<labels, double> last_quantile;
    for (const sample& s : f.samples) {
      if (s.name != f.name) continue;
      labels l = s.label;
      auto q = l.find("quantile");
      if (q == l.end()) return "a summary sample without quantile";
      auto v = parse_float(q->second);
      if (!v) return "an invalid quantile";
      l.erase(q);
      auto it = last_quantile.find(l);
      if (it != last_quantile.end() && !(*v > it->second)) return "quantiles not in increasing order";
      last_quantile[l] = *v;
    }
    return {};
  }
};

}  // namespace detail

inline exposition parse(std::string_view text) { return detail::parser().run(text); }

}  // namespace prom_text
