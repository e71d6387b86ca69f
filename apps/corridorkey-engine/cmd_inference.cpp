#include "commands.h"
#include "event_stream.h"
#include "option_args.h"
#include "stop_signals.h"

#include <corridorkey/errors.h>
#include <corridorkey/pipeline.h>

#include <nlohmann/json.hpp>

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
    try {  // a run that fails outright still ends the --json stream with an event
    const auto eo = args->options();
    // A switch given a value (`--native-attention false`) leaves the value as a clip path:
    // say so as a usage error, before anything loads, not as a missing folder.
    for (const auto& p : *paths) {
      std::string w = p;
      std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return std::tolower(c); });
      std::error_code ec;
      if ((w == "true" || w == "false" || w == "auto" || w == "on" || w == "off" || w == "yes" || w == "no") &&
          !std::filesystem::exists(p, ec))
        throw ConfigError("'" + p + "' is not a clip folder: a switch such as --native-attention or "
                          "--flash-attention takes no value (--no-native-attention turns it off; "
                          "options that take true/false/auto say VALUE in --help)");
    }
    auto job = std::make_shared<InferenceOptions>(args->inference(*paths));
    job->cancel = &g_cancel;  // polled once frames are keyed; until then a signal ends the run

    const bool bar = !*json && !*quiet && isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    auto on_event = [&](const PipelineEvent& e) {
      // The models have loaded and the plan is made: from here a signal stops the run after
      // the frames in flight (stop_signals.h).
      if (e.kind == PipelineEvent::Kind::JobStarted) cancel_on_signal(&g_cancel);
      if (*json) {
        events.line(event_json(e));
        return;
      }
      if (e.kind == PipelineEvent::Kind::Warning || e.kind == PipelineEvent::Kind::FrameFailed ||
          e.kind == PipelineEvent::Kind::VideoFailed) {
        if (bar) std::fprintf(stderr, "\r\033[K");
        std::fprintf(stderr, "%s: %s\n", e.kind == PipelineEvent::Kind::Warning ? "warning" : "error",
                     e.message.c_str());
      }
      if (e.kind == PipelineEvent::Kind::ClipStarted && !*quiet) {  // what was chosen, terminal or not
        if (bar) std::fprintf(stderr, "\r\033[K");
        std::fprintf(stderr, "clip %s: %s\n", e.clip.c_str(), e.message.c_str());
      }
      if (e.kind == PipelineEvent::Kind::VideoWritten && !*quiet)
        std::fprintf(stderr, "wrote %s: %s\n", e.file.c_str(), e.message.c_str());
      if (bar && (e.kind == PipelineEvent::Kind::FrameDone || e.kind == PipelineEvent::Kind::FrameFailed)) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double fps = e.frames_done / std::max(s, 1e-9);
        const double eta = fps > 0 ? (e.frames_total - e.frames_done) / fps : 0;
        std::fprintf(stderr, "\r\033[K%s %d/%d frames  %.2f fps  ETA %s", e.clip.c_str(),
                     e.frames_done, e.frames_total, fps, hms(eta).c_str());
      }
    };
    const auto sum = run_inference(eo, *job, on_event);
    default_stop_signals();
    if (bar) std::fprintf(stderr, "\n");
    if (*json) {
      nlohmann::json j = summary_json(sum);
      events.line(j);
    } else if (!*quiet) {
      const double n = std::max(1, sum.frames_done);
      const auto& t = sum.stage_sums;
      std::fprintf(stderr,
                   "keyed %d/%d frames (%d skipped, %d failed) of %d clip(s) in %.1f s on %s (%.2f fps)\n"
                   "per frame: read %.0f ms, preprocess %.0f ms, infer %.0f ms, postprocess %.0f ms, "
                   "write %.0f ms (stages overlap); inference idle %.0f%% of the wall time (waiting on readers or writers)\n",
                   sum.frames_done, sum.frames_total, sum.frames_skipped, sum.frames_failed, sum.clips,
                   sum.wall_ms / 1000, sum.engine.device.c_str(),
                   sum.frames_done / std::max(sum.wall_ms / 1000, 1e-9), t.read_ms / n,
                   t.preprocess_ms / n, t.infer_ms / n, t.postprocess_ms / n, t.write_ms / n,
                   100.0 * sum.infer_wait_ms / std::max(sum.wall_ms, 1e-9));
      std::fprintf(stderr, "%s\n", plan_text(sum.engine.tune).c_str());
      for (const auto& m : sum.clip_models)
        std::fprintf(stderr, "clip %s: %s backing, keyed with %s%s\n", m.clip.c_str(),
                     m.screen.c_str(), m.checkpoint.c_str(),
                     m.swapped ? " (green and blue swapped)" : "");
      for (const auto& f : sum.failures) std::fprintf(stderr, "failed: %s\n", f.c_str());
      if (sum.interrupted)  // exit 130: said in words too, with what is left to do
        std::fprintf(stderr,
                     "interrupted: %d of %d frames not keyed; the frames written are whole, and "
                     "--skip-existing resumes after them\n",
                     std::max(0, sum.frames_total - sum.frames_done - sum.frames_skipped - sum.frames_failed),
                     sum.frames_total);
      if (!job->output_root.empty())
        std::fprintf(stderr, "outputs under %s/<clip>/\n", job->output_root.c_str());
      else
        for (const auto& p : job->paths) {
          std::error_code ec;  // a clip folder itself, or a folder of clips
          const bool one = std::filesystem::is_directory(std::filesystem::path(p) / "Input", ec);
          std::fprintf(stderr, one ? "outputs in %s/Output/\n" : "outputs under %s/**/Output/\n", p.c_str());
        }
    }
    exit_code = sum.interrupted          ? kInterrupted
                : sum.frames_failed == 0 && sum.videos_failed == 0 ? kOk
                : job->on_error == OnError::Skip ? kPartial
                                                 : kInput;
    } catch (const std::exception& e) {
      if (*json) events.line(error_event(e));
      throw;  // main() prints it and picks the exit code
    }
  });
}

}  // namespace corridorkey::cli
