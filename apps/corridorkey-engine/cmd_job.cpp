#include "commands.h"
#include "option_args.h"
#include "event_stream.h"
#include "export_file.h"
#include "stop_signals.h"

#include <corridorkey/check.h>
#include <corridorkey/job.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>
#include <corridorkey/report_json.h>
#include <corridorkey/tune.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace corridorkey::cli {
namespace {

std::atomic<bool> g_job_cancel{false};

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("corridorkey-engine") : p.string();
}

/// "I/N" -> (I, N), 1 <= I <= N.
std::pair<int, int> parse_chunk(const std::string& s) {
  int i = 0, n = 0;
  char extra = 0;
  if (std::sscanf(s.c_str(), "%d/%d%c", &i, &n, &extra) != 2 || n < 1 || i < 1 || i > n)
    throw ConfigError("--chunk: invalid value '" + s + "' (expected I/N with 1 <= I <= N, e.g. 3/10)");
  return {i, n};
}

void print_chunks(const std::vector<Chunk>& chunks, const JobSpec& job) {
  for (const auto& c : chunks) {
    std::printf("chunk %d/%d:", c.index, c.count);
    for (const auto& p : c.parts) {
      const auto out = job.inference.output_root.empty()
                           ? (std::filesystem::path(p.clip_path) / "Output").string()
                           : (std::filesystem::path(job.inference.output_root) / p.clip_name).string();
      std::printf(" %s frames %d-%d -> %s", p.clip_name.c_str(), p.first, p.last, out.c_str());
    }
    std::printf("\n");
  }
}


/// Before the precision is planned (which may time and cache the plan): whether a node like
/// this one would find its plan, and if not, which part of the key missed.
void print_plan_cache(const JobSpec& j) {
  if (j.options.model.tune == TuneMode::Off || j.options.model.device != "cpu") {
    std::printf("plan cache: not used (%s)\n", j.options.model.tune == TuneMode::Off
                                                   ? "tune off"
                                                   : ("device " + j.options.model.device + ": plans are made on CPUs").c_str());
  } else {
    try {
      const auto st = plan_cache_status(j.options.model, j.options.engine);
      if (st.cached)
        std::printf("plan cache: %s has the plan for this machine and configuration: no trials\n",
                    st.cache.c_str());
      else if (st.nearest.empty())
        std::printf("plan cache: %s holds no plan: the first task on each kind of node times one "
                    "(`corridorkey-engine tune` with the job's options caches it ahead)\n",
                    st.cache.empty() ? "(none)" : st.cache.c_str());
      else {
        std::printf("plan cache: %s has no plan for this configuration; the nearest differs in:\n",
                    st.cache.c_str());
        // The cached side of each part is a file's text (`tune --import`).
        for (const auto& d : st.differs) std::printf("  %s\n", printable_text(d).c_str());
      }
    } catch (const Error& e) {
      std::printf("plan cache: not read (%s)\n", e.what());
    }
  }
}

/// The precision every chunk will run, and how it was decided.
void print_planned_precision(const JobSpec& j) {
  try {
    const auto [p, how] = planned_precision(j.options.model, j.options.engine);
    if (p == Precision::Auto)
      std::printf("precision: not pinned (%s)\n", how.c_str());
    else if (j.options.model.model_precision == Precision::Auto)
      std::printf("precision: %s (%s); `job export` pins it for every chunk\n", to_string(p), how.c_str());
    else
      std::printf("precision: %s (%s)\n", to_string(p), how.c_str());
  } catch (const Error& e) {
    std::printf("precision: not planned (%s): each chunk picks its own; set model_precision "
                "in the job to pin it\n", e.what());
  }
}

/// The chunk `job run` keys: the whole job, or chunk I of N (--chunk), of every clip or one
/// (--clip), of the frames asked for (--frames).
Chunk chunk_to_run(JobSpec& j, const std::string& file, const std::string& chunk, const std::string& clip,
                   const std::string& frames) {
  if (!frames.empty())
    for (auto& c : j.clips) c.frames = frames;
  auto jf = job_frames(j);
  for (const auto& w : jf.skipped) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (!clip.empty()) {
    for (size_t i = 0; i < jf.clip_names.size(); ++i)
      if (jf.clip_names[i] != clip) jf.frames[i].clear();
    CK_CHECK(jf.total() > 0 || std::find(jf.clip_names.begin(), jf.clip_names.end(), clip) != jf.clip_names.end(),
             ConfigError, "--clip: no clip named '", clip, "' in ", file);
  }
  Chunk todo;
  if (chunk.empty()) {
    todo = plan_chunks(jf, 1, j.chunk_size).front();
  } else {
    const auto [i, n] = parse_chunk(chunk);
    const auto all = plan_chunks(jf, n, j.chunk_size);
    // Fewer frames than N gives fewer chunks: running chunk I of those would key other
    // frames than the scheduler's task I/N expects (1/3 of a 2-frame job was run as 1/2).
    CK_CHECK(n == static_cast<int>(all.size()), ConfigError, "--chunk ", chunk, ": the job has only ",
             all.size(), " frames, so only ", all.size(), " chunks");
    todo = all[static_cast<size_t>(i - 1)];
  }
  return todo;
}

/// One event of a chunk: an NDJSON line, or a line on stderr for what a wrangler reads.
void print_chunk_event(const PipelineEvent& e, bool json, bool quiet, EventStream& events) {
  if (json) {
    events.line(event_json(e));  // the fields of `inference --json`
  } else if (e.kind == PipelineEvent::Kind::ClipStarted && !quiet) {
    std::fprintf(stderr, "clip %s: %s\n", e.clip.c_str(), e.message.c_str());
  } else if (e.kind == PipelineEvent::Kind::FrameFailed || e.kind == PipelineEvent::Kind::Warning ||
             e.kind == PipelineEvent::Kind::VideoFailed || e.kind == PipelineEvent::Kind::VideoWritten) {
    std::fprintf(stderr, "%s: %s\n", to_string(e.kind), e.message.c_str());
  }
}

void print_chunk_summary(const JobSpec& j, const Chunk& todo, const JobSummary& s) {
  std::fprintf(stderr, "job %s chunk %d/%d: %d keyed, %d already done, %d failed in %.1f s\n", j.name.c_str(),
               todo.index, todo.count, s.frames_done, s.frames_skipped, s.frames_failed, s.wall_ms / 1000);
  std::fprintf(stderr, "%s\n", plan_text(s.engine.tune).c_str());
  if (s.interrupted)
    std::fprintf(stderr, "interrupted: the frames written are whole; running the chunk again keys the rest\n");
  for (const auto& m : s.clip_models)
    std::fprintf(stderr, "clip %s: %s backing, keyed with %s%s\n", m.clip.c_str(), m.screen.c_str(),
                 m.checkpoint.c_str(), m.swapped ? " (green and blue swapped)" : "");
}

void add_job_validate(CLI::App* job, const std::shared_ptr<std::string>& file, int& exit_code) {
  auto* validate = job->add_subcommand("validate", "check a job file (errors name the key and line)");
  non_empty_path(validate->add_option("job", *file, "job YAML"))->required();
  validate->callback([file, &exit_code] {
    const auto j = load_job(*file);
    const auto frames = job_frames(j);
    for (const auto& w : frames.skipped) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::printf("%s: ok: job '%s', %zu clip(s), %d frames, %zu chunk(s) of <= %d frames\n",
                file->c_str(), j.name.c_str(), frames.clip_names.size(), frames.total(),
                plan_chunks(frames, 0, j.chunk_size).size(), j.chunk_size);
    exit_code = kOk;
  });
}

void add_job_plan(CLI::App* job, const std::shared_ptr<std::string>& file, int& exit_code) {
  auto* plan = job->add_subcommand("plan", "print the chunks: clip, frame range, output folder");
  auto chunks_n = std::make_shared<int>(0);
  non_empty_path(plan->add_option("job", *file, "job YAML"))->required();
  plan->add_option("--chunks", *chunks_n, "split into N chunks (default: by chunk_size)");
  plan->callback([file, chunks_n, &exit_code] {
    const auto j = load_job(*file);
    const auto jf = job_frames(j);
    for (const auto& w : jf.skipped) std::fprintf(stderr, "warning: %s\n", w.c_str());
    print_chunks(plan_chunks(jf, *chunks_n, j.chunk_size), j);
    print_plan_cache(j);
    print_planned_precision(j);
    exit_code = kOk;
  });
}

void add_job_run(CLI::App* job, const std::shared_ptr<std::string>& file, int& exit_code) {
  auto* run = job->add_subcommand("run", "run the whole job, one chunk (--chunk I/N) or a frame range");
  auto chunk = std::make_shared<std::string>();
  auto clip = std::make_shared<std::string>();
  auto frames = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  non_empty_path(run->add_option("job", *file, "job YAML"))->required();
  run->add_option("--chunk", *chunk, "I/N: the I-th of N chunks (1-based)");
  run->add_option("--clip", *clip, "only this clip (chunks then count that clip's frames)");
  run->add_option("--frames", *frames, "A-B[,C-D]: these frames of every selected clip");
  run->add_flag("--json", *json, "NDJSON events on stdout");
  run->add_flag("--quiet", *quiet, "no per-chunk summary");
  auto precision = std::make_shared<std::string>();
  run->add_option("--precision", *precision,
                  "model_precision for this chunk (job export pins the planning machine's, so "
                  "that chunks on different node types give the same matte)");
  auto tune_cache = std::make_shared<std::string>();
  non_empty_path(run->add_option("--tune-cache", *tune_cache,
                                 "the plan cache for this run (a folder on the shared filesystem, or a .json file); "
                                 "job export passes the job's tune_cache"));
  run->callback([=, &exit_code] {
    auto j = load_job(*file);
    // tune_cache is a run-level field, not a profile key: a profile-scope set refused it, and
    // every chunk `job export` wrote with --tune-cache failed.
    if (!tune_cache->empty()) set_option(j.options, "tune_cache", *tune_cache, "--tune-cache");
    if (!precision->empty()) set_option(j.options, "model_precision", *precision, "--precision", OptionScope::Profile);
    else if (!chunk->empty() && j.options.model.model_precision == Precision::Auto && j.options.model.tune != TuneMode::Off)
      std::fprintf(stderr, "warning: %s: model_precision auto in a chunk: this node's measured plan "
                           "picks it, and chunks on other node types may pick another (the matte "
                           "then flickers between chunks); `job export` pins one, or set "
                           "model_precision in the job\n", file->c_str());
    const Chunk todo = chunk_to_run(j, *file, *chunk, *clip, *frames);
    j.inference.cancel = &g_job_cancel;  // polled once frames are keyed (stop_signals.h)
    EventStream events;  // lossless names; a closed stdout stops the events, not the chunk
    const auto s = run_chunk(j, todo, [&](const PipelineEvent& e) {
      if (e.kind == PipelineEvent::Kind::JobStarted) cancel_on_signal(&g_job_cancel);
      print_chunk_event(e, *json, *quiet, events);
    });
    default_stop_signals();
    if (*json) events.line(summary_json(s));
    else if (!*quiet) print_chunk_summary(j, todo, s);
    exit_code = s.interrupted ? kInterrupted
                : s.frames_failed == 0 && s.videos_failed == 0 ? kOk
                : j.inference.on_error == OnError::Skip ? kPartial : kInput;
  });
}

void add_job_export(CLI::App* job, const std::shared_ptr<std::string>& file, int& exit_code) {
  auto* exp = job->add_subcommand("export", "write a scheduler template (Open Job Description or Slurm)");
  auto to = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto log_dir = std::make_shared<std::string>();
  non_empty_path(exp->add_option("job", *file, "job YAML"))->required();
  exp->add_option("--to", *to, "openjd | slurm")->required();
  non_empty_path(exp->add_option("-o,--output", *out, "file to write (default: stdout)"));
  non_empty_path(exp->add_option("--log-dir", *log_dir, "slurm: folder for the tasks' logs (default: the job's folder)"));
  exp->callback([=, &exit_code] {
    auto j = load_job(*file);
    const auto jf = job_frames(j);
    // A submission host may not see the checkpoint the nodes will read: then the export
    // goes on unpinned, saying so, rather than failing.
    try {
      if (j.options.model.model_precision == Precision::Auto)
        if (const auto p = planned_precision(j.options.model, j.options.engine).first; p != Precision::Auto)
          j.pinned_precision = to_string(p);
    } catch (const Error& e) {
      std::fprintf(stderr, "warning: %s: the precision cannot be planned here (%s); the chunks "
                           "pick their own, which may differ between node types: set "
                           "model_precision in the job to pin it\n", file->c_str(), e.what());
    }
    std::string text;
    if (*to == "openjd") {
      text = export_openjd(j, jf, self_path());
    } else if (*to == "slurm") {
      const auto logs = log_dir->empty() ? std::filesystem::path(j.file).parent_path().string() : *log_dir;
      text = export_slurm(j, jf, self_path(), std::filesystem::absolute(logs).string());
    } else {
      throw ConfigError("--to: invalid value '" + *to + "' (expected openjd or slurm)");
    }
    write_export(*out, text, /*executable=*/*to == "slurm", j.file);
    exit_code = kOk;
  });
}

}  // namespace

void add_job(CLI::App& app, int& exit_code) {
  auto* job = app.add_subcommand("job", "Render-farm jobs: validate, plan, run chunks, export to schedulers");
  job->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  add_job_validate(job, file, exit_code);
  add_job_plan(job, file, exit_code);
  add_job_run(job, file, exit_code);
  add_job_export(job, file, exit_code);
}

}  // namespace corridorkey::cli
