// The one way a GreenFormer is made, for the engine, bench and verify alike: read a
// checkpoint (TorchScript archive or torch.save file) and build it at a model size, or
// build an architecture with seeded random weights (benchmarks, tests).
#pragma once

#include "model/checkpoint.h"
#include "model/green_former.h"
#include "runtime/model_runner.h"

#include <corridorkey/tune.h>

#include <cstdint>
#include <memory>
#include <string>

namespace corridorkey::detail {

struct ModelSource {
  std::string checkpoint;   // a file or folder; empty -> random weights of random_arch
  int64_t img_size = 0;     // 0 = the checkpoint's own (random weights: 512)
  std::string random_arch;  // "hiera_base_plus" | "small" | "tiny"
  uint64_t seed = 0;
  /// Storage type of the weights. The model is converted before the checkpoint is copied
  /// in, so a bf16 engine never holds a float32 copy of the model beside the file's tensors
  /// (peak memory at load: file + bf16 model, not file + fp32 model + bf16 model).
  torch::ScalarType dtype = torch::kFloat;
  /// safetensors: map the file (ModelOptions::mmap) or read it.
  bool mmap = true;
  /// EngineSettings::backbone_size / backbone_percent, resolved against the model's img_size.
  int64_t backbone_size = 0;
  int backbone_percent = 0;
};

/// What is read before anything is built: the checkpoint's tensors (none for random
/// weights) and the architecture at the model size, so that the plan is decided on the
/// architecture before the weights are built in the type it chooses.
struct ReadSource {
  model::Checkpoint checkpoint;     // what was read (empty for random weights)
  model::GreenFormerConfig config;  // at img_size, backbone resolved
  std::string description;          // the file, or "random:<arch>"
  std::string backbone_note;        // set when backbone_size was rounded down to the grid
  std::string random_arch;
  uint64_t seed = 0;
};
/// Throws IoError / ModelError naming the file, ConfigError for a bad size.
ReadSource read_source(const ModelSource& source);

struct LoadedModel {
  model::GreenFormer net{nullptr};  // eval mode, on the CPU, in the source's dtype
  model::Checkpoint checkpoint;     // what was read (empty for random weights)
  std::string description;          // the file, or "random:<arch>"
  std::string backbone_note;        // set when backbone_size was rounded down to the grid
};

/// The network of a read source, its weights in `dtype` (random ones drawn in float32: the
/// same values for every dtype). The source's tensors move into the result.
LoadedModel build_model(ReadSource source, torch::ScalarType dtype);

/// read_source then build_model in source.dtype: one call for the tools that need no plan.
LoadedModel make_model(const ModelSource& source);

/// A prepared network: the checkpoint (or random weights) read, the plan made for `engine`
/// on its architecture (tune_plan.h), the weights built in the type the plan chose, token
/// routing modules when asked, then the checkpoint freed and the C heap trimmed. What a
/// corridorkey::Model holds.
struct LoadedNet {
  std::shared_ptr<const PreparedNet> net;
  std::string description, arch;  // the file or "random:<arch>"; the architecture
  int64_t img_size = 0, backbone_size = 0, parameters = 0;  // backbone: where the encoder runs
  int64_t native_size = 0;  // the checkpoint's own size (its pos_embed grid); random weights: 512
  std::string file;         // the checkpoint file read (a folder's chosen file); "" for random
  TunePlan plan;  // what the measured plan decided (or the flag rules, tune off)
  ModelOptions resolved;  // the options with the plan applied (model_precision concrete ...)
  EngineSettings resolved_engine;
};
/// `model.checkpoint` is the file to read (empty: random weights), already resolved.
LoadedNet load_net(const ModelOptions& model, const EngineSettings& engine, const torch::Device& device,
                   std::string& notes);

/// A model runner on a network of its own (load_net + ModelRunner). Shared by
/// corridorkey-model-check and the tests.
struct BuiltRunner {
  std::unique_ptr<ModelRunner> runner;
  std::string description, arch;
  int64_t img_size = 0, backbone_size = 0, parameters = 0;
  TunePlan plan;
};
BuiltRunner build_runner(const ModelOptions& model, const EngineSettings& settings,
                         const torch::Device& device, std::string& notes);

/// Checkpoint files read by make_model in this process (a farm task keying several clip
/// parts must read its checkpoint once).
uint64_t checkpoint_loads();

}  // namespace corridorkey::detail
