// report_json.h through the shared library, as a host sees it: names keep their bytes,
// messages print, C1 controls are escaped, run.json is plain UTF-8, the plan's trial time is
// this run's, and the summary carries what the CLI's and Python's each had.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <corridorkey/report_json.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>

using namespace corridorkey;
using json = nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::set<std::string> keys(const json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

const std::set<std::string> kStages = {"read_ms", "preprocess_ms", "infer_ms", "encoder_ms",
                                       "decoders_ms", "refiner_ms", "postprocess_ms", "write_ms"};

}  // namespace

TEST_CASE("report json: a name keeps its bytes, a message prints, controls are escaped", "[unit]") {
  CHECK(json_string("caf\xe9") == "\"caf\\udce9\"");             // Latin-1: surrogateescape
  CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");        // UTF-8 as it is
  CHECK(json_string("a\xc2\x85" "b\x7f" "c\x1b") == "\"a\\u0085b\\u007fc\\u001b\"");  // C1, DEL, ESC
  CHECK(json_string("\xed\xa0\x80") == "\"\\udced\\udca0\\udc80\"");  // an encoded surrogate is no UTF-8

  PipelineEvent e;
  e.kind = PipelineEvent::Kind::FrameFailed;
  e.file = "/plates/\xe9" "cran.png";
  e.message = "/plates/\xe9" "cran.png: truncated";
  const std::string t = event_json(e);
  CHECK(has(t, "\"file\":\"/plates/\\udce9cran.png\""));
  CHECK(has(t, "\"message\":\"/plates/\\\\xe9cran.png: truncated\""));  // the characters \xe9
  CHECK_FALSE(has(t, "\"clip\""));  // empty fields are left out
  CHECK_FALSE(has(t, "\"timings\""));
}

TEST_CASE("report json: events, stage times and the plan", "[unit]") {
  PipelineEvent done;
  done.kind = PipelineEvent::Kind::FrameDone;
  done.clip = "sh010";
  done.frame = "f01";
  done.frames_done = 1;
  done.frames_total = 2;
  done.timings.infer_ms = 12.5;
  const json d = json::parse(event_json(done));
  CHECK(d["event"] == "frame_done");
  CHECK(keys(d) == std::set<std::string>{"event", "clip", "frame", "done", "total", "timings"});
  CHECK(keys(d["timings"]) == kStages);
  CHECK(d["timings"]["infer_ms"] == 12.5);
  CHECK(keys(json::parse(stage_timings_json(StageTimings{}))) == kStages);

  TunePlan p;
  p.origin = PlanOrigin::Cache;
  p.trial_ms = 9000;  // what the trials cost the run that made the plan
  p.decisions.push_back({TuneOption::ModelPrecision, TuneChoice::Float32, DecisionSource::Plan, "fastest",
                         {{"float32", 100.0}, {"bfloat16", 180.0}}});
  CHECK(p.trial_ms_this_run() == 0);
  json plan = json::parse(tune_plan_json(p));
  CHECK(plan["origin"] == "cache");
  CHECK(plan["trial_ms"] == 0);
  CHECK(plan["decisions"]["model_precision"]["value"] == "float32");
  CHECK(plan["decisions"]["model_precision"]["times_ms"]["bfloat16"] == 180.0);
  p.origin = PlanOrigin::Trials;
  CHECK(json::parse(tune_plan_json(p))["trial_ms"] == 9000);

  PipelineEvent start;
  start.kind = PipelineEvent::Kind::JobStarted;
  start.plan_origin = PlanOrigin::Trials;
  start.trial_ms = 42;
  const json s = json::parse(event_json(start));
  CHECK(s["plan"] == json{{"origin", "trials"}, {"trial_ms", 42}});
}

TEST_CASE("report json: the summary holds what the CLI's and Python's each had", "[unit]") {
  JobSummary sum;
  sum.frames_done = 3;
  sum.failures = {"f\xe9.png: truncated"};
  sum.engine.device = "cpu";
  sum.engine.checkpoint = "/m/a.safetensors";
  sum.engine.precision = "float32";
  sum.engine.tune.cache_path = "/c/tune.json";
  sum.clip_models.push_back({"sh010", "/m/a.safetensors", "green", false});
  const std::string text = summary_json(sum);
  CHECK(has(text, "\"failures\":[\"f\\\\xe9.png: truncated\"]"));
  const json j = json::parse(text);
  for (const char* k : {"event", "clips", "frames_total", "frames_done", "frames_skipped", "frames_failed",
                        "videos_written", "videos_failed", "failures", "interrupted", "wall_ms", "infer_wait_ms",
                        "device", "checkpoint", "stage_sums", "plan", "engine", "clip_models"})
    CHECK(j.contains(k));
  CHECK(j["event"] == "summary");
  CHECK(keys(j["stage_sums"]) == kStages);
  CHECK(j["plan"]["cache"] == "/c/tune.json");
  CHECK(j["engine"]["precision"] == "float32");
  CHECK(j["engine"]["plan"] == j["plan"]);
  CHECK(json::parse(engine_info_json(sum.engine)) == j["engine"]);
  CHECK(j["clip_models"][0] == json{{"clip", "sh010"}, {"checkpoint", "/m/a.safetensors"}, {"screen", "green"},
                                    {"swapped", false}});
}

TEST_CASE("report json: run.json is plain UTF-8, one key a line, settings typed", "[unit]") {
  RunRecord r;
  r.clip = "caf\xe9";
  r.engine.tune.decisions.push_back({TuneOption::TiledRefiner, TuneChoice::True, DecisionSource::Plan,
                                     "a reason with \xc2\x9b" "31m in it", {}});
  r.settings = {{"despill", "5"}, {"despeckle", "true"}, {"refiner_scale", "0.5"}, {"note", "x y"}};
  r.frame_times.push_back({"f01", StageTimings{}});
  r.failures.push_back({"f02", "cut short"});
  const std::string text = run_json(r);
  CHECK(has(text, "\n \"clip\": \"caf\\ufffd\",\n"));
  CHECK_FALSE(has(text, "\xc2\x9b"));  // C1 CSI escaped, not raw
  const json j = json::parse(text);
  CHECK(j["run_json"] == 2);
  CHECK(j["despill"] == 5);
  CHECK(j["despeckle"] == true);
  CHECK(j["refiner_scale"] == 0.5);
  CHECK(j["note"] == "x y");
  CHECK(j["frames_done"] == 1);
  CHECK(j["frames_failed"] == 1);
  std::set<std::string> want = kStages;
  want.insert("frame");
  CHECK(keys(j["frame_times"][0]) == want);
  CHECK(j["plan"]["decisions"]["tiled_refiner"]["value"] == "true");
}
