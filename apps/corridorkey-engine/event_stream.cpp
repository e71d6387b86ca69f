#include "event_stream.h"

#include "commands.h"

#include <corridorkey/errors.h>
#include <corridorkey/report_json.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>

#include <unistd.h>

namespace corridorkey::cli {
namespace {

void append(std::string& out, const nlohmann::json& j) {
  if (j.is_string()) {
    out += json_string(j.get_ref<const std::string&>());
  } else if (j.is_binary()) {  // raw_json: text the engine wrote
    const auto& b = j.get_binary();
    out.append(b.begin(), b.end());
  } else if (j.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += json_string(it.key());
      out += ':';
      append(out, it.value());
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t k = 0; k < j.size(); ++k) {
      if (k) out += ',';
      append(out, j[k]);
    }
    out += ']';
  } else {
    out += j.dump();  // numbers, booleans, null: nlohmann's own text
  }
}

}  // namespace

std::string dump_lossless(const nlohmann::json& j) {
  std::string out;
  append(out, j);
  return out;
}

nlohmann::json raw_json(const std::string& text) {
  return nlohmann::json::binary(std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::string with_members(std::string object, const nlohmann::json& extra) {
  const std::string members = dump_lossless(extra);  // "{...}"
  if (members.size() <= 2) return object;
  while (!object.empty() && object.back() != '}') object.pop_back();
  if (object.size() < 2) return members;  // not an object: the members alone
  object.pop_back();
  if (object.back() != '{') object += ',';
  return object + members.substr(1);
}

void EventStream::line(const std::string& json_text) {
  if (closed_) return;
  std::fflush(stdout);  // anything printed through stdio stays in order
  const std::string text = json_text + "\n";
  const char* p = text.data();
  size_t n = text.size();
  while (n > 0) {
    const ssize_t k = ::write(STDOUT_FILENO, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      closed_ = true;
      std::fprintf(stderr, "corridorkey: the event stream (stdout) closed (%s): no more events; "
                           "keying goes on\n", k < 0 ? std::strerror(errno) : "no progress");
      return;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

ExitClass exit_class(const std::exception& e) {
  if (dynamic_cast<const ConfigError*>(&e)) return {"usage", kUsage};
  if (dynamic_cast<const IoError*>(&e)) return {"input", kInput};
  if (dynamic_cast<const DeviceError*>(&e)) return {"device", kModel};
  if (dynamic_cast<const ModelError*>(&e)) return {"model", kModel};
  return {"failure", kFailure};
}

std::string error_event(const std::exception& e) {
  auto c = exit_class(e);
  const std::string kind = c.kind == std::string("device") ? "model" : c.kind;  // the stream's four kinds
  return error_event_json(kind, c.exit_code, e.what());
}

std::string plan_text(const TunePlan& p) {
  char b[160];
  switch (p.origin) {
    case PlanOrigin::Trials:
    case PlanOrigin::Memory:
      std::snprintf(b, sizeof b, "plan: timed now, trials %.1f s while the model loaded (not in the wall time above)%s",
                    p.trial_ms_this_run() / 1000, p.origin == PlanOrigin::Memory ? "; kept in memory, the cache is not writable" : "");
      return b;
    case PlanOrigin::Cache: return "plan: read from the cache " + p.cache_path + " (no trials)";
    case PlanOrigin::Off: break;
  }
  return p.mode == TuneMode::Off ? "plan: tune off (flag rules)" : "plan: flag rules (no cached plan, or no trials here)";
}

}  // namespace corridorkey::cli
