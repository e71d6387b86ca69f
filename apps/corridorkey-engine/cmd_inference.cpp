#include "commands.h"
#include "event_stream.h"
#include "option_args.h"
#include "stop_signals.h"

#include <corridorkey/errors.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/report_json.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace corridorkey::cli {
namespace {

std::atomic<bool> g_cancel{false};

std::string hms(double s) {
  const int t = static_cast<int>(s + 0.5);
  char b[32];
  std::snprintf(b, sizeof b, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  return b;
}

/// A switch given a value (`--native-attention false`) leaves the value as a clip path: say
/// so as a usage error, before anything loads, not as a missing folder.
void refuse_switch_values_as_paths(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    std::string w = p;
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return std::tolower(c); });
    std::error_code ec;
    if ((w == "true" || w == "false" || w == "auto" || w == "on" || w == "off" || w == "yes" || w == "no") &&
        !std::filesystem::exists(p, ec))
      throw ConfigError("'" + p + "' is not a clip folder: a switch such as --native-attention or "
                        "--flash-attention takes no value (--no-native-attention turns it off; "
                        "options that take true/false/auto say VALUE in --help)");
  }
}

/// What the terminal shows while a run goes: warnings and errors, each clip's choices, the
/// videos written, and (on a terminal) a progress bar with the rate and the time left.
class Progress {
 public:
  Progress(bool bar, bool quiet) : bar_(bar), quiet_(quiet) {}

  void operator()(const PipelineEvent& e) const {
    using K = PipelineEvent::Kind;
    if (e.kind == K::Warning || e.kind == K::FrameFailed || e.kind == K::VideoFailed) {
      clear_bar();
      std::fprintf(stderr, "%s: %s\n", e.kind == K::Warning ? "warning" : "error", e.message.c_str());
    }
    if (e.kind == K::ClipStarted && !quiet_) {  // what was chosen, terminal or not
      clear_bar();
      std::fprintf(stderr, "clip %s: %s\n", e.clip.c_str(), e.message.c_str());
    }
    if (e.kind == K::VideoWritten && !quiet_) std::fprintf(stderr, "wrote %s: %s\n", e.file.c_str(), e.message.c_str());
    if (bar_ && (e.kind == K::FrameDone || e.kind == K::FrameFailed)) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      const double fps = e.frames_done / std::max(s, 1e-9);
      const double eta = fps > 0 ? (e.frames_total - e.frames_done) / fps : 0;
      std::fprintf(stderr, "\r\033[K%s %d/%d frames  %.2f fps  ETA %s", e.clip.c_str(), e.frames_done,
                   e.frames_total, fps, hms(eta).c_str());
    }
  }
  void end() const {
    if (bar_) std::fprintf(stderr, "\n");
  }

 private:
  void clear_bar() const {
    if (bar_) std::fprintf(stderr, "\r\033[K");
  }
  bool bar_, quiet_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

/// The summary in words, on stderr: frames, rates per stage, the plan, each clip's model,
/// failures, an interruption and where the outputs are.
void print_summary(const JobSummary& sum, const InferenceOptions& job) {
  const double n = std::max(1, sum.frames_done);
  const auto& t = sum.stage_sums;
  std::fprintf(stderr,
               "keyed %d/%d frames (%d skipped, %d failed) of %d clip(s) in %.1f s on %s (%.2f fps)\n"
               "per frame: read %.0f ms, preprocess %.0f ms, infer %.0f ms, postprocess %.0f ms, "
               "write %.0f ms (stages overlap); inference idle %.0f%% of the wall time (waiting on readers or writers)\n",
               sum.frames_done, sum.frames_total, sum.frames_skipped, sum.frames_failed, sum.clips,
               sum.wall_ms / 1000, sum.engine.device.c_str(), sum.frames_done / std::max(sum.wall_ms / 1000, 1e-9),
               t.read_ms / n, t.preprocess_ms / n, t.infer_ms / n, t.postprocess_ms / n, t.write_ms / n,
               100.0 * sum.infer_wait_ms / std::max(sum.wall_ms, 1e-9));
  std::fprintf(stderr, "%s\n", plan_text(sum.engine.tune).c_str());
  for (const auto& m : sum.clip_models)
    std::fprintf(stderr, "clip %s: %s backing, keyed with %s%s\n", m.clip.c_str(), m.screen.c_str(),
                 m.checkpoint.c_str(), m.swapped ? " (green and blue swapped)" : "");
  for (const auto& f : sum.failures) std::fprintf(stderr, "failed: %s\n", f.c_str());
  if (sum.interrupted)  // exit 130: said in words too, with what is left to do
    std::fprintf(stderr,
                 "interrupted: %d of %d frames not keyed; the frames written are whole, and "
                 "--skip-existing resumes after them\n",
                 std::max(0, sum.frames_total - sum.frames_done - sum.frames_skipped - sum.frames_failed),
                 sum.frames_total);
  if (!job.output_root.empty()) {
    std::fprintf(stderr, "outputs under %s/<clip>/\n", job.output_root.c_str());
    return;
  }
  for (const auto& p : job.paths) {
    std::error_code ec;  // a clip folder itself, or a folder of clips
    const bool one = std::filesystem::is_directory(std::filesystem::path(p) / "Input", ec);
    std::fprintf(stderr, one ? "outputs in %s/Output/\n" : "outputs under %s/**/Output/\n", p.c_str());
  }
}

int exit_code_of(const JobSummary& sum, const InferenceOptions& job) {
  if (sum.interrupted) return kInterrupted;
  if (sum.frames_failed == 0 && sum.videos_failed == 0) return kOk;
  return job.on_error == OnError::Skip ? kPartial : kInput;
}

/// One `inference` run: the options, the run with its events (NDJSON or the terminal's), the
/// summary; returns the exit code.
int run(const OptionArgs& args, const std::vector<std::string>& paths, bool json, bool quiet, EventStream& events) {
  const auto profile = args.options();
  refuse_switch_values_as_paths(paths);
  auto job = std::make_shared<InferenceOptions>(args.inference(paths));
  job->cancel = &g_cancel;  // polled once frames are keyed; until then a signal ends the run
  const Progress progress(!json && !quiet && isatty(STDERR_FILENO), quiet);
  auto on_event = [&](const PipelineEvent& e) {
    // The models have loaded and the plan is made: from here a signal stops the run after
    // the frames in flight (stop_signals.h).
    if (e.kind == PipelineEvent::Kind::JobStarted) cancel_on_signal(&g_cancel);
    if (json) events.line(event_json(e));
    else progress(e);
  };
  const auto sum = run_inference(profile, *job, on_event);
  default_stop_signals();
  progress.end();
  if (json) events.line(summary_json(sum));
  else if (!quiet) print_summary(sum, *job);
  return exit_code_of(sum, *job);
}

}  // namespace

void add_inference(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("inference", "Key clips end to end: FG, Matte, Processed, Comp");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto args = add_engine_flags(cmd, "optimized", /*run_fields=*/true);
  add_inference_flags(cmd, args);
  auto json = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  non_empty_path(cmd->add_option("paths", *paths, "clip folder(s) or folder(s) of clips"))->required();
  cmd->add_flag("--json", *json, "NDJSON events on stdout");
  cmd->add_flag("--quiet", *quiet, "no progress bar or summary");
  cmd->callback([=, &exit_code] {
    EventStream events;
    try {
      exit_code = run(*args, *paths, *json, *quiet, events);
    } catch (const std::exception& e) {
      if (*json) events.line(error_event(e));  // a run that fails outright still ends the stream
      throw;  // main() prints it and picks the exit code
    }
  });
}

}  // namespace corridorkey::cli
