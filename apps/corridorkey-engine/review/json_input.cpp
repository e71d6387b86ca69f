#include "review/json_input.h"

namespace corridorkey::review {

using json = nlohmann::json;

json parse_json_limited(const std::string& text, std::string& error) {
  bool deep = false;
  // The callback sees each value's depth; a value that opens deeper is discarded (the parser
  // goes on without recursion) and the whole input refused.
  const json::parser_callback_t limit = [&deep](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      deep = true;
      return false;
    }
    return true;
  };
  json j = json::parse(text, limit, /*allow_exceptions=*/false);
  if (deep) {
    error = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return json::value_t::discarded;
  }
  if (j.is_discarded()) error = "not valid JSON";
  return j;
}

namespace {

/// Copies `key` of `from` when `ok` says its type is the expected one.
template <typename Ok>
void copy_if(const json& from, json& to, const char* key, Ok ok) {
  const auto it = from.find(key);
  if (it != from.end() && ok(*it)) to[key] = *it;
}

bool is_text(const json& v) { return v.is_string(); }
bool is_number(const json& v) { return v.is_number(); }
bool is_integer(const json& v) { return v.is_number_integer(); }
bool is_bool(const json& v) { return v.is_boolean(); }

/// A list of flat objects, each with the named fields of the named types only.
json flat_list(const json& v, const std::vector<std::pair<const char*, bool (*)(const json&)>>& fields) {
  json out = json::array();
  if (!v.is_array()) return out;
  for (const auto& e : v) {
    if (!e.is_object()) continue;
    json o = json::object();
    for (const auto& [k, ok] : fields) copy_if(e, o, k, ok);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

json run_summary(const json& run) {
  if (!run.is_object()) return nullptr;
  json s = json::object();
  for (const char* k : {"error", "engine_version", "finished", "clip", "clip_folder", "profile", "checkpoint",
                        "device", "precision", "screen", "hints", "input_colorspace", "input_colorspace_why",
                        "ocio_config", "comp_format"})
    copy_if(run, s, k, is_text);
  // Counts as integers: a double past int's range, read as an int, would be undefined.
  for (const char* k : {"run_json", "img_size", "backbone_size", "despeckle_size", "frames_selected", "frames_done",
                        "frames_failed"})
    copy_if(run, s, k, is_integer);
  for (const char* k : {"despill", "refiner_scale", "job_wall_ms"}) copy_if(run, s, k, is_number);
  for (const char* k : {"swapped", "despeckle", "interrupted"}) copy_if(run, s, k, is_bool);
  if (run.contains("plan") && run["plan"].is_object()) {
    json plan = json::object();
    copy_if(run["plan"], plan, "origin", is_text);
    s["plan"] = std::move(plan);
  }
  if (run.contains("outputs") && run["outputs"].is_array()) {
    json o = json::array();
    for (const auto& v : run["outputs"])
      if (v.is_string()) o.push_back(v);
    s["outputs"] = std::move(o);
  }
  if (run.contains("frame_times"))
    s["frame_times"] = flat_list(run["frame_times"], {{"frame", is_text}, {"infer_ms", is_number}});
  if (run.contains("failures"))
    s["failures"] = flat_list(run["failures"], {{"frame", is_text}, {"message", is_text}});
  return s;
}

}  // namespace corridorkey::review
