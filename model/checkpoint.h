// Reading GreenFormer weights in C++ (no Python at run time, and no code from the file):
//  - torch.save files, zip or legacy: a state_dict (OrderedDict), or a training checkpoint
//    whose weights sit under a container key (kWeightContainers); keys possibly prefixed
//    "_orig_mod." (torch.compile); any dtype;
//  - TorchScript archives (torch.jit.save), read as data: their tensors by attribute path
//    and the config.json extra file that gives the architecture. Their code is not run.
// The files are read by the restricted unpickler in torch_pickle.h / torch_archive.h.
// Fixed weight transforms live here, so forward() reads like the network: prefix stripping,
// dropping num_batches_tracked, pos_embed resizing to the requested model size.
#pragma once

#include "config.h"
#include "green_former.h"

#include <torch/types.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace corridorkey::model {

enum class CheckpointFormat { TorchScript, TorchSave };

/// torch.save containers that hold the weights, in order of preference: the first of these
/// keys whose value is a dict is taken (it must then be a dict of tensors); without any,
/// the top level is. Regular weights win over EMA weights when a file has both.
inline const std::vector<std::string> kWeightContainers{
    "state_dict", "model_state_dict", "model", "ema", "model_ema", "state_dict_ema"};

struct Checkpoint {
  std::string path;
  CheckpointFormat format = CheckpointFormat::TorchSave;
  /// Architecture: from config.json when present, else inferred from tensor shapes.
  GreenFormerConfig config;
  bool config_from_file = false;
  /// Weights by checkpoint key (prefix stripped, num_batches_tracked dropped), in file order.
  /// Add through add() so find() sees them.
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  /// Key -> position in `tensors`.
  std::unordered_map<std::string, size_t> index;
  /// Which container the weights came from ("state_dict", ...; "" = the top level).
  std::string weights_entry;
  /// Top-level entries that are not weights (optimizer, epoch, config, ...): not read,
  /// reported once by whoever loads the checkpoint (ignored_summary()).
  std::vector<std::string> ignored_entries;

  const torch::Tensor* find(const std::string& key) const;
  /// Strips "_orig_mod.", drops num_batches_tracked; a key seen twice is a ModelError.
  void add(const std::string& raw_key, const torch::Tensor& tensor);
  /// "ignored: optimizer, epoch, config" ("" when nothing was ignored).
  std::string ignored_summary() const;
};

/// Reads a checkpoint file of either format without executing anything from it. Throws
/// IoError (missing / unreadable file) or ModelError (not a checkpoint, truncated,
/// unsupported content, a refused pickle global), naming the file.
Checkpoint read_checkpoint(const std::string& path);

/// The checkpoint's architecture at img_size (0 = its own), validated; a bad size is a
/// ConfigError naming the checkpoint file.
GreenFormerConfig config_at(const Checkpoint& ckpt, int64_t img_size);

/// Infers the architecture from tensor shapes (embed dim, depths, widths, grid -> img_size).
/// num_heads is not visible in shapes; it comes from the known Hiera family widths.
GreenFormerConfig infer_config(const Checkpoint& ckpt);

/// pos_embed [1, g*g, C] -> [1, new_grid^2, C]: square grid, bicubic, align_corners=False,
/// no antialias (what the reference does when S differs from the training size).
torch::Tensor resize_pos_embed(const torch::Tensor& pos_embed, int64_t new_grid);

/// Copies the checkpoint into the model. Strict: every model parameter / buffer (but
/// num_batches_tracked) must be present with the right shape; unexpected keys are errors.
/// pos_embed is resized when its grid differs from the model's. Token-routing weights
/// (ltrm_stage*) are left to TokenRouter::load.
void load_weights(GreenFormerImpl& model, const Checkpoint& ckpt);

/// Convenience: read, build at img_size (0 = the checkpoint's own size) and load.
/// img_size must be a multiple of 32 (ConfigError otherwise).
GreenFormer load_green_former(const std::string& path, int64_t img_size = 0);

}  // namespace corridorkey::model
