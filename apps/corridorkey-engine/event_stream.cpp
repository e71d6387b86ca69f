#include "event_stream.h"

#include "commands.h"

#include <corridorkey/errors.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace corridorkey::cli {
namespace {

/// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 when the byte starts none
/// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned cp = 0;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

void append_string(std::string& out, const std::string& s) {
  out += '"';
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0) {  // not UTF-8: the byte as a lone surrogate (surrogateescape)
      std::snprintf(buf, sizeof buf, "\\udc%02x", c);
      out += buf;
      ++i;
      continue;
    }
    if (n == 1) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) {  // DEL too: no control character reaches a terminal raw
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) {
      // U+0080-U+009F, the C1 controls (some terminals take U+009B for ESC [): escaped, as
      // JSON allows, so a plan key or a name read from a file cannot drive a terminal.
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
      out += buf;
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  out += '"';
}

void append(std::string& out, const nlohmann::json& j) {
  if (j.is_string()) {
    append_string(out, j.get_ref<const std::string&>());
  } else if (j.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ',';
      first = false;
      append_string(out, it.key());
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

void EventStream::line(const nlohmann::json& j) {
  if (closed_) return;
  std::fflush(stdout);  // anything printed through stdio stays in order
  const std::string text = dump_lossless(j) + "\n";
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

nlohmann::json error_event(const std::exception& e) {
  auto c = exit_class(e);
  const std::string kind = c.kind == std::string("device") ? "model" : c.kind;  // the stream's four kinds
  return {{"event", "error"}, {"kind", kind}, {"exit_code", c.exit_code}, {"message", e.what()}};
}

nlohmann::json stage_json(const StageTimings& t) {
  return {{"read", t.read_ms},       {"preprocess", t.preprocess_ms}, {"infer", t.infer_ms},
          {"encoder", t.encoder_ms}, {"decoders", t.decoders_ms},     {"refiner", t.refiner_ms},
          {"postprocess", t.postprocess_ms}, {"write", t.write_ms}};
}

nlohmann::json event_json(const PipelineEvent& e) {
  nlohmann::json j{{"event", to_string(e.kind)}};
  if (!e.clip.empty()) j["clip"] = e.clip;
  if (!e.frame.empty()) j["frame"] = e.frame;
  if (!e.file.empty()) j["file"] = e.file;
  if (!e.message.empty()) j["message"] = e.message;
  if (!e.checkpoint.empty()) j["checkpoint"] = e.checkpoint;
  if (!e.screen.empty()) j["screen"] = e.screen;
  j["done"] = e.frames_done;
  j["total"] = e.frames_total;
  if (e.kind == PipelineEvent::Kind::FrameDone) j["timings_ms"] = stage_json(e.timings);
  if (e.kind == PipelineEvent::Kind::JobStarted)
    j["plan"] = {{"origin", to_string(e.plan_origin)}, {"trial_ms", e.trial_ms}};
  return j;
}

double plan_trials_this_run(const TunePlan& p) {
  return p.origin == PlanOrigin::Trials || p.origin == PlanOrigin::Memory ? p.trial_ms : 0;
}

nlohmann::json plan_json(const TunePlan& p) {
  return {{"origin", to_string(p.origin)}, {"trial_ms", plan_trials_this_run(p)}, {"cache", p.cache_path}};
}

std::string plan_text(const TunePlan& p) {
  char b[160];
  switch (p.origin) {
    case PlanOrigin::Trials:
    case PlanOrigin::Memory:
      std::snprintf(b, sizeof b, "plan: timed now, trials %.1f s while the model loaded (not in the wall time above)%s",
                    p.trial_ms / 1000, p.origin == PlanOrigin::Memory ? "; kept in memory, the cache is not writable" : "");
      return b;
    case PlanOrigin::Cache: return "plan: read from the cache " + p.cache_path + " (no trials)";
    case PlanOrigin::Off: break;
  }
  return p.mode == TuneMode::Off ? "plan: tune off (flag rules)" : "plan: flag rules (no cached plan, or no trials here)";
}

nlohmann::json summary_json(const JobSummary& sum) {
  nlohmann::json j{{"event", "summary"}, {"clips", sum.clips}, {"frames_total", sum.frames_total},
                   {"frames_done", sum.frames_done}, {"frames_skipped", sum.frames_skipped},
                   {"frames_failed", sum.frames_failed}, {"videos_written", sum.videos_written},
                   {"videos_failed", sum.videos_failed}, {"failures", sum.failures},
                   {"interrupted", sum.interrupted}, {"wall_ms", sum.wall_ms},
                   {"device", sum.engine.device}, {"checkpoint", sum.engine.checkpoint},
                   {"infer_wait_ms", sum.infer_wait_ms},
                   {"stage_ms", stage_json(sum.stage_sums)}, {"plan", plan_json(sum.engine.tune)},
                   {"clip_models", nlohmann::json::array()}};
  for (const auto& m : sum.clip_models)
    j["clip_models"].push_back({{"clip", m.clip}, {"checkpoint", m.checkpoint},
                                {"screen", m.screen}, {"swapped", m.swapped}});
  return j;
}

}  // namespace corridorkey::cli
