// PyTorch files read without running any of their code: torch.save zip archives, the legacy
// (non-zip, `_use_new_zipfile_serialization=False`) stream, and TorchScript archives, whose
// data.pkl is read with the same restricted unpickler (torch_pickle.h) instead of
// torch::jit::load. Storages become at::Storage once per key; tensors are views into them.
#pragma once

#include "torch_pickle.h"

#include <string>
#include <utility>
#include <vector>

namespace corridorkey::model {

enum class ArchiveFormat { Zip, Legacy, TorchScript };

struct TorchArchive {
  std::string path;
  ArchiveFormat format = ArchiveFormat::Zip;
  /// The unpickled object: torch.save's object, or a TorchScript archive's module object.
  pickle::Pickle data;
  /// TorchScript archives: the extra/config.json record ("" when absent).
  std::string config_json;
};

/// Reads any of the three formats. ModelError naming the file for anything that is not a
/// well-formed PyTorch file (truncated, corrupt, big-endian, refused globals); IoError when
/// the file cannot be read.
TorchArchive read_torch_archive(const std::string& path);

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// The entries of a dict of tensors, in file order. ModelError (prefixed by `what`) when it
/// is not a dict, a key is not a str or a value is not a tensor.
NamedTensors tensor_entries(const pickle::Value& dict, const std::string& what);

/// The tensors of a TorchScript module object by dotted attribute path
/// ("encoder.model.pos_embed"), depth first in attribute order. Non-tensor attributes
/// (training flags, ints, strings) and objects whose state is not an attribute dict (a
/// custom __getstate__) are skipped.
NamedTensors module_tensors(const pickle::Value& module, const std::string& what);

/// Reads a torch.save'd dict of tensors (test fixtures, tools): tensor_entries of the root.
NamedTensors load_tensor_dict(const std::string& path);

}  // namespace corridorkey::model
