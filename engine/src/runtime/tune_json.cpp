#include "runtime/tune_json.h"

#include <corridorkey/check.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

namespace corridorkey::detail {
namespace {
namespace json = model::json;
using ordered = nlohmann::ordered_json;

/// The text of `j` laid out as the cache has always been: on one line, a space after each
/// ':' and ',' outside strings, so people can read and grep it. Invalid UTF-8 in a key (none
/// this engine makes) is written as U+FFFD rather than failing the write.
std::string spaced(const ordered& j) {
  const std::string compact = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(compact.size() + compact.size() / 8);
  bool in_string = false, escaped = false;
  for (const char c : compact) {
    out += c;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ':' || c == ',') {
      out += ' ';
    }
  }
  return out;
}

ordered plan_object(const TunePlan& p) {
  ordered decisions = ordered::array();
  for (const auto& d : p.decisions) {
    // JSON has no infinity: a time that is not finite is left out, not written as `inf`
    // (which would make the whole file unreadable, every plan in it lost).
    ordered times = ordered::object();
    for (const auto& [name, ms] : d.times_ms)
      if (std::isfinite(ms)) times[name] = ms;
    decisions.push_back(ordered{{"option", to_string(d.option)},
                                {"value", to_string(d.value)},
                                {"source", to_string(d.source)},
                                {"why", d.why},
                                {"times_ms", std::move(times)}});
  }
  return ordered{{"origin", to_string(p.origin == PlanOrigin::Cache ? PlanOrigin::Trials : p.origin)},
                 {"trial_ms", std::isfinite(p.trial_ms) ? p.trial_ms : 0.0},
                 {"decisions", std::move(decisions)}};
}

std::string quoted(const std::string& s) { return spaced(ordered(s)); }

/// `text` as the enum value between first and last (inclusive) whose to_string it is.
template <class E>
bool parsed(const std::string& text, E first, E last, E& out) {
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i)
    if (text == to_string(static_cast<E>(i))) {
      out = static_cast<E>(i);
      return true;
    }
  return false;
}

}  // namespace

TunePlan plan_from(const json::Value& v, const std::string& key, const std::string& path) {
  CK_CHECK(v.kind == json::Value::Kind::Object, ModelError, path, ": plan '", key, "' is not an object");
  TunePlan p;
  p.key = key;
  p.cache_path = path;
  p.origin = PlanOrigin::Cache;
  p.trial_ms = number_of(v.find("trial_ms"));
  const auto* ds = v.find("decisions");
  CK_CHECK(ds && ds->kind == json::Value::Kind::Array, ModelError, path, ": plan '", json::printable(key, 80),
           "' has no decisions list");
  std::set<std::string> seen;
  for (const auto& d : ds->items) {
    CK_CHECK(d.kind == json::Value::Kind::Object, ModelError, path, ": a decision is not an object");
    const std::string option = text_of(d.find("option")), value = text_of(d.find("value")),
                      source = text_of(d.find("source"));
    TuneDecision t;
    t.why = text_of(d.find("why"));
    // Only what this engine writes: a value it would not choose itself is not applied.
    const bool option_ok = parsed(option, TuneOption::ModelPrecision, TuneOption::TiledRefiner, t.option);
    const bool value_ok = parsed(value, TuneChoice::False, TuneChoice::Float16, t.value);
    const bool source_ok = parsed(source, DecisionSource::Plan, DecisionSource::Only, t.source);
    const bool precision = option_ok && t.option == TuneOption::ModelPrecision;
    const bool boolean = value_ok && (t.value == TuneChoice::True || t.value == TuneChoice::False);
    // float16 comes only from the flag rule (a GPU's): the plan chooses float32 or bfloat16.
    const bool ok = option_ok && value_ok &&
                    (precision ? !boolean && !(t.value == TuneChoice::Float16 && source_ok && t.source == DecisionSource::Plan)
                               : boolean);
    CK_CHECK(ok, ModelError, path, ": plan '", json::printable(key, 80), "': decision ",
             json::printable(option, 40), " = ", json::printable(value, 40), " is not one this engine makes");
    // The sources this engine writes into a plan; a report must not say "flag" for a file's word.
    CK_CHECK(source_ok, ModelError, path, ": plan '", json::printable(key, 80), "': decision ", option,
             " has source ", json::printable(source, 40), ", not one this engine writes");
    CK_CHECK(seen.insert(option).second, ModelError, path, ": plan '", json::printable(key, 80),
             "': decision ", option, " appears twice");
    if (const auto* tm = d.find("times_ms"); tm && tm->kind == json::Value::Kind::Object)
      for (size_t i = 0; i < tm->keys.size(); ++i) {
        const auto& v = tm->values[i];
        CK_CHECK(v.kind == json::Value::Kind::Float || v.kind == json::Value::Kind::Int, ModelError, path,
                 ": plan '", json::printable(key, 80), "': time ", json::printable(tm->keys[i], 40),
                 " is not a number");
        const double ms = number_of(&v);
        CK_CHECK(std::isfinite(ms) && ms >= 0 && ms < 1e9, ModelError, path, ": plan '",
                 json::printable(key, 80), "': time ", ms, " ms is out of range");
        t.times_ms.emplace_back(tm->keys[i], ms);
      }
    p.decisions.push_back(std::move(t));
  }
  return p;
}

std::string text_of(const json::Value* v) {
  return v && v->kind == json::Value::Kind::String ? v->s : std::string();
}

double number_of(const json::Value* v) {
  return v && (v->kind == json::Value::Kind::Float || v->kind == json::Value::Kind::Int) ? v->f : 0.0;
}

std::string plan_json(const TunePlan& plan) { return spaced(plan_object(plan)); }

std::string cache_file_text(const std::vector<std::pair<std::string, std::string>>& plans) {
  // Assembled from pieces so each plan keeps a line of its own (a diff of two caches, a grep
  // for a key); every piece is nlohmann's.
  std::string out = "{\"format\": " + quoted(kFormatName) + ", \"version\": " + std::to_string(kCacheVersion) +
                    ", \"plans\": {\n";
  for (size_t i = 0; i < plans.size(); ++i)
    out += (i ? ",\n  " : "  ") + quoted(plans[i].first) + ": " + plans[i].second;
  return out + "\n}}\n";
}

std::string plan_file_text(const TunePlan& plan) {
  return "{\"format\": " + quoted(kPlanFormatName) + ", \"version\": " + std::to_string(kCacheVersion) +
         ", \"key\": " + quoted(plan.key) + ",\n \"plan\": " + plan_json(plan) + "}\n";
}

std::string rate_file_text(const std::string& key, double value) {
  return spaced(ordered{{"format", kRateFormatName}, {"version", kCacheVersion}, {"key", key}, {"value", value}}) + "\n";
}

}  // namespace corridorkey::detail
