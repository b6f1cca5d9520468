#include "record.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace redlock::bench {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

namespace {
std::string json_number(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", d);
  return buf;
}
}  // namespace

record::record(std::string scenario) : scenario_(std::move(scenario)) {}

record::field& record::slot(const std::string& key) {
  for (field& f : fields_) {
    if (f.key == key) return f;
  }
  fields_.push_back(field{});
  fields_.back().key = key;
  return fields_.back();
}

const record::field* record::find(const std::string& key) const {
  for (const field& f : fields_) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

record& record::set(const std::string& key, double value) {
  field& f = slot(key);
  f.k = kind::number;
  f.d = value;
  return *this;
}

record& record::set_int(const std::string& key, std::int64_t value) {
  field& f = slot(key);
  f.k = kind::integer;
  f.i = value;
  return *this;
}

record& record::set_str(const std::string& key, const std::string& value) {
  field& f = slot(key);
  f.k = kind::text;
  f.s = value;
  return *this;
}

record& record::set_list(const std::string& key, const std::vector<double>& values) {
  field& f = slot(key);
  f.k = kind::list;
  f.list = values;
  return *this;
}

record& record::set_summary(const std::string& prefix, const summary& s) {
  set_int(prefix + "_count", static_cast<std::int64_t>(s.count));
  set(prefix + "_p50_us", s.p50);
  set(prefix + "_p90_us", s.p90);
  set(prefix + "_p99_us", s.p99);
  set(prefix + "_p999_us", s.p999);
  set(prefix + "_max_us", s.max);
  set(prefix + "_mean_us", s.mean);
  return *this;
}

double record::num(const std::string& key) const {
  const field* f = find(key);
  if (f == nullptr) return std::numeric_limits<double>::quiet_NaN();
  if (f->k == kind::number) return f->d;
  if (f->k == kind::integer) return static_cast<double>(f->i);
  return std::numeric_limits<double>::quiet_NaN();
}

std::string record::str(const std::string& key) const {
  const field* f = find(key);
  return f != nullptr && f->k == kind::text ? f->s : std::string();
}

std::vector<double> record::list(const std::string& key) const {
  const field* f = find(key);
  return f != nullptr && f->k == kind::list ? f->list : std::vector<double>();
}

std::string record::to_json() const {
  std::string out = "{\"scenario\":" + json_quote(scenario_);
  for (const field& f : fields_) {
    out += "," + json_quote(f.key) + ":";
    switch (f.k) {
      case kind::number:
        out += json_number(f.d);
        break;
      case kind::integer:
        out += std::to_string(f.i);
        break;
      case kind::text:
        out += json_quote(f.s);
        break;
      case kind::list: {
        out += "[";
        for (std::size_t i = 0; i < f.list.size(); ++i) out += (i ? "," : "") + json_number(f.list[i]);
        out += "]";
        break;
      }
    }
  }
  return out + "}";
}

record record::median_of(const std::vector<record>& runs, const std::vector<std::string>& keep_runs) {
  record out = runs.front();
  for (field& f : out.fields_) {
    if (f.k != kind::number && f.k != kind::integer) continue;
    std::vector<double> values;
    for (const record& r : runs) {
      const double v = r.num(f.key);
      if (!std::isnan(v)) values.push_back(v);
    }
    if (values.empty()) continue;
    const double m = median(values);
    if (f.k == kind::integer) {
      f.i = static_cast<std::int64_t>(std::llround(m));
    } else {
      f.d = m;
    }
  }
  out.set_int("repeats", static_cast<std::int64_t>(runs.size()));
  for (const std::string& key : keep_runs) {
    field& f = out.slot(key + "_runs");
    f.k = kind::list;
    f.list.clear();
    for (const record& r : runs) f.list.push_back(r.num(key));
  }
  return out;
}

}  // namespace redlock::bench
