// Reading the operator's files in docs/monitoring/ for the tests that check them
// against a live scrape (cli_test.cc): the PromQL expressions of a Prometheus rules
// file and of a Grafana dashboard, and the metric names an expression selects.
// Pure and header-only; the parsers cover what those files use, and say so below.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::test::monitoring {

inline bool promql_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':';
}
inline bool promql_ident_char(char c) {
  return promql_ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// The index just past the string literal that starts at `i` ("...", '...' with
// backslash escapes; `...` raw).
inline std::size_t skip_promql_string(std::string_view q, std::size_t i) {
  const char quote = q[i++];
  while (i < q.size() && q[i] != quote) i += (quote != '`' && q[i] == '\\') ? 2 : 1;
  return i < q.size() ? i + 1 : q.size();
}

// The index just past the bracket that closes the one at `i` (strings skipped).
inline std::size_t skip_promql_group(std::string_view q, std::size_t i, char open, char close) {
  int depth = 0;
  while (i < q.size()) {
    const char c = q[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_promql_string(q, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return q.size();
}

// The metric names a PromQL expression selects, as written (x_bucket stays x_bucket;
// recorded names such as job:x:rate5m included). Not names: functions and
// aggregations (an identifier before "(", and the aggregation operators before their
// by/without clause), label matchers {...}, ranges and subqueries [...], the label
// lists of by/without/on/ignoring/group_left/group_right, keywords (and, or, unless,
// bool, offset), numbers and durations, strings, comments, and Grafana variables
// ($x, ${x}, $__rate_interval).
inline std::set<std::string> promql_metric_names(std::string_view q) {
  static const std::set<std::string_view> aggregations = {
      "sum",   "min",          "max",     "avg",  "group",    "stddev", "stdvar",
      "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"};
  static const std::set<std::string_view> label_lists = {"by",       "without",    "on",
                                                         "ignoring", "group_left", "group_right"};
  static const std::set<std::string_view> keywords = {"and",    "or",    "unless", "bool",
                                                      "offset", "atan2", "inf",    "nan"};
  std::set<std::string> names;
  std::size_t i = 0;
  while (i < q.size()) {
    const char c = q[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = skip_promql_string(q, i);
    } else if (c == '{') {
      i = skip_promql_group(q, i, '{', '}');
    } else if (c == '[') {
      i = skip_promql_group(q, i, '[', ']');
    } else if (c == '#') {
      while (i < q.size() && q[i] != '\n') ++i;
    } else if (c == '$') {
      ++i;
      if (i < q.size() && q[i] == '{') {
        i = skip_promql_group(q, i, '{', '}');
      } else {
        while (i < q.size() && promql_ident_char(q[i])) ++i;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.') {
      while (i < q.size() && (promql_ident_char(q[i]) || q[i] == '.')) ++i;  // 0.99, 1e3, 5m, 0x1f
    } else if (promql_ident_start(c)) {
      const std::size_t start = i;
      while (i < q.size() && promql_ident_char(q[i])) ++i;
      const std::string_view word = q.substr(start, i - start);
      std::size_t next = i;
      while (next < q.size() && std::isspace(static_cast<unsigned char>(q[next])) != 0) ++next;
      const bool call = next < q.size() && q[next] == '(';
      if (label_lists.count(word) != 0) {
        if (call) i = skip_promql_group(q, next, '(', ')');
      } else if (!call && aggregations.count(word) == 0 && keywords.count(word) == 0) {
        names.emplace(word);
      }
    } else {
      ++i;
    }
  }
  return names;
}

// The expressions of a Prometheus rules file: every `expr:` value, inline (plain or
// quoted) or a block scalar (`|`, `>`, with a chomping indicator) of the lines
// indented deeper than the key. Covers the YAML the rules files here are written in
// (no flow mappings holding an expr, no multi-line plain scalars).
inline std::vector<std::string> rules_exprs(std::string_view yaml, std::string_view key = "expr") {
  std::vector<std::string> out;
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at <= yaml.size();) {
    const std::size_t nl = yaml.find('\n', at);
    const std::size_t end = nl == std::string_view::npos ? yaml.size() : nl;
    lines.push_back(yaml.substr(at, end - at));
    at = end + 1;
  }
  const auto indent_of = [](std::string_view l) { return l.find_first_not_of(' '); };
  for (std::size_t n = 0; n < lines.size(); ++n) {
    std::string_view l = lines[n];
    const std::size_t ind = indent_of(l);
    if (ind == std::string_view::npos) continue;
    std::string_view body = l.substr(ind);
    std::size_t key_indent = ind;
    if (body.rfind("- ", 0) == 0) {
      body.remove_prefix(2);
      key_indent += 2;
    }
    if (body.rfind(key, 0) != 0 || body.size() <= key.size() || body[key.size()] != ':') continue;
    std::string_view value = body.substr(key.size() + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (!value.empty() && (value.front() == '|' || value.front() == '>')) {
      // The block's indentation is its first line's; deeper lines keep the rest.
      std::string block;
      std::size_t block_indent = std::string_view::npos;
      for (std::size_t m = n + 1; m < lines.size(); ++m) {
        const std::size_t mi = indent_of(lines[m]);
        if (mi == std::string_view::npos) {
          block += '\n';
          continue;
        }
        if (mi <= key_indent) break;
        if (block_indent == std::string_view::npos) block_indent = mi;
        block += std::string(lines[m].substr(std::min(mi, block_indent))) + "\n";
      }
      while (block.size() >= 2 && block[block.size() - 1] == '\n' && block[block.size() - 2] == '\n')
        block.pop_back();
      out.push_back(block);
    } else if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
               value.back() == value.front()) {
      out.emplace_back(value.substr(1, value.size() - 2));
    } else {
      out.emplace_back(value);
    }
  }
  return out;
}

// The names a rules file records (`record:` values).
inline std::set<std::string> recorded_names(std::string_view yaml) {
  std::set<std::string> out;
  for (std::string& r : rules_exprs(yaml, "record")) out.insert(r);
  return out;
}

// Every string value of `key` in a JSON text ("expr": "...", at any depth), with
// its escapes decoded (\uXXXX below 0x80 only, which is what PromQL needs).
inline std::vector<std::string> json_string_values(std::string_view json, std::string_view key) {
  std::vector<std::string> out;
  const std::string quoted = "\"" + std::string(key) + "\"";
  for (std::size_t at = json.find(quoted); at != std::string_view::npos; at = json.find(quoted, at + 1)) {
    std::size_t i = at + quoted.size();
    while (i < json.size() && std::isspace(static_cast<unsigned char>(json[i])) != 0) ++i;
    if (i >= json.size() || json[i] != ':') continue;
    ++i;
    while (i < json.size() && std::isspace(static_cast<unsigned char>(json[i])) != 0) ++i;
    if (i >= json.size() || json[i] != '"') continue;
    std::string v;
    for (++i; i < json.size() && json[i] != '"'; ++i) {
      if (json[i] != '\\' || i + 1 >= json.size()) {
        v += json[i];
        continue;
      }
      const char e = json[++i];
      switch (e) {
        case 'n':
          v += '\n';
          break;
        case 't':
          v += '\t';
          break;
        case 'r':
          v += '\r';
          break;
        case 'b':
          v += '\b';
          break;
        case 'f':
          v += '\f';
          break;
        case 'u':
          if (i + 4 < json.size()) {
            v += static_cast<char>(std::stoi(std::string(json.substr(i + 1, 4)), nullptr, 16) & 0x7f);
            i += 4;
          }
          break;
        default:
          v += e;  // \" \\ \/
      }
    }
    out.push_back(v);
  }
  return out;
}

// For a Grafana variable query "label_values(EXPR, label)": EXPR; otherwise nothing.
inline std::optional<std::string> label_values_expr(std::string_view q) {
  constexpr std::string_view fn = "label_values(";
  if (q.rfind(fn, 0) != 0 || q.back() != ')') return std::nullopt;
  const std::string_view inner = q.substr(fn.size(), q.size() - fn.size() - 1);
  const std::size_t comma = inner.rfind(',');
  return std::string(comma == std::string_view::npos ? inner : inner.substr(0, comma));
}

// The family a sample name belongs to: itself, or for name_bucket (histograms) and
// name_sum / name_count (histograms and summaries) the base family, given a
// function `type_of(family) -> "histogram" | "summary" | ... | ""` (unknown).
template <class TypeOf>
std::optional<std::string> family_of(const std::string& name, const TypeOf& type_of) {
  if (!type_of(name).empty()) return name;
  for (const std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string base = name.substr(0, name.size() - suffix.size());
    const std::string type = type_of(base);
    if (type == "histogram" || (type == "summary" && suffix != "_bucket")) return base;
  }
  return std::nullopt;
}

}  // namespace redlock::test::monitoring
