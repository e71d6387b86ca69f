// Reading GreenFormer weights in C++ (no Python at run time, and no code from the file):
//  - safetensors files (the reference's official format), mapped or read (safetensors.h),
//    the architecture from __metadata__ "corridorkey_config" when present, else from shapes;
//  - torch.save files, zip or legacy: a state_dict (OrderedDict), or a training checkpoint
//    whose weights sit under a container key (kWeightContainers); keys possibly prefixed
//    "_orig_mod." (torch.compile); any dtype;
//  - TorchScript archives (torch.jit.save), read as data: their tensors by attribute path
//    and the config.json extra file that gives the architecture. Their code is not run.
// The format is told by content, never by the file name. The PyTorch files are read by the
// restricted unpickler in torch_pickle.h / torch_archive.h.
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

enum class CheckpointFormat { TorchScript, TorchSave, Safetensors };
const char* to_string(CheckpointFormat f);  // "torchscript" | "torch.save" | "safetensors"

/// The __metadata__ key under which `convert` writes the architecture (config JSON).
inline const std::string kConfigMetadataKey = "corridorkey_config";

struct ReadOptions {
  /// safetensors: map the file (tensors point into the mapping) or read it into memory.
  bool mmap = true;
};

/// A checkpoint argument that names a folder: the file in it to load. Preference as the
/// reference's loader: *.safetensors, then *.pth, then *.ts (by name; the format itself is
/// still told by content). Two or more files of the preferred kind (the green and blue
/// models downloaded side by side) are a ConfigError listing them, as is a folder with
/// none. A path that is not a folder is returned as it is. `note` gets one line saying
/// which file was chosen.
std::string resolve_checkpoint_path(const std::string& path, std::string* note = nullptr);

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
  /// Set when the checkpoint argument was a folder: which file was chosen, one line.
  std::string chosen_note;

  const torch::Tensor* find(const std::string& key) const;
  /// Strips "_orig_mod.", drops num_batches_tracked; a key seen twice is a ModelError.
  void add(const std::string& raw_key, const torch::Tensor& tensor);
  /// "ignored: optimizer, epoch, config" ("" when nothing was ignored).
  std::string ignored_summary() const;
};

/// Reads a checkpoint file of any format (or the one resolve_checkpoint_path picks in a
/// folder) without executing anything from it. Throws IoError (missing / unreadable file),
/// ModelError (not a checkpoint, truncated, unsupported content, a refused pickle global,
/// embedded architecture that disagrees with the shapes), naming the file, or ConfigError
/// (a folder with no single candidate).
Checkpoint read_checkpoint(const std::string& path, const ReadOptions& options = {});

/// The architecture fields visible in tensor shapes (widths, depths, stages, MLP ratio,
/// grid, decoder and refiner widths) that differ between `cfg` and the checkpoint's
/// tensors: "" when they agree. num_heads is not visible and not compared.
std::string config_shape_mismatch(const GreenFormerConfig& cfg, const Checkpoint& ckpt);

/// The checkpoint's architecture at img_size (0 = its own), validated; a bad size is a
/// ConfigError naming the checkpoint file.
GreenFormerConfig config_at(const Checkpoint& ckpt, int64_t img_size);

/// Infers the architecture from tensor shapes (embed dim, depths, widths, grid -> img_size).
/// num_heads is not visible in shapes; it comes from the known Hiera family widths, or
/// from `num_heads` when given (> 0).
GreenFormerConfig infer_config(const Checkpoint& ckpt, int64_t num_heads = 0);

/// pos_embed [1, g*g, C] -> [1, new_grid^2, C]: square grid, bicubic, align_corners=False,
/// no antialias (what the reference does when S differs from the training size).
torch::Tensor resize_pos_embed(const torch::Tensor& pos_embed, int64_t new_grid);

/// Loads the checkpoint into the model. Strict: every model parameter / buffer (but
/// num_batches_tracked) must be present with the right shape; unexpected keys are errors.
/// A contiguous tensor already of the parameter's dtype and device becomes the parameter's
/// data (no copy: a mapped safetensors file stays the only copy of the weights); any other
/// is converted once, straight from the file's tensor.
/// pos_embed is resized when its grid differs from the model's. Token-routing weights
/// (ltrm_stage*) are left to TokenRouter::load.
void load_weights(GreenFormerImpl& model, const Checkpoint& ckpt);

/// Convenience: read, build at img_size (0 = the checkpoint's own size) and load.
/// img_size must be a multiple of 32 (ConfigError otherwise).
GreenFormer load_green_former(const std::string& path, int64_t img_size = 0);

}  // namespace corridorkey::model
