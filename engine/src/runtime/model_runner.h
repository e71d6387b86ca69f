// Runs the GreenFormer forward of a prepared network (what a Model holds, with its resolved
// ModelOptions) under one engine's EngineSettings: precision / autocast, flash attention,
// tiled refiner, cache clearing between stages, and the compile modes
// (eager, CUDA graph replay, AOTInductor package).
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/tune.h>

#include "model/green_former.h"
#include "model/token_routing.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace corridorkey::detail {

struct ModelRun {
  torch::Tensor alpha, fg;  // [1,1,S,S], [1,3,S,S] float32 on the model's device
  StageTimings timings;     // encoder / decoders / refiner / model (eager runs only)
  uint64_t encoder_peak = 0, decoders_peak = 0, refiner_peak = 0;  // bytes, eager only
  double routed_stage2 = 1.0, routed_stage3 = 1.0;  // fraction of tokens through attention
  /// What changed to get this frame through (on_oom degrade, a failed graph capture).
  std::vector<std::string> warnings;
};

/// How the forward is executed. Decided once, from the options and the device, by a pure
/// function so the rules are tested on any machine.
enum class ExecKind { Eager, CudaGraph, Aoti };
struct ExecPlan {
  ExecKind kind = ExecKind::Eager;
  std::vector<std::string> notes;  // one line per choice that differs from what was asked
};
/// compile_mode none: eager. reduce-overhead: a CUDA graph on CUDA. default / max-autotune:
/// the AOTInductor package when given, else a CUDA graph on CUDA. Token routing plans each
/// frame from its hint (host reads of edge counts), which a CUDA graph cannot capture and an
/// AOTInductor package does not contain: routed profiles run eager, with a note.
/// `decoupled`: backbone_size below img_size, which an AOTInductor package (one forward
/// compiled at one size, from outside) cannot be trusted to hold.
ExecPlan plan_execution(const EngineSettings& settings, bool cuda, bool token_routing,
                        bool decoupled = false);

/// A frame whose alpha or fg holds NaN or Inf is a failed frame (ModelError naming `what`),
/// not a silently written NaN matte.
void check_finite_outputs(const ModelRun& run, const std::string& what);

/// The weights' storage type an engine with these options uses on `device` (float32 under
/// autocast, else the resolved model_precision).
torch::ScalarType weight_dtype_for(const ModelOptions& options, const torch::Device& device);

/// Bytes the whole-image refiner holds at img_size S with C channels: the 7-channel input
/// plus the C-channel maps alive at once (3 with the fused GroupNorms: block input, its two
/// conv outputs; 5 for the eager sequence, whose GroupNorm, add and ReLU each allocate).
uint64_t refiner_whole_image_bytes(int64_t S, int64_t C, int64_t element_size, bool fused);
/// refiner_memory_budget_mb, or half the memory free on the device when it is 0.
uint64_t refiner_budget_bytes(const EngineSettings& settings, const torch::Device& device);

/// The network as every engine on one Model runs it: weights cast to their storage type
/// and moved to the device, convolution weights channels-last, decoder folds computed, the
/// attention kernel chosen per stage. Prepared once, then only read: engines on several
/// threads run forward() on the same modules (no second copy of the weights).
struct PreparedNet {
  model::GreenFormer net{nullptr};
  /// Token routing's modules as loaded. Routing keeps per-frame state (the index sets), so
  /// each runner builds its own router on these weights (aliased, not copied).
  model::TokenRouter router{nullptr};
  ModelOptions options;  // resolved (the measured plan's decisions applied)
  torch::Device device{torch::kCPU};
  torch::ScalarType weight_dtype = torch::kFloat;
  bool autocast = false;
  torch::ScalarType autocast_dtype = torch::kBFloat16;
  std::array<bool, 4> native{};  // the engine's attention kernel per encoder stage
  uint64_t weight_bytes = 0;     // parameters and buffers as stored
};

/// Precision and layouts: casts `net` (and `router`) to the storage type the options ask
/// for on `device`, applies channels-last, the attention switches and the decoder folds.
/// `notes` gets one line per option that cannot apply as asked (also logged once).
/// `plan`: the measured plan's per-stage attention kernel choices (tune_plan.h); options
/// must already hold what the plan resolved (precision, tiling).
std::shared_ptr<const PreparedNet> prepare_net(model::GreenFormer net, const ModelOptions& options,
                                               torch::Device device, std::string& notes,
                                               model::TokenRouter router = nullptr,
                                               const TunePlan* plan = nullptr);

/// An engine's model size where it differs from its prepared network's (a Model serves
/// engines at several sizes, model.h): what every forward of that engine carries
/// (model::ForwardOptions). All zero / undefined: the network's own size.
struct EngineSize {
  int64_t img_size = 0, encoder_size = 0;
  /// At the encoder's token grid, in the weights' type, on the device; undefined where the
  /// grid is the network's (another img_size, the same encoder size).
  torch::Tensor pos_embed;
  /// The attention kernel per encoder stage as the plan timed it at this size (the shared
  /// network's flags were timed at its own).
  std::array<bool, 4> native{};
};

/// The attention kernel per encoder stage: on where `o` asks for it (native_attention on),
/// else per global stage where the plan timed it faster (needs flash_attention).
std::array<bool, 4> planned_native(const ModelOptions& o, const TunePlan* plan);

class ModelRunner {
 public:
  /// One engine's way of running a prepared network: refiner mode, compile mode, OOM
  /// policy, CUDA graph / AOTInductor state. The weights' options are the network's own
  /// (net->options); `settings` are this engine's, with its plan applied. `notes` gets one
  /// line per option that cannot apply as asked. `size`: this engine's size when it is not
  /// the network's.
  ModelRunner(std::shared_ptr<const PreparedNet> net, const EngineSettings& settings,
              std::string& notes, EngineSize size = {});
  /// prepare_net(net, model, ...), then a runner on it (one engine, its own weights).
  ModelRunner(model::GreenFormer net, const ModelOptions& model, const EngineSettings& settings,
              torch::Device device, std::string& notes, model::TokenRouter router = nullptr,
              const TunePlan* plan = nullptr);
  ~ModelRunner();

  /// x: [1,4,S,S] float32 on the device.
  ModelRun run(const torch::Tensor& x);
  std::string effective_compile_mode() const;
  /// "float32" / "float16" / "bfloat16", or "mixed/<autocast dtype>".
  std::string precision() const;
  torch::ScalarType weight_dtype() const { return weight_dtype_; }
  /// The refiner runs tile by tile (tiled_refiner on, or auto over budget).
  bool refiner_tiled() const { return tiled_; }
  /// The size this engine runs at, and where its encoder runs (backbone_size or img_size).
  int64_t img_size() const { return img_size_; }
  int64_t encoder_size() const { return encoder_size_; }
  /// What runs, for EngineInfo: global attention kernel and refiner mode.
  std::string attention_kind() const;
  std::string refiner_kind() const;
  /// Whether the refiner's convolutions run by Winograd (winograd_conv on, float32 weights,
  /// no autocast, channels-last, a CPU kernel for its channel count): what the runner applies.
  bool winograd_active() const;

 private:
  ModelRun eager(const torch::Tensor& x, bool timed);
  ModelRun run_once(const torch::Tensor& x);
  ModelRun run_graph(const torch::Tensor& x);
  void choose_refiner(std::string& notes);
  /// on_oom degrade: the next step down (tiled refiner + cache clearing, then a half
  /// precision). Returns what changed, or "" when nothing is left to give.
  std::string degrade();
  struct Graph;

  std::shared_ptr<const PreparedNet> shared_;
  model::GreenFormer net_;  // shared_->net, or this engine's own copy after an on_oom cast
  model::TokenRouter router_{nullptr};
  EngineSettings settings_;  // this engine's, with its plan applied (the weights': shared_->options)
  torch::Device device_;
  torch::ScalarType weight_dtype_ = torch::kFloat;
  bool autocast_ = false;
  torch::ScalarType autocast_dtype_ = torch::kBFloat16;
  ExecKind exec_ = ExecKind::Eager;
  int degraded_ = 0;  // on_oom steps taken
  std::array<bool, 4> native_{};  // the engine's attention kernel per encoder stage
  bool tiled_ = false;
  uint64_t whole_image_bytes_ = 0;
  EngineSize size_;  // set only when this engine's size is not the network's
  int64_t img_size_ = 0, encoder_size_ = 0;
  std::unique_ptr<Graph> graph_;
  struct Aoti;
  std::unique_ptr<Aoti> aoti_;
};

}  // namespace corridorkey::detail
