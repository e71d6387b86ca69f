// Side-by-side benchmarks: the same seeded input through several profiles in one process,
// reporting latency (median/min/max after warm-up), peak memory and the numerical drift of
// alpha/fg against the first profile.
//
// Thread-safety: benchmarks make their own engines and time them; run one at a time (two
// at once measure each other), from any thread.
//
// The dev tools' interface for the CLI (ck_devtools, linked by corridorkey-engine only): not
// installed and not in libcorridorkey_engine.so, which is the public API alone.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/engine.h>
#include <corridorkey/options.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct BenchOptions {
  std::string checkpoint;              // or random weights:
  std::string random_arch;             // "hiera_base_plus" | "small" | "tiny"
  int64_t img_size = 512;
  std::string device = "auto";
  /// Profiles to run (NAME or NAME:field=value,...), plus the PyTorch eager reference rows
  /// "reference", "reference-5d", "reference-fast" (tools/bench_reference.py in the venv)
  /// and "reference-upstream" (the reference package itself, from reference_dir).
  /// The first row is the base of the drift and ratio columns.
  std::vector<std::string> profiles{"original", "optimized"};
  /// A CorridorKey checkout (the folder holding CorridorKeyModule/): the
  /// "reference-upstream" row imports its GreenFormer and runs its own forward, so that
  /// anyone can check the "reference" row against the real thing.
  std::string reference_dir;
  /// Profile-field overrides applied to every profile (e.g. {"model_precision","float32"}).
  std::vector<std::pair<std::string, std::string>> overrides;
  int frames = 3;                      // timed frames per profile
  int warmup = 1;
  uint64_t seed = 0;
  /// Fraction of the frame the seeded hint's soft (uncertain) band covers; 0 = default (~15%).
  double hint_band_area = 0;
  bool refiner_only = false;           // time the refiner stage alone (untiled vs tiled)
  /// End to end: generate a clip of `pipeline_frames` EXR plates (+ PNG hints) of
  /// pipeline_width x pipeline_height in a temp folder and key it with the first profile.
  bool pipeline = false;
  int pipeline_frames = 8, pipeline_width = 3840, pipeline_height = 2160;
  int read_workers = 2, write_workers = 2;
  /// Profile the last timed frame of each profile and report its `top_ops` operators.
  int top_ops = 0;
  /// Each row's stages against the machine's GEMM rate in the row's precision (BenchRow::
  /// roofline): the rate is timed once per machine and cached beside the plans.
  bool roofline = false;
};

struct PipelineBenchResult {
  int frames = 0;
  double wall_ms = 0, fps = 0;
  StageTimings stage_sums;  // summed over frames
  double wall_over_infer = 0;  // wall time / summed inference time (1.0 = I/O fully hidden)
  double infer_wait_ms = 0;    // time the inference thread sat idle (readers or writers behind)
  std::string clip_dir;
};

/// Writes the synthetic clip, runs the pipeline, removes the clip.
CORRIDORKEY_API PipelineBenchResult run_pipeline_bench(const BenchOptions& options);

/// One LibTorch operator's share of a forward (bench --ops).
struct OpTime {
  std::string name;
  double self_ms = 0;
  int calls = 0;
};

/// One stage of a frame on the roofline (bench --roofline): its nominal FLOPs, counted from
/// the shapes as PyTorch's FlopCounterMode counts the reference forward (GEMMs, convolutions
/// and attention products; no elementwise work), its median time, and the rate it ran at
/// as a share of the machine's GEMM rate. Winograd convolutions do fewer than the nominal
/// FLOPs, so a refiner can show more than 1.
struct RooflineStage {
  /// "encoder", "decoders", "refiner", "total"; on the CPU also the encoder's parts
  /// "global attention", "windowed attention", "linear" and "other" (part_of "encoder").
  std::string stage;
  std::string part_of;  // "encoder" for its parts, "" for the stages
  double gflop = 0, ms = 0, gflops = 0;
  double of_gemm = 0;  // gflops / GemmRate::gflops
  double exp_g = 0;    // attention parts: exponentials per frame, billions (not in gflop)
};

/// A square GEMM of 2048 on the row's device and precision: LibTorch's own matmul rate.
struct GemmRate {
  double gflops = 0;
  std::string precision;  // "float32", "bfloat16", "float16"
  bool cached = false;    // read from the cache (timed by an earlier run on this machine)
  double trial_ms = 0;    // what timing it cost now (0 when cached)
  std::string cache;      // where it is cached ("" for nowhere)
};

/// Nominal FLOPs of one frame (see RooflineStage), per part.
struct FlopCounts {
  double encoder_linear = 0, encoder_attention = 0, decoders = 0, refiner = 0, total = 0;
  double global_attention = 0, windowed_attention = 0;  // encoder_attention by kind
  double global_scores = 0, windowed_scores = 0;        // one exponential each (not FLOPs)
  double stages[4] = {0, 0, 0, 0};  // per encoder stage: linear and attention
};

/// The counts for the bench's model at its size, with the first profile's backbone settings
/// (bench --roofline --count-only); reads the checkpoint's architecture, builds nothing.
CORRIDORKEY_API FlopCounts bench_flop_counts(const BenchOptions& options);

struct BenchRow {
  std::string profile;
  EngineInfo info;
  std::string precision;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  StageTimings median_stages;
  MemoryStats peak;                    // max over the timed frames
  double alpha_max_diff = 0, fg_max_diff = 0;  // vs the first profile (0 for the first)
  double ratio = 1.0;                  // median_ms / the first row's median_ms
  uint64_t process_peak_rss = 0;       // reference rows: peak RSS of the Python process
  double setup_ms = 0;                 // reference-openvino / -compile: converting or compiling,
                                       // once, before and apart from the timed frames
  std::string not_installed;           // a reference row whose runtime is missing: its package
  double routed_stage2 = 1.0, routed_stage3 = 1.0;  // token routing: fraction attended
  std::vector<OpTime> top_ops;         // --ops N: the last timed frame's operators
  std::vector<RooflineStage> roofline;  // --roofline: encoder, decoders, refiner, total
  GemmRate gemm;                        // --roofline: the rate they are shares of
  std::string notes;                    // --roofline: why the rate was not cached, if so
};

/// The engine options bench uses for one --profile spec: "NAME" or
/// "NAME:field=value[,field=value]", after the global overrides; plus the bench's model,
/// size and device.
CORRIDORKEY_API Profile bench_engine_options(const BenchOptions& options, const std::string& profile_spec);

/// bench --load: how each checkpoint format loads (corridorkey-engine convert writes them).
struct LoadBenchOptions {
  std::vector<std::string> checkpoints;  // files or folders, timed interleaved
  std::string profile = "original";      // the engine built for the whole-load rows
  int repeats = 5;
  bool mmap = true;                      // safetensors access
};

struct LoadBenchRow {
  std::string checkpoint, format;
  uint64_t file_bytes = 0;
  /// Medians over the repeats: file -> tensors by key (no model, no self-tests), and the
  /// whole engine construction (read, build, weights in, start-up self-tests).
  double parse_ms = 0, engine_ms = 0;
  /// Largest peak-RSS growth over the process's resident set before the engine load.
  uint64_t engine_rss_growth = 0;
};

/// Loads each checkpoint `repeats` times in turn (A B A B ...) in this process, resetting
/// the kernel's peak-RSS mark (/proc/self/clear_refs) before each engine load.
CORRIDORKEY_API std::vector<LoadBenchRow> run_load_bench(const LoadBenchOptions& options);

/// Runs every profile; on_row (optional) is called as each row completes.
CORRIDORKEY_API std::vector<BenchRow> run_bench(const BenchOptions& options,
                                const std::function<void(const BenchRow&)>& on_row = {});

CORRIDORKEY_NAMESPACE_END
