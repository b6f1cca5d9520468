// One scenario's results as an ordered set of named fields, written as one JSON
// object per line (JSON Lines). Numbers are looked up by name to compute ratios.
//
// Thread-safety: a record is used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure.h"

namespace redlock::bench {

class record {
 public:
  explicit record(std::string scenario);

  const std::string& scenario() const noexcept { return scenario_; }

  // Adds or replaces a field. Non-finite numbers are written as null.
  record& set(const std::string& key, double value);
  record& set_int(const std::string& key, std::int64_t value);
  record& set_str(const std::string& key, const std::string& value);
  record& set_list(const std::string& key, const std::vector<double>& values);
  // Adds <prefix>_count, _p50_us, _p90_us, _p99_us, _p999_us, _max_us, _mean_us.
  record& set_summary(const std::string& prefix, const summary& s);

  // The number stored under `key` (integers too); NaN if absent or not a number.
  double num(const std::string& key) const;
  // The string stored under `key`; "" if absent.
  std::string str(const std::string& key) const;
  // The list stored under `key`; empty if absent.
  std::vector<double> list(const std::string& key) const;

  // {"scenario":"...", ...fields in insertion order}
  std::string to_json() const;

  // The fields of runs[0] with every number replaced by the median over all runs
  // (runs must share their numeric keys; a key missing from a run is skipped for
  // that run), plus "repeats": runs.size() and, for each key in `keep_runs`, an
  // array "<key>_runs" with the value of every run. `runs` must not be empty.
  static record median_of(const std::vector<record>& runs, const std::vector<std::string>& keep_runs = {});

 private:
  enum class kind { number, integer, text, list };
  struct field {
    std::string key;
    kind k = kind::number;
    double d = 0;
    std::int64_t i = 0;
    std::string s;
    std::vector<double> list;
  };
  field& slot(const std::string& key);
  const field* find(const std::string& key) const;

  std::string scenario_;
  std::vector<field> fields_;
};

// JSON string literal of `s` (quotes and escapes included).
std::string json_quote(const std::string& s);

}  // namespace redlock::bench
