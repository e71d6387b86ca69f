// Reading GreenFormer weights in C++ (no Python at run time):
//  - TorchScript archives written by tools/export_torchscript.py (torch.jit.save), whose
//    config.json extra file gives the architecture;
//  - the original CorridorKey.pth (torch.save'd dict, weights under "state_dict" or top
//    level, keys possibly prefixed "_orig_mod.").
// Fixed weight transforms live here, so forward() reads like the network: prefix stripping,
// dropping num_batches_tracked, pos_embed resizing to the requested model size.
#pragma once

#include "config.h"
#include "green_former.h"

#include <torch/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::model {

enum class CheckpointFormat { TorchScript, TorchSave };

struct Checkpoint {
  std::string path;
  CheckpointFormat format = CheckpointFormat::TorchSave;
  /// Architecture: from config.json when present, else inferred from tensor shapes.
  GreenFormerConfig config;
  bool config_from_file = false;
  /// Weights by checkpoint key (prefix stripped, num_batches_tracked dropped), in file order.
  std::vector<std::pair<std::string, torch::Tensor>> tensors;

  const torch::Tensor* find(const std::string& key) const;
};

/// Reads a checkpoint file of either format. Throws IoError (missing / unreadable file) or
/// ModelError (not a checkpoint, truncated, unsupported content), naming the file.
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
