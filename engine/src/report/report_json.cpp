// report_json.h: every event, summary, run.json, engine info, plan and stage-timings object
// is built here, once, and written as text with the lossless string rule.
#include <corridorkey/report_json.h>

#include <corridorkey/base/utf8.h>
#include <nlohmann/json.hpp>

#include <cstdio>

CORRIDORKEY_NAMESPACE_BEGIN

const char* to_string(PipelineEvent::Kind k) {
  switch (k) {
    case PipelineEvent::Kind::JobStarted: return "job_started";
    case PipelineEvent::Kind::ClipStarted: return "clip_started";
    case PipelineEvent::Kind::FrameDone: return "frame_done";
    case PipelineEvent::Kind::FrameSkipped: return "frame_skipped";
    case PipelineEvent::Kind::Warning: return "warning";
    case PipelineEvent::Kind::FrameFailed: return "frame_failed";
    case PipelineEvent::Kind::VideoWritten: return "video_written";
    case PipelineEvent::Kind::VideoFailed: return "video_failed";
    case PipelineEvent::Kind::ClipDone: return "clip_done";
    case PipelineEvent::Kind::JobDone: return "job_done";
  }
  return "?";
}

namespace {

// Insertion order: a reader sees the fields as the docs list them.
using json = nlohmann::ordered_json;

/// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 when the byte starts none.
size_t utf8_sequence(const std::string& s, size_t i) { return base::utf8_at(s, i).length; }

/// How a byte that is not UTF-8 is written: as its lone surrogate (lossless), or as U+FFFD.
enum class Bytes { Lossless, Replaced };

void append_string(std::string& out, const std::string& s, Bytes bytes) {
  out += '"';
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0) {  // not UTF-8: the byte as a lone surrogate (surrogateescape), or U+FFFD
      std::snprintf(buf, sizeof buf, "\\udc%02x", c);
      out += bytes == Bytes::Lossless ? buf : "\\ufffd";
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

/// `j` as JSON text; `indent` > 0: one member a line, as nlohmann's dump(indent) lays it out.
void append(std::string& out, const json& j, Bytes bytes, int indent = 0, int depth = 0) {
  const auto newline = [&](int d) {
    if (indent > 0) out += '\n' + std::string(static_cast<size_t>(indent * d), ' ');
  };
  if (j.is_string()) {
    append_string(out, j.get_ref<const std::string&>(), bytes);
  } else if ((j.is_object() || j.is_array()) && j.empty()) {
    out += j.is_object() ? "{}" : "[]";
  } else if (j.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ',';
      first = false;
      newline(depth + 1);
      append_string(out, it.key(), bytes);
      out += indent > 0 ? ": " : ":";
      append(out, it.value(), bytes, indent, depth + 1);
    }
    newline(depth);
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t k = 0; k < j.size(); ++k) {
      if (k) out += ',';
      newline(depth + 1);
      append(out, j[k], bytes, indent, depth + 1);
    }
    newline(depth);
    out += ']';
  } else {
    out += j.dump();  // numbers, booleans, null: nlohmann's own text
  }
}

/// Text for a person (a message, a reason, a note): a byte that is not UTF-8 (a Latin-1 file
/// name inside a message) as the four characters \xNN, so the string always prints; a
/// lone surrogate would make Python's print() raise. Names keep their bytes instead.
std::string words(const std::string& s) {
  std::string out;
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

json words(const std::vector<std::string>& v) {
  json out = json::array();
  for (const auto& s : v) out.push_back(words(s));
  return out;
}

std::string text(const json& j) {
  std::string out;
  append(out, j, Bytes::Lossless);
  return out;
}

json stages(const StageTimings& t) {
  return {{"read_ms", t.read_ms},         {"preprocess_ms", t.preprocess_ms},
          {"infer_ms", t.infer_ms},       {"encoder_ms", t.encoder_ms},
          {"decoders_ms", t.decoders_ms}, {"refiner_ms", t.refiner_ms},
          {"postprocess_ms", t.postprocess_ms}, {"write_ms", t.write_ms}};
}

json plan(const TunePlan& p) {
  json decisions = json::object();
  for (const auto& d : p.decisions) {
    json times = json::object();
    for (const auto& [name, ms] : d.times_ms) times[name] = ms;
    decisions[to_string(d.option)] = {{"value", to_string(d.value)}, {"source", to_string(d.source)},
                                      {"why", words(d.why)}, {"times_ms", std::move(times)}};
  }
  return {{"origin", to_string(p.origin)}, {"trial_ms", p.trial_ms_this_run()}, {"cache", p.cache_path},
          {"decisions", std::move(decisions)}};
}

json engine_info(const EngineInfo& i) {
  return {{"device", i.device},       {"arch", i.arch},
          {"checkpoint", i.checkpoint}, {"profile", i.profile},
          {"compile_mode", i.compile_mode_effective},
          {"precision", i.precision}, {"attention", i.attention},
          {"refiner", i.refiner},     {"img_size", i.img_size},
          {"backbone_size", i.backbone_size},
          {"parameters", i.parameters}, {"notes", words(i.notes)},
          {"plan", plan(i.tune)}};
}

/// A table value as JSON: "5" -> 5, "true" -> true (the table prints numbers in the classic
/// locale, and the JSON parser reads them in it); anything else stays text.
json setting(const std::string& value) {
  auto v = json::parse(value, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() || !v.is_primitive() ? json(value) : v;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out;
  append_string(out, s, Bytes::Lossless);
  return out;
}

std::string stage_timings_json(const StageTimings& t) { return text(stages(t)); }

std::string tune_plan_json(const TunePlan& p) { return text(plan(p)); }

std::string engine_info_json(const EngineInfo& i) { return text(engine_info(i)); }

std::string event_json(const PipelineEvent& e) {
  json j{{"event", to_string(e.kind)}};
  for (const auto& [name, value] : {std::pair{"clip", &e.clip}, {"frame", &e.frame}, {"file", &e.file},
                                    {"message", &e.message}, {"checkpoint", &e.checkpoint},
                                    {"screen", &e.screen}})
    if (!value->empty()) j[name] = value == &e.message ? words(*value) : *value;
  j["done"] = e.frames_done;
  j["total"] = e.frames_total;
  if (e.kind == PipelineEvent::Kind::FrameDone) j["timings"] = stages(e.timings);
  if (e.kind == PipelineEvent::Kind::JobStarted)
    j["plan"] = {{"origin", to_string(e.plan_origin)}, {"trial_ms", e.trial_ms}};
  return text(j);
}

std::string summary_json(const JobSummary& s) {
  json models = json::array();
  for (const auto& m : s.clip_models)
    models.push_back({{"clip", m.clip}, {"checkpoint", m.checkpoint}, {"screen", m.screen}, {"swapped", m.swapped}});
  const json j{{"event", "summary"},
               {"clips", s.clips},
               {"frames_total", s.frames_total},
               {"frames_done", s.frames_done},
               {"frames_skipped", s.frames_skipped},
               {"frames_failed", s.frames_failed},
               {"videos_written", s.videos_written},
               {"videos_failed", s.videos_failed},
               {"failures", words(s.failures)},
               {"interrupted", s.interrupted},
               {"wall_ms", s.wall_ms},
               {"infer_wait_ms", s.infer_wait_ms},
               {"device", s.engine.device},
               {"checkpoint", s.engine.checkpoint},
               {"stage_sums", stages(s.stage_sums)},
               {"plan", plan(s.engine.tune)},
               {"engine", engine_info(s.engine)},
               {"clip_models", std::move(models)}};
  return text(j);
}

std::string error_event_json(const std::string& kind, int exit_code, const std::string& message) {
  return text({{"event", "error"}, {"kind", kind}, {"exit_code", exit_code}, {"message", words(message)}});
}

std::string run_json(const RunRecord& r) {
  json times = json::array(), failures = json::array();
  for (const auto& [frame, t] : r.frame_times) {
    json one = {{"frame", frame}};
    one.update(stages(t));
    times.push_back(std::move(one));
  }
  for (const auto& [frame, message] : r.failures) failures.push_back({{"frame", frame}, {"message", message}});
  const EngineInfo& e = r.engine;
  json j = {
      {"run_json", 2},
      {"engine_version", r.engine_version},
      {"finished", r.finished},
      {"clip", r.clip},
      {"clip_folder", r.clip_folder},
      {"profile", e.profile},
      {"checkpoint", e.checkpoint},
      {"device", e.device},
      {"precision", e.precision},
      {"img_size", e.img_size},
      {"backbone_size", e.backbone_size},
      {"plan", plan(e.tune)},
      {"screen", r.screen},
      {"swapped", r.swapped},
      {"hints", r.hints},
      {"mattes", {{"garbage", r.garbage_matte.empty() ? json(nullptr) : json(r.garbage_matte)},
                  {"holdout", r.holdout_matte.empty() ? json(nullptr) : json(r.holdout_matte)}}},
      {"input_colorspace", r.input_colorspace},
      {"input_colorspace_why", r.input_colorspace_why},
      {"ocio_config", r.ocio_config},
  };
  for (const auto& [key, value] : r.settings) j[key] = setting(value);
  j.update(json{{"outputs", r.outputs},
                {"comp_format", r.comp_format},
                {"frames_selected", r.frames_selected},
                {"frames_done", times.size()},
                {"frames_failed", failures.size()},
                {"interrupted", r.interrupted},
                {"job_wall_ms", r.job_wall_ms},
                {"frame_times", std::move(times)},
                {"failures", std::move(failures)}});
  // One key a line, for a person reading or diffing it; a name that is not UTF-8 as U+FFFD.
  std::string out;
  append(out, j, Bytes::Replaced, /*indent=*/1);
  return out + "\n";
}

CORRIDORKEY_NAMESPACE_END
