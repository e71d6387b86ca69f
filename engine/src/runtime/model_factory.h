// The one way a GreenFormer is made, for the engine, bench and verify alike: read a
// checkpoint (TorchScript archive or torch.save file) and build it at a model size, or
// build an architecture with seeded random weights (benchmarks, tests).
#pragma once

#include "model/checkpoint.h"
#include "model/green_former.h"
#include "runtime/model_runner.h"

#include <corridorkey/tune.h>

#include <cstdint>
#include <functional>
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
  /// safetensors: map the file (EngineOptions::mmap) or read it.
  bool mmap = true;
  /// When set: called once the architecture is known (before any weight is built) and
  /// returns the dtype instead of `dtype` (the measured plan times that architecture first).
  std::function<torch::ScalarType(const model::GreenFormerConfig&)> dtype_for;
  /// EngineOptions::backbone_size / backbone_percent, resolved against the model's img_size.
  int64_t backbone_size = 0;
  int backbone_percent = 0;
};

struct LoadedModel {
  model::GreenFormer net{nullptr};  // eval mode, float32, on the CPU
  model::Checkpoint checkpoint;     // what was read (empty for random weights)
  std::string description;          // the file, or "random:<arch>"
  std::string backbone_note;        // set when backbone_size was rounded down to the grid
};

/// Throws IoError / ModelError naming the file, ConfigError for a bad size.
LoadedModel make_model(const ModelSource& source);

/// A prepared network from engine options: the checkpoint (or random weights) loaded in the
/// runner's dtype, token routing modules when asked, then the checkpoint freed and the C heap
/// trimmed. What a corridorkey::Model holds.
struct LoadedNet {
  std::shared_ptr<const PreparedNet> net;
  std::string description, arch;  // the file or "random:<arch>"; the architecture
  int64_t img_size = 0, backbone_size = 0, parameters = 0;  // backbone: where the encoder runs
  int64_t native_size = 0;  // the checkpoint's own size (its pos_embed grid); random weights: 512
  std::string file;         // the checkpoint file read (a folder's chosen file); "" for random
  TunePlan plan;  // what the measured plan decided (or the flag rules, tune off)
};
LoadedNet load_net(const EngineOptions& options, const torch::Device& device, std::string& notes);

/// A model runner on a network of its own (load_net + ModelRunner). Shared by
/// corridorkey-model-check and the tests.
struct BuiltRunner {
  std::unique_ptr<ModelRunner> runner;
  std::string description, arch;
  int64_t img_size = 0, backbone_size = 0, parameters = 0;
  TunePlan plan;
};
BuiltRunner build_runner(const EngineOptions& options, const torch::Device& device,
                         std::string& notes);

/// Checkpoint files read by make_model in this process (a farm task keying several clip
/// parts must read its checkpoint once).
uint64_t checkpoint_loads();

}  // namespace corridorkey::detail
