// Model's private state: the prepared network every engine made from the Model runs.
#pragma once

#include <corridorkey/model.h>

#include "runtime/model_runner.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

struct Model::Impl {
  EngineOptions requested;  // as asked (Model::options())
  std::string key;
  std::string device;
  std::shared_ptr<const detail::PreparedNet> net;  // read-only from here on
  std::string description, arch, notes;
  int64_t img_size = 0, backbone_size = 0, parameters = 0;
  int64_t native_size = 0;  // the checkpoint's own size: what img_size 0 asks for
  // The checkpoint file as it was when loaded: an engine at another size reads its pos_embed
  // again from it (model.cpp engine_size_on), and refuses a file that changed since.
  std::string file;
  bool mmap = true;
  std::uintmax_t file_bytes = 0;
  std::filesystem::file_time_type file_time{};
  TunePlan plan;
};

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {
/// The options an engine on `model` runs with: the Model's fields as the Model resolved them
/// (the measured plan's precision and kernels); the engine's own fields from `asked`, except
/// where `asked` holds what the Model was loaded with, which the plan may have resolved
/// (tiled_refiner auto). ConfigError when `asked` has another model_key.
EngineOptions engine_options_on(const Model& model, const EngineOptions& asked);

/// An engine's size on `model` (run_opt.img_size, 0 = the checkpoint's own; backbone_size or
/// backbone_percent): nothing when it is the Model's. Else the size, the engine's own
/// pos_embed where its encoder grid differs (resized bicubically from the checkpoint's,
/// read again from the file, as Model::load at that size resizes it: the same values), and
/// the attention kernels per stage from the plan at this size (`plan`; the precision stays
/// the Model's). run_opt.tiled_refiner gets the plan's choice at this size. ConfigError for
/// a size the checkpoint cannot run at (naming it); ModelError when the file's pos_embed is
/// no longer the one the Model read. One line in `notes` says what the engine holds.
EngineSize engine_size_on(const Model& model, EngineOptions& run_opt, const EngineOptions& asked,
                          TunePlan& plan, std::string& notes);

/// Whether the Model's checkpoint file has another size or modification time than when it
/// was read, or is gone (random weights: never). A host caching Models by key reloads one.
bool checkpoint_changed(const Model::Impl& model);
}  // namespace corridorkey::detail
