// The options of a run, as typed structs with their defaults:
//  - ModelOptions: what is baked into a Model's weights (checkpoint, device, precision,
//    layouts and fusions, the attention kernel, the plan mode, token routing) and the
//    process-wide switches (threads, tf32 ...). Model::load takes it (model.h).
//  - EngineSettings: what each engine owns (size, refiner, compile mode, memory policy,
//    post-processing). create_engine takes it (engine.h).
//  - Profile: both halves side by side, as profiles (profiles/*.yaml), flags and job files
//    fill them (profile.h), and as run_inference takes them.
//  - InferenceOptions: what the clip pipeline reads and writes (pipeline.h).
// Each field has one row in a table (option_fields.h) that parses and prints it; the
// defaults below are the only defaults.
//
// Thread-safety: plain structs; the library copies them when a Model or an engine is made
// and never keeps a reference to the caller's, except InferenceOptions::cancel, which
// run_inference reads from its threads (set it from any thread, the signal handler too).
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// Auto: with tune auto/refresh on a CPU, the measured plan picks float32 or bfloat16
/// (tune.h); otherwise the flag rule: float16 on CUDA and MPS, bfloat16 on a CPU with AMX or
/// AVX-512 BF16, float32 on other CPUs (resolve_precision in system.h; never float16 on a
/// CPU by default).
enum class Precision { Float32, Float16, BFloat16, Auto };
/// A kernel switch the measured plan may decide: Off, On, or Auto (the plan's timed trials
/// choose; with tune off, Auto means On where the kernel applies).
enum class AutoSwitch { Off, On, Auto };
/// The measured plan (tune.h): Off (today's flag rules, no trials), Auto (trials on first
/// use of a machine + configuration, cached per user), Refresh (trials again, cache
/// rewritten), CacheOnly (a cached plan where there is one, else the flag rules; never
/// times anything: a farm task that must not spend its first minutes on trials).
enum class TuneMode { Off, Auto, Refresh, CacheOnly };
/// When the device runs out of memory on a frame: Fail it, or Degrade (retry it with the
/// tiled refiner and cache clearing, then in a half precision; the run stays degraded).
enum class OnOom { Fail, Degrade };
/// Refiner tiling: Off (whole image), On (always tiled), Auto (tiled only when the whole
/// image does not fit refiner_memory_budget_mb).
enum class RefinerTiling { Off, On, Auto };
enum class CompileMode { None, Default, ReduceOverhead, MaxAutotune };
/// Which engine class create_engine() builds (profile field `engine`).
enum class EngineKind { Original, Optimized };

CORRIDORKEY_API const char* to_string(Precision p);    // "float32" | ... | "auto"
CORRIDORKEY_API const char* to_string(RefinerTiling t);  // "false" | "true" | "auto"
CORRIDORKEY_API const char* to_string(CompileMode m);  // "none" | "default" | ...
CORRIDORKEY_API const char* to_string(EngineKind k);   // "original" | "optimized"
CORRIDORKEY_API const char* to_string(OnOom o);        // "fail" | "degrade"
CORRIDORKEY_API const char* to_string(AutoSwitch s);   // "false" | "true" | "auto"
CORRIDORKEY_API const char* to_string(TuneMode t);     // "off" | "auto" | "refresh" | "cache-only"

/// The backing's colour. A plate whose backing is not the one the model was trained on is
/// keyed with green and blue swapped before the model and after it; Auto estimates it per
/// clip.
enum class Screen { Auto, Green, Blue };

/// What is baked into a Model's weights, and the process-wide switches the first Model
/// loaded applies (model.h). Model::load takes it; engines made from one Model share it.
/// Defaults: default_model_options() (the struct's initialisers, the "original" profile's).
struct ModelOptions {
  // ---- the weights ----
  /// .safetensors, torch.save .pth or TorchScript archive, told by content; or a folder,
  /// in which *.safetensors is preferred over *.pth and *.pth over *.ts (one file of the
  /// preferred kind, else a ConfigError listing them). Empty: the bundled model.
  std::string checkpoint;
  /// With an empty checkpoint: build this architecture with seeded random weights
  /// ("hiera_base_plus", "small" or "tiny"); for benchmarks and tests only.
  std::string random_weights_arch;
  uint64_t random_weights_seed = 0;
  /// The backing `checkpoint` was trained on: green (CorridorKey) or blue (the blue-screen
  /// model). Plates shot on the other colour are keyed with green and blue swapped.
  Screen model_screen = Screen::Green;
  /// The blue-screen model (a file or folder as `checkpoint`): run_inference loads it as a
  /// second Model with these same options, for clips on a blue backing, keyed without the
  /// green/blue swap; empty: blue clips are keyed with `checkpoint` and the swap. Not part
  /// of this Model's key.
  std::string checkpoint_blue;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N | mps
  /// safetensors checkpoints: map the file (the weights stay in the page cache, shared
  /// with other processes, no copy) or read it into memory. A mapped file that is replaced
  /// or truncated while in use raises SIGBUS (docs/checkpoints.md: the CLI turns it into
  /// exit 4, install_mapped_checkpoint_guard), so a process that outlives one job (a host
  /// application, `serve`) should read (false). Not part of the key: the same weights.
  bool mmap = true;

  // ---- how they are stored and run ----
  Precision model_precision = Precision::Float32;
  /// Autocast: weights stay float32, matmuls/convs run in model_precision's half type.
  bool mixed_precision = false;
  /// Convolutions (patch embedding, decoders, refiner) on channels-last (NHWC) tensors,
  /// the layout oneDNN / cuDNN run fastest (fp32 effect <= 1e-5).
  bool channels_last = false;
  /// Decoder heads without the 1024-channel concatenation (linear_fuse folded into the
  /// per-scale projections, 256 channels resized per scale): ~4x less decoder memory,
  /// fp32 effect <= 1e-5 on alpha/fg.
  bool fused_decoder = false;
  /// Global-attention blocks run SDPA on contiguous 4-D q/k/v (flash / memory-efficient
  /// kernels) instead of the 5-D math path that materialises N x N scores. fp32 effect
  /// <= 1e-5 on alpha/fg (tests/test_engine.cpp).
  bool flash_attention = false;
  /// With flash_attention, the engine's own CPU attention kernels instead of LibTorch's SDPA:
  /// bf16 global attention on a CPU with AVX-512 BF16 (kernels/attention_cpu.h; error of bf16
  /// rounding), and float32 windowed and global attention on a CPU with AVX2 + FMA, in an
  /// AVX2 or an AVX-512 variant (kernels/attention_f32_cpu.h; within fp32 rounding). Both are
  /// self-tested at start-up. Auto: the measured plan times kernel against SDPA per stage
  /// (the bf16 kernel wins on some CPUs with AVX-512 BF16 and loses on others:
  /// docs/performance.md); with tune off, Auto means on.
  AutoSwitch native_attention = AutoSwitch::Off;
  /// Token rows per chunk in the token-wise parts of the encoder blocks that keep their
  /// width (LN + qkv before the attention; projection, residuals, LN and MLP after it), so
  /// the MLP's 4x-wide hidden rows stay in cache: 0 = whole rows (the reference's way).
  /// Equal to whole rows to float32 rounding: every op is row-wise, only a GEMM may reduce a
  /// row slice in another order (test_functional.cpp, test_engine.cpp).
  int64_t token_chunk = 0;
  /// The measured plan: timed trials choose precision (model_precision auto), the
  /// attention kernel (native_attention auto) and refiner tiling (tiled_refiner auto, where
  /// memory allows both) on this machine, cached per user (tune.h). An explicit value of
  /// those fields always wins over the plan.
  TuneMode tune = TuneMode::Off;
  /// Where plans are cached: a folder (one file per plan, written without a lock, for a
  /// farm's shared filesystem) or a single .json file; empty: CORRIDORKEY_TUNE_CACHE, else
  /// ~/.cache/corridorkey-engine/tune.json (tune.h). Not part of the key.
  std::string tune_cache;
  bool token_routing = false;
  double edge_threshold_low = 0.02;
  double edge_threshold_high = 0.98;
  int64_t min_edge_tokens = 64;

  // ---- process-wide: applied by the first Model loaded in the process ----
  // A later Model (or engine) asking for other values applies them for the whole process
  // (threads, tf32, cudnn benchmark: every Model then runs with them) or notes that it
  // cannot (docs/embedding.md); they are not part of a Model's key.
  /// LibTorch intra-op threads (0 = LibTorch's default, one per core).
  int threads = 0;
  /// TF32 for float32 matmuls / convolutions on Ampere+ GPUs.
  bool tf32 = false;
  /// cudnn.benchmark = !disable_cudnn_benchmark.
  bool disable_cudnn_benchmark = false;
  /// CPU tensors of 1 MiB and more from the engine's block cache: mapped with transparent
  /// huge pages and reused from frame to frame instead of mapped, faulted in and zeroed
  /// anew by every tensor (glibc mmaps each request above 32 MiB). Bit-identical results;
  /// never maps more than the most the process has needed at once.
  bool host_block_cache = false;
  /// Count LibTorch's CPU allocations to report host_peak_allocated / per-stage peaks.
  /// Installs a counting allocator for the whole process (a mutex per allocation), so it
  /// is off unless asked for; `bench` turns it on. RSS-based peaks are always reported.
  bool track_host_memory = false;
};

/// What each engine owns: its size, its refiner and compile mode, its memory policy and its
/// post-processing. Engines made from one Model may differ in every field. create_engine
/// takes it; Model::load takes the one the first engine will have, so that the plan is
/// timed for it. Defaults: default_engine_settings().
struct EngineSettings {
  /// OriginalEngine (the reference behaviour, no token routing) or OptimizedEngine (profile
  /// key `engine`).
  EngineKind engine_kind = EngineKind::Original;
  /// Name of the profile these settings came from ("custom" when built by hand).
  std::string profile = "custom";
  int64_t img_size = 0;         // model resolution S; 0 = the checkpoint's own
  /// Size the encoder and decoders run at, below img_size, for speed: pixels (0 = img_size),
  /// or backbone_percent of img_size when that is > 0 (profiles say `backbone_size: 50%`).
  /// Rounded down to a multiple of 32 with a note; the refiner and the outputs stay at
  /// img_size. Trades quality at thin strands and semi-transparent edges (docs/profiles.md).
  int64_t backbone_size = 0;
  int backbone_percent = 0;
  /// float32 Linear layers on a CPU through oneDNN's matmul (with GELU fused into the MLP's
  /// first one) instead of at::linear's MKL GEMM: within float32 rounding (test_functional,
  /// test_tune). Auto: the measured plan times both on one encoder block per stage shape and
  /// keeps the faster (which one wins depends on the CPU: docs/performance.md, "float32
  /// Linear layers through oneDNN"); with tune off, Auto means off. No effect in other
  /// precisions, under mixed_precision, on other devices (bf16 Linear already runs through
  /// oneDNN), or when the process's float32 matmul precision is not IEEE (oneDNN would then
  /// compute in bf16 / tf32).
  AutoSwitch onednn_linear = AutoSwitch::Off;
  /// The refiner's eight 64 -> 64 float32 3x3 convolutions on a CPU by Winograd's F(2x2,
  /// 3x3) (kernels/winograd_conv_cpu.h: 2.25x fewer multiplications) instead of oneDNN's
  /// direct convolution: within float32 rounding (its error against float64 was 6.3-6.9e-7
  /// against the direct one's 7.7e-7-2.5e-6, test_kernels). Auto: the measured plan times one
  /// refiner block both ways and keeps the faster; with tune off, Auto means off. Needs
  /// channels_last (the kernel reads channels-last maps) and AVX2 + FMA; no effect in other
  /// precisions, under mixed_precision or on other devices.
  AutoSwitch winograd_conv = AutoSwitch::Off;
  /// Exact tiled refiner: image-global GroupNorm statistics, tile-sized working memory.
  /// Auto tiles only when the whole-image refiner would not fit refiner_memory_budget_mb.
  RefinerTiling tiled_refiner = RefinerTiling::Off;
  /// Memory the whole-image refiner may use, in MiB; 0 = auto: half of the memory free on
  /// the device when the engine is built (CUDA: free device memory; CPU: MemAvailable).
  int64_t refiner_memory_budget_mb = 0;
  /// Refiner GroupNorms fused with their residual add and ReLU (two passes over the map
  /// instead of five; fp32 effect <= 1e-5).
  bool fused_refiner = false;
  /// Tile side in pixels (multiple of 8). The exact tiler reads the halo each layer needs
  /// (<= 16 px) and blends nothing, so there is no overlap to set (old profiles' tile_overlap
  /// is accepted with a deprecation warning and ignored).
  int64_t tile_size = 512;
  /// Release the caching allocator's free blocks between encoder, decoders and refiner.
  bool cache_clearing = false;
  CompileMode compile_mode = CompileMode::None;
  /// compile_mode default / max-autotune: an AOTInductor package (.pt2) compiled for this
  /// checkpoint and img_size; empty -> CUDA graphs on CUDA, eager elsewhere (logged).
  std::string aoti_package;
  int64_t dma_buffers = 3;      // pinned host buffers for device->host copies (2..8)
  OnOom on_oom = OnOom::Degrade;

  // ---- pre / post-processing ----
  bool input_is_linear = false; // plate is scene-linear (EXR): convert to sRGB after resize
  double despill_strength = 0.5; // 0..1 (CLI --despill takes 0..10)
  bool despeckle = true;
  int64_t despeckle_size = 400;  // minimum connected-component area kept (pixels)
  double refiner_scale = 1.0;
};

/// The defaults, as llama.cpp's *_default_params(): the structs' own initialisers.
CORRIDORKEY_API ModelOptions default_model_options();
CORRIDORKEY_API EngineSettings default_engine_settings();

/// Both halves side by side, as a profile file, a job file and the CLI's flags fill them
/// (load_profile, set_option) and as run_inference takes them: `model` for Model::load,
/// `engine` for create_engine. Nothing underneath merges them back into one struct: a Model
/// holds its ModelOptions, an engine its Model and its own EngineSettings.
///
/// Every field belongs to exactly one half (the option tables say which, OptionInfo::owner):
///   ModelOptions:   checkpoint, random_weights_arch, random_weights_seed, model_screen,
///                   checkpoint_blue, device, mmap, model_precision, mixed_precision,
///                   channels_last, fused_decoder, flash_attention, native_attention,
///                   token_chunk, tune, tune_cache, token_routing, edge_threshold_low,
///                   edge_threshold_high, min_edge_tokens; process-wide: threads, tf32,
///                   disable_cudnn_benchmark, host_block_cache, track_host_memory
///   EngineSettings: engine (engine_kind), profile, img_size, backbone_size, backbone_percent,
///                   onednn_linear, winograd_conv, tiled_refiner, refiner_memory_budget_mb,
///                   fused_refiner, tile_size, cache_clearing, compile_mode, aoti_package,
///                   dma_buffers, on_oom, input_is_linear, despill_strength, despeckle,
///                   despeckle_size, refiner_scale
struct Profile {
  ModelOptions model;
  EngineSettings engine;
};

/// The combined struct of 0.1 (it inherited both halves) is gone; its name stays one release
/// as an alias of Profile, whose halves are members: `o.checkpoint` is `o.model.checkpoint`,
/// `o.engine()` is `o.engine`. Removed in 0.3 (docs/embedding.md, "Migrating from
/// EngineOptions").
using EngineOptions [[deprecated("corridorkey::Profile: its halves are .model and .engine")]] = Profile;

enum class OnError { Stop, Skip };
/// Where a clip's alpha hints come from: Files (<clip>/AlphaHint/, required), Chroma (a
/// chroma key of the plate, written to <out>/AlphaHint/ as 8-bit PNG), or Auto (AlphaHint/
/// when the clip has one, otherwise Chroma).
enum class HintSource { Auto, Files, Chroma };
/// Codec of the video deliverables: H.264 in .mp4 (yuv420p; the ffmpeg binary with the
/// reference's libx264 crf 18 when installed, otherwise OpenCV's FFmpeg backend), or ProRes
/// 4444 in .mov (FG with the matte as alpha; needs the ffmpeg binary).
enum class VideoCodec { H264, ProRes };

CORRIDORKEY_API const char* to_string(HintSource h);  // "auto" | "files" | "chroma"
CORRIDORKEY_API const char* to_string(Screen s);      // "auto" | "green" | "blue"
CORRIDORKEY_API const char* to_string(VideoCodec c);  // "h264" | "prores"

/// Which outputs are also encoded as a video once their sequence is complete.
struct VideoOutputs {
  bool auto_ = true;  // comp when the input is a video, nothing for image sequences
  bool comp = false, matte = false, fg = false;
  bool any() const { return comp || matte || fg; }
};
/// How plates are interpreted (deprecated: InferenceOptions::input_colorspace names any
/// colour space; srgb = Srgb, linear-rec709 = Linear, auto = Auto). Srgb is the reference's
/// default (it converts only when told the input is linear); Auto treats EXR plates as
/// scene-linear and other formats as sRGB.
enum class ColorSpace { Srgb, Linear, Auto };

struct InferenceOptions {
  std::vector<std::string> paths;  // clip folders, clips roots, or both
  /// Empty: outputs in <clip>/Output/. Set: in <output_root>/<clip name>/ instead.
  std::string output_root;
  bool fg = true, matte = true, comp = true, processed = true;  // `outputs`
  /// `outputs` layered: Layered/<stem>.exr, one EXR with Processed, FG and matte as layers.
  bool layered = false;
  std::string exr_compression = "pxr24";
  std::string comp_format = "png";   // png | exr
  std::string frames;                // "A-B[,C-D]", 1-based inclusive; empty = all
  bool skip_existing = false;
  OnError on_error = OnError::Stop;
  bool allow_mismatch = false;       // plate/hint frame counts differ: truncate + warn
  ColorSpace color = ColorSpace::Srgb;  // deprecated spelling of input_colorspace
  /// `color` was given (profile, job file or --linear/--srgb/--color): giving
  /// input_colorspace too is a usage error.
  bool color_given = false;
  /// Colour management (docs/colour.md). input_colorspace: what the plates are in, a
  /// built-in name (`corridorkey-engine colorspaces`), a colour space of the OCIO config, or
  /// auto; empty = from `color`. Plates are decoded to scene-linear Rec.709 and keyed as
  /// --linear keys. output_colorspace: the Processed EXR's (linear) space, empty = the
  /// input's scene-linear space. fg_colorspace: the FG EXR's, empty = sRGB-encoded as the
  /// model predicts it. comp_view: "DISPLAY/VIEW" of the config for Comp, empty = sRGB.
  /// ocio_config: the config for names that are not built in; empty = $OCIO.
  std::string input_colorspace, output_colorspace, fg_colorspace, comp_view, ocio_config;
  int read_workers = 2;
  int write_workers = 2;
  /// Frames whose header declares more pixels are refused before decoding (default
  /// 16384 x 16384): a corrupt or hostile header cannot make the reader allocate gigabytes.
  int64_t max_pixels = int64_t{16384} * 16384;
  /// Frames whose decoding would hold more bytes (decoded image + its float copy, from the
  /// header), summed over the read workers, are refused before decoding. MiB; 0 = half the
  /// memory this process can still use when the run starts (MemAvailable, cgroup limit).
  int64_t decode_budget_mb = 0;
  /// Nice level of reader and writer threads (0..19): on a CPU node they yield the cores
  /// to inference, which is what bounds throughput.
  int io_nice = 10;
  /// Alpha hints: from files, generated by a chroma key, or auto (files when present).
  HintSource hint = HintSource::Auto;
  Screen screen = Screen::Auto;
  /// Generated hints: erosion and blur radii in pixels of a 1080-line frame (scaled with the
  /// plate's height), to give the coarse, slightly eroded and feathered hint the model was
  /// trained with.
  double hint_erode = 3.0;
  double hint_blur = 6.0;
  /// Generated hints: a frame whose hint is almost all foreground (mean >= 0.99: no backing
  /// found in it, e.g. a blue plate in a green clip) fails, named; false keys it anyway.
  bool backing_check = true;
  /// Garbage and holdout mattes for every clip of the run (docs/clips.md): a folder of
  /// frames, one image for every frame, or a video; empty = each clip's own GarbageMatte/
  /// and HoldoutMatte/ when it has them.
  std::string garbage_matte, holdout_matte;
  /// Video deliverables <out>/Comp.mp4 (Matte, FG), encoded from the finished sequences.
  VideoOutputs video_out;
  VideoCodec video_codec = VideoCodec::H264;
  /// Frame rate of the videos; 0 = the source video's (24 for image sequences).
  double video_fps = 0;
  /// Polled between frames; set from a signal handler to stop cleanly (frames in flight
  /// are finished and written, nothing partial is left).
  const std::atomic<bool>* cancel = nullptr;
  /// Confined writing (set by `review`, not a YAML key or flag): when not empty, every output
  /// folder must resolve under one of these folders; each is opened once, without following
  /// links from the confining folder down, and every file (frames, generated hints, videos,
  /// run.json) is created and renamed through that descriptor, so a link made or swapped in
  /// under a root later is never followed out of it (IoError naming the path). Empty (the
  /// CLI): output folders are followed wherever the user's links lead.
  std::vector<std::string> confine_writes;
};

CORRIDORKEY_NAMESPACE_END
