// A loaded GreenFormer: immutable weights on one device, shared by the engines made from it.
//
//   corridorkey::Profile opt = corridorkey::load_profile("optimized");  // both halves
//   opt.model.checkpoint = "CorridorKey.safetensors";
//   auto model = corridorkey::Model::load(opt.model, opt.engine);  // one read, one plan
//   auto a = corridorkey::create_engine(model, opt.engine);  // thread A's engine
//   auto b = corridorkey::create_engine(model, opt.engine);  // thread B's: the same weights
//
// The options come in two structs (options.h), as llama.cpp's model and context params do:
// ModelOptions (what the weights hold, and the process-wide switches) for Model::load, and
// EngineSettings (each engine's own) for create_engine. Model::load takes the settings of
// the engine that will be made first too: the measured plan (tune.h) is decided before the
// weights are built, for that engine's size and refiner, and the first engine with those
// settings runs on it with no further trial.
//
// What a Model holds is baked for one use: the weights' storage type (precision), their
// layout (channels-last), the fused decoders' folded weights and the attention kernel per
// encoder stage at its own size. So a Model is keyed by its ModelOptions (model_key()):
// Model::load() with other ones makes a NEW COPY of the weights (there is no conversion in
// place: the engines already running keep reading these).
//
// Per engine, not per Model: the model size (img_size, backbone_size), the buffers and
// activations of a frame, the refiner mode (whole / tiled), compile mode (eager / CUDA graph
// / AOTInductor package), the on_oom policy (an engine that has to drop to a half precision
// casts a private copy for itself), token routing's per-frame plan, and the post-processing
// settings (despill, despeckle).
//
// Size: only pos_embed depends on it. The Model holds it resized to the size it was loaded
// at (img_size, 0 = the checkpoint's own). An engine whose encoder runs at another size
// holds its own, resized from the checkpoint's pos_embed, which it reads again from the
// file (7-117 MB for hiera_base_plus at 512-2048 in float32, half in bfloat16; the file's
// pos_embed must still be the one the Model read, else ModelError; random weights resize
// the Model's). With the same precision and kernels its mattes are bit-identical to an
// engine on a Model loaded at that size. Its precision is the Model's; its attention
// kernels and refiner tiling come from the measured plan at its own size (timed or cached
// when the engine is made), without touching the shared modules.
//
// Thread-safety: Model::load() may be called from any thread, concurrently. A loaded Model
// is never modified: every const member, and creating engines from it, may be called from
// any number of threads at once. It lives as long as the last shared_ptr (each engine made
// from it holds one), so the host may drop its own reference at any time.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/options.h>
#include <corridorkey/tune.h>
#include <corridorkey/version.h>

#include <cstdint>
#include <memory>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

/// The ModelOptions that decide what a Model holds, as one line of text: every field the
/// option table marks in_model_key, in table order ("flash_attention=true;...;
/// checkpoint=<absolute path>;model_screen=green;device=<resolved device>"), then the random
/// weights' architecture and seed. Device "auto" and an empty checkpoint are resolved first,
/// so equal keys mean equal weights. The process-wide fields, mmap and checkpoint_blue are
/// not in it. Throws DeviceError for a device
/// that is not there.
CORRIDORKEY_API std::string model_key(const ModelOptions& options);

/// The options of `main`'s blue-screen Model: checkpoint_blue as the checkpoint, a blue
/// model_screen, every other field main's (so both Models store and run their weights alike).
/// An engine on `main` loads it on its first blue plate (engine.h); a host that keeps Models
/// by key loads it with Model::load(blue_model_options(main), settings).
CORRIDORKEY_API ModelOptions blue_model_options(const ModelOptions& main);

class CORRIDORKEY_API Model {
 public:
  /// Reads the checkpoint (or builds random weights, ModelOptions::random_weights_arch),
  /// decides the measured plan (tune) for it and for the first engine's settings `plan_for`
  /// (its size, refiner, Linear and convolution choices), then builds the weights as the
  /// plan says. Every call loads: a host that wants one copy per key keeps the shared_ptr
  /// (`serve` caches them by model_key()). Throws ConfigError / IoError / ModelError /
  /// DeviceError as engines do.
  static std::shared_ptr<const Model> load(const ModelOptions& options,
                                           const EngineSettings& plan_for = default_engine_settings());
  /// Both halves as a profile holds them: load(profile.model, profile.engine).
  static std::shared_ptr<const Model> load(const Profile& profile) { return load(profile.model, profile.engine); }
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& key() const;        // model_key() of the options it was loaded with
  const ModelOptions& options() const;   // as asked
  /// The engine settings the plan was made for (create_engine(model) uses them).
  const EngineSettings& planned_for() const;
  const std::string& device() const;     // "cpu", "cuda:0", ...
  const std::string& checkpoint() const; // the file read, or "random:<arch>"
  const std::string& arch() const;
  /// The size it was loaded at (what its own pos_embed fits); engines may run at others.
  int64_t img_size() const;
  int64_t parameters() const;
  /// Bytes of the weights as stored on the device (parameters and buffers, in their type).
  uint64_t weight_bytes() const;
  /// One line per option that could not apply as asked while loading (as EngineInfo::notes).
  const std::string& notes() const;
  /// What the measured plan decided at load.
  const TunePlan& tune() const;
  /// Whether the checkpoint file now has another size or modification time than when it
  /// was read, or is gone (random weights: false). The Model's weights stay as read; an
  /// engine at another size, which reads pos_embed from the file again, refuses a file whose
  /// pos_embed changed. A host caching Models by key loads a changed file again. Cheap (a
  /// stat); any thread.
  bool checkpoint_changed() const;

  struct Impl;  // internal
  const Impl& impl() const { return *impl_; }

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

CORRIDORKEY_NAMESPACE_END
