// The measured plan: which precision, attention kernel and refiner tiling run fastest on
// this machine, decided by short timed trials at the real shapes, not by CPU flags.
//
// Flags say what a CPU can decode, not what runs fast: a CPU that lists avx512_bf16 without
// AMX ran every bf16 op slower than float32, and the native bf16 attention kernel that won
// on one CPU lost on that one (docs/performance.md, "bf16 flags without AMX"). So with
// `tune: auto` an engine times the candidates once per
// (engine version, CPU model, threads, LibTorch, device, architecture, size, layouts and
// fusions), keeps the fastest whose numeric bound the tests hold, and caches the decision
// with its times in a per-user file. An explicit profile, flag or job value always wins.
//
// Thread-safety: the plan is resolved once, when a Model loads (model.h); the per-user cache
// file is read and written under an flock, so processes and threads may tune at once.
// tune_cache_path / tune_cache_entries / planned_precision may be called from any thread.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/options.h>

#include <string>
#include <utility>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// What a decision is about. Spelled in tune.json and reports as "model_precision",
/// "native_attention", "native_attention.stage1" .. "native_attention.stage4",
/// "onednn_linear", "winograd_conv", "tiled_refiner" (to_string).
enum class TuneOption {
  ModelPrecision,
  NativeAttention,
  NativeAttentionStage1,
  NativeAttentionStage2,
  NativeAttentionStage3,
  NativeAttentionStage4,
  OnednnLinear,
  WinogradConv,
  TiledRefiner,
};
/// What runs: "false", "true", "float32", "bfloat16", "float16".
enum class TuneChoice { False, True, Float32, BFloat16, Float16 };
/// Who decided: Plan (timed trials chose it), Flag (an explicit value; the plan did not
/// decide), Rule (tune off: the flag-based rule), Only (one candidate applies here; `why`
/// says why). Spelled "plan", "flag", "rule", "only".
enum class DecisionSource { Plan, Flag, Rule, Only };
/// Where a plan's decisions come from: Trials (timed now), Cache (read back), Off (the flag
/// rules, tune off or no trials on this device), Memory (timed now, the cache not writable:
/// kept for this process). Spelled "trials", "cache", "off", "memory".
enum class PlanOrigin { Off, Trials, Cache, Memory };

CORRIDORKEY_API const char* to_string(TuneOption o);
CORRIDORKEY_API const char* to_string(TuneChoice c);
CORRIDORKEY_API const char* to_string(DecisionSource s);
CORRIDORKEY_API const char* to_string(PlanOrigin o);
/// The stage decision native_attention.stage<1-based stage>.
CORRIDORKEY_API TuneOption native_attention_stage(int stage);
/// A switch as a choice: True or False.
inline TuneChoice choice_of(bool on) { return on ? TuneChoice::True : TuneChoice::False; }

/// One option the plan decided (or was told).
struct TuneDecision {
  TuneOption option = TuneOption::ModelPrecision;
  TuneChoice value = TuneChoice::False;  // what runs
  DecisionSource source = DecisionSource::Rule;
  std::string why;
  /// Per candidate ("float32", "native", "sdpa", "whole", ...): the estimated milliseconds
  /// per frame it was chosen on.
  std::vector<std::pair<std::string, double>> times_ms;

  bool on() const { return value == TuneChoice::True; }
};

struct CORRIDORKEY_API TunePlan {
  TuneMode mode = TuneMode::Off;
  std::string key;         // the cache key: machine + configuration
  std::string cache_path;  // where it is (or would be) cached; empty: no cache folder
  PlanOrigin origin = PlanOrigin::Off;
  double trial_ms = 0;  // what the trials cost when the plan was timed (the cache keeps it)
  std::vector<TuneDecision> decisions;

  const TuneDecision* find(TuneOption option) const;
  /// What the trials cost in this process: trial_ms for a plan timed now (Trials, Memory);
  /// 0 for one read from the cache (timed by an earlier run) or the flag rules. Reports
  /// (report_json.h) give this one.
  double trial_ms_this_run() const {
    return origin == PlanOrigin::Trials || origin == PlanOrigin::Memory ? trial_ms : 0;
  }
  /// One line per decision: "model_precision float32 (plan: float32 N ms, bfloat16 N ms)";
  /// reasons and candidate names through printable_text (no line of it is a file's).
  std::string summary() const;
};

/// The default cache (ModelOptions::tune_cache overrides it): $CORRIDORKEY_TUNE_CACHE (a
/// folder, one file per plan with no lock, or a .json file: tune_cache.h), else
/// $XDG_CACHE_HOME/corridorkey-engine/tune.json, else ~/.cache/corridorkey-engine/tune.json; empty when neither variable is set
/// (no fixed name in a shared /tmp: plans then stay in the process's memory). The file is
/// replaced only when it is a regular, writable file in this engine's format (or missing):
/// a symbolic link, a read-only file or any other file there is left untouched, with one
/// warning. Its lock and temporary files are named .corridorkey-engine-tune.* in its folder.
CORRIDORKEY_API std::string tune_cache_path();

/// `s` fit for a terminal: every control character (C0, DEL, C1) and every byte that is not
/// UTF-8 written as \xNN. Plan keys and reasons come from files (`tune --import`), and a key
/// holding ESC ]0;...BEL and a newline set the terminal's title and forged a line of `info`:
/// `info`, `tune`, `profiles show` and `job plan` print them through this, and summary()
/// uses it for each reason and candidate name.
CORRIDORKEY_API std::string printable_text(const std::string& s);

/// The cached plans (key, one-line summary), for `info` and `profiles show`. A missing file
/// is an empty list; a corrupt one is one entry saying so. The second form reads the cache
/// at `path` (ModelOptions::tune_cache: a folder or a .json file).
CORRIDORKEY_API std::vector<std::pair<std::string, std::string>> tune_cache_entries();
CORRIDORKEY_API std::vector<std::pair<std::string, std::string>> tune_cache_entries(const std::string& path);

/// Copies every plan of the cache at `from` into the cache at `to` (each a folder or a .json
/// file; `tune --export` / `--import`), keys unchanged: a plan is used only where its key
/// (CPU identity, threads, LibTorch, engine version, model and size) matches. Returns how
/// many were stored. One read and one write of a single-file `to` (a folder gets one file
/// per plan). IoError when `from` holds no readable cache, or the plans cannot be written
/// to `to` (a file there that is not a cache is left as it is); an import that would make
/// a single-file cache (or a plan file) larger than its reader accepts (8 MiB) is refused
/// whole, nothing written.
CORRIDORKEY_API int copy_tune_plans(const std::string& from, const std::string& to);

/// Whether this machine's cache holds the plan a job's options would use (`job plan`).
struct PlanCacheStatus {
  std::string cache;   // the cache read (tune_cache, or the default)
  std::string key;     // the plan key on this machine
  bool cached = false;
  /// Without a plan: the cached key nearest to it, and its parts that differ, as
  /// "threads 2 (cached: threads 4)"; empty when the cache is empty.
  std::string nearest;
  std::vector<std::string> differs;
};
/// Reads the checkpoint (mapped where it can) for its architecture, to make the key; times
/// nothing.
/// Meaningful for a CPU job with tune on (plans are made on CPUs only).
CORRIDORKEY_API PlanCacheStatus plan_cache_status(const ModelOptions& model, const EngineSettings& engine);

/// The precision every chunk of a job should run (for a job's model options and its engine
/// settings, which the plan is timed for), and how it was decided: the explicit
/// model_precision; else, for a CPU job (device: cpu) with tune on, this machine's measured
/// plan for the options' checkpoint and size (cached, or timed now: reads the checkpoint and
/// times blocks; docs/performance.md gives the cost); else Precision::Auto with the reason it is
/// not pinned (tune off, device auto / cuda, mixed precision). `job plan` prints it and
/// `job export` pins a planned one in every chunk's command.
CORRIDORKEY_API std::pair<Precision, std::string> planned_precision(const ModelOptions& model,
                                                                   const EngineSettings& engine);

CORRIDORKEY_NAMESPACE_END
