// CorridorKey engines: load a GreenFormer, key frames.
//
//   corridorkey::Profile opt = corridorkey::load_profile("optimized");
//   opt.model.checkpoint = "CorridorKey.safetensors";
//   auto engine = corridorkey::create_engine(opt.model, opt.engine);  // for this profile
//   corridorkey::FrameResult r = engine->process_frame(plate_view, hint_view);
//
// Several threads, one set of weights (model.h): load a Model once, make one engine per
// thread from it.
//
//   auto model = corridorkey::Model::load(opt.model, opt.engine);
//   std::thread a([&] { auto e = corridorkey::create_engine(model); e->process_frame(...); });
//   std::thread b([&] { auto e = corridorkey::create_engine(model); e->process_frame(...); });
//
// Only the matte, into the host's own half-float buffer:
//
//   corridorkey::FrameRequest req = corridorkey::FrameRequest::only_matte();
//   req.matte_into = {host_ptr, w, h, 1, corridorkey::PixelType::Float16, host_stride};
//   engine->process_frame(plate_view, hint_view, corridorkey::Screen::Green, req);
//
// Thread-safety, per call:
//   - An engine is used by one thread at a time. process_frame() and run_model() on one
//     engine must be serialised (a mutex, or one thread per engine as the clip pipeline and
//     `serve` do); settings(), info() and model() are const and may be read while no
//     process_frame() is running (info().notes and precision change when on_oom degrades).
//   - Different engines are independent and may run concurrently, also when they share one
//     Model: the Model's weights are only read while keying.
//   - Constructors and create_engine() may be called from any thread, concurrently. The
//     process-global switches (intra-op threads, cudnn benchmark, TF32) are applied by the
//     first Model loaded (documented in ModelOptions); later values only note a conflict.
//   - No callbacks: process_frame() runs on the calling thread and returns when done. Log
//     messages (log.h) are delivered on that same thread.
//   - An engine may be destroyed on any thread once no call on it is running; the Model it
//     used stays alive while other engines (or the host) hold it.
//
// What an engine holds: its Model (by shared_ptr, shared with the other engines made from it)
// and its own EngineSettings, nothing merged back: model()->options() is what the weights
// were loaded with, settings() what this engine runs with (llama.cpp's model and context).
//
// Lifetime: an engine holds its Model by shared_ptr; results are plain owned buffers and
// outlive both. All failures are corridorkey::Error subclasses; LibTorch errors never
// escape raw.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/image.h>
#include <corridorkey/log.h>
#include <corridorkey/model.h>
#include <corridorkey/options.h>
#include <corridorkey/tune.h>
#include <corridorkey/version.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct EngineAccess;  // internal: the clip pipeline drives the engine's stages separately

/// Milliseconds per stage: of one process_frame() call, of one frame in the clip pipeline
/// (read and write too), or summed over frames with +=. infer_ms is the model forward
/// (encoder + decoders + refiner, plus transfers in the pipeline).
struct StageTimings {
  double read_ms = 0, preprocess_ms = 0, encoder_ms = 0, decoders_ms = 0, refiner_ms = 0,
         infer_ms = 0, postprocess_ms = 0, write_ms = 0, total_ms = 0;

  StageTimings& operator+=(const StageTimings& o) {
    read_ms += o.read_ms;
    preprocess_ms += o.preprocess_ms;
    encoder_ms += o.encoder_ms;
    decoders_ms += o.decoders_ms;
    refiner_ms += o.refiner_ms;
    infer_ms += o.infer_ms;
    postprocess_ms += o.postprocess_ms;
    write_ms += o.write_ms;
    total_ms += o.total_ms;
    return *this;
  }
};

/// Peak memory during one call. CUDA: caching-allocator peaks. CPU: the process's peak RSS
/// growth, and (with ModelOptions::track_host_memory) bytes allocated by LibTorch's CPU
/// allocator above the call's start, overall and per model stage.
struct MemoryStats {
  uint64_t device_peak_allocated = 0;
  uint64_t device_peak_reserved = 0;
  uint64_t host_peak_allocated = 0;
  uint64_t host_peak_rss_growth = 0;
  /// Peak bytes above the call's start within each model stage (device allocator on
  /// CUDA, LibTorch CPU allocator on CPU); eager execution only.
  uint64_t encoder_peak = 0, decoders_peak = 0, refiner_peak = 0;
};

/// Which outputs process_frame() produces, and where. An output not asked for costs
/// nothing: the fg is not resized unless fg, processed or comp is asked; despeckle, despill
/// and the sRGB->linear step run only for processed or comp; the checkerboard only for comp.
/// The outputs asked for are the same bits whatever else is asked.
struct FrameRequest {
  bool matte = true, fg = true, processed = true, comp = true;
  /// Optional: the caller's buffer for an output asked for, written in its pixel type
  /// (MutableImageView), plate-sized with the output's channels (matte 1, fg 3, processed 4,
  /// comp 3; ConfigError before the model runs otherwise). That output's Image in the
  /// FrameResult then stays empty. Written during the call only, never kept.
  MutableImageView matte_into, fg_into, processed_into, comp_into;

  static FrameRequest only_matte() {
    FrameRequest r;
    r.fg = r.processed = r.comp = false;
    return r;
  }
};

struct FrameResult {
  Image alpha;      // [H,W,1] linear, raw model output resized to the plate (no despeckle)
  Image fg;         // [H,W,3] sRGB straight, raw (or in key_frame's fg_colorspace)
  Image processed;  // [H,W,4] linear premultiplied RGBA (despeckled alpha, despilled fg)
  Image comp;       // [H,W,3] sRGB, over a checkerboard
  // (each empty when the FrameRequest did not ask for it, or wrote it into the host's view)
  StageTimings timings;
  MemoryStats memory;
  Screen backing = Screen::Green;     // the plate's backing, as asked or estimated (Auto)
  bool swapped = false;    // green and blue swapped around the model (its backing is not the plate's)
  bool linear = false;     // the plate was decoded as scene-linear (its colour space)
  std::string checkpoint;  // the model that keyed it: the blue-screen model's for a blue plate
  std::vector<std::string> warnings;  // NaN samples cleaned, a hint resized, on_oom's steps ...
};

/// What the engine actually runs after resolving options against the device (e.g. a
/// compile mode that cannot apply on CPU), for logs and reports.
struct EngineInfo {
  std::string device, arch, checkpoint, profile, compile_mode_effective;
  std::string precision;  // "float32", "bfloat16", or "mixed/<autocast dtype>"
  std::string attention;  // global attention: "4-D SDPA", "5-D SDPA (math)", "native bf16 kernel"
  std::string refiner;    // "whole image", "whole image, fused", "tiled 256 px"
  int64_t img_size = 0;
  int64_t backbone_size = 0;  // where the encoder ran: img_size unless decoupled
  int64_t parameters = 0;
  std::string notes;  // one line per option that could not apply as asked
  /// The measured plan: what it decided (or the flag rules with tune off), on which times,
  /// and where it is cached.
  TunePlan tune;
};

class CORRIDORKEY_API BaseEngine {
 public:
  virtual ~BaseEngine();
  BaseEngine(const BaseEngine&) = delete;
  BaseEngine& operator=(const BaseEngine&) = delete;

  /// Keys one frame shot on the model's own backing (ModelOptions::model_screen, green
  /// unless this is a blue-screen model), through the frame stages every entry runs
  /// (key_frame, frame.h): plate (RGB or RGBA, extra channels ignored; grey replicated;
  /// NaN / Inf set to 0, negatives clamped), hint (first channel used; resized with the plate
  /// when its size differs, same shape; no data: generated by a chroma key of the plate).
  /// Taken as scene-linear when EngineSettings::input_is_linear. Throws IoError for bad views.
  FrameResult process_frame(const ImageView& plate, const ImageView& hint);

  /// The same for a plate shot on `screen`. A backing other than the model's swaps green
  /// and blue before the model and fg back after it; despill always acts on the backing's
  /// own channel. Auto estimates the backing from this plate (a clip estimates it once, from
  /// three: estimate_screen(), hint.h); FrameResult::backing says which.
  FrameResult process_frame(const ImageView& plate, const ImageView& hint, Screen screen);

  /// The same, producing only the outputs `request` asks for (FrameRequest), each into the
  /// FrameResult or into the caller's view.
  FrameResult process_frame(const ImageView& plate, const ImageView& hint, Screen screen,
                            const FrameRequest& request);

  /// Model only, at model resolution: input [4,S,S] planar float (normalised rgb + hint).
  /// Returns alpha [S,S] and fg [3,S,S] planar. For benchmarks and parity checks.
  struct ModelOutput {
    std::vector<float> alpha, fg;
    StageTimings timings;
    MemoryStats memory;
    /// Token routing: fraction of tokens sent through global attention per routed stage.
    double routed_stage2 = 1.0, routed_stage3 = 1.0;
  };
  ModelOutput run_model(const std::vector<float>& input_planar);

  /// This engine's settings as asked (the Model's options: model()->options()).
  const EngineSettings& settings() const;
  const EngineInfo& info() const;
  /// The weights this engine runs, shared with every other engine made from them.
  const std::shared_ptr<const Model>& model() const;

 protected:
  /// Loads a Model of its own (Model::load(profile.model, profile.engine)), then runs on it.
  explicit BaseEngine(const Profile& profile);
  /// Runs on `model` with `settings`.
  BaseEngine(std::shared_ptr<const Model> model, const EngineSettings& settings);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct EngineAccess;
};

/// The reference behaviour: defaults to the "original" profile (every optimization off).
class CORRIDORKEY_API OriginalEngine : public BaseEngine {
 public:
  explicit OriginalEngine(const Profile& profile);
  OriginalEngine();  // "original" profile, bundled default checkpoint
  OriginalEngine(std::shared_ptr<const Model> model, const EngineSettings& settings);
};

/// Defaults to the "optimized" profile; owns the token-routing modules when enabled
/// (OriginalEngine refuses token_routing with a ConfigError).
class CORRIDORKEY_API OptimizedEngine : public BaseEngine {
 public:
  explicit OptimizedEngine(const Profile& profile);
  OptimizedEngine();  // "optimized" profile, bundled default checkpoint
  OptimizedEngine(std::shared_ptr<const Model> model, const EngineSettings& settings);
};

/// A Model loaded for `model` and `settings`, and an engine with `settings` on it:
/// OriginalEngine for engine_kind original, OptimizedEngine otherwise. Device "auto" picks
/// CUDA, then MPS, then CPU; an explicit device is honoured or throws DeviceError.
CORRIDORKEY_API std::unique_ptr<BaseEngine> create_engine(const ModelOptions& model,
                                                          const EngineSettings& settings);
/// An engine on a loaded Model (no second copy of the weights), with the settings the
/// Model was planned for, or with its own (size, post-processing, refiner, compile mode,
/// on_oom ... may all differ). At another img_size / backbone_size than the Model's, the
/// engine holds its own pos_embed, resized from the checkpoint's as Model::load at that
/// size would (the file is read again for it), and its own plan at that size.
CORRIDORKEY_API std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model);
CORRIDORKEY_API std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model,
                                                          const EngineSettings& settings);
/// Both halves as a profile holds them: create_engine(profile.model, profile.engine).
CORRIDORKEY_API std::unique_ptr<BaseEngine> create_engine(const Profile& profile);
/// Deprecated (one release, engine/src/compat): create_engine(model, profile.engine), after
/// checking that profile.model has the Model's key (ConfigError naming both otherwise). Its
/// process-wide fields are not applied: the Model's are (Model::load applies them).
[[deprecated("create_engine(model, profile.engine)")]] CORRIDORKEY_API std::unique_ptr<BaseEngine> create_engine(
    std::shared_ptr<const Model> model, const Profile& profile);

/// Bundled default checkpoint path: $CORRIDORKEY_CHECKPOINT, else data_dir()/checkpoints/
/// greenformer_small_synthetic384.ts (profile.h).
CORRIDORKEY_API std::string default_checkpoint();

CORRIDORKEY_NAMESPACE_END
