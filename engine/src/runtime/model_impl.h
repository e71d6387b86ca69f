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
  ModelOptions requested;        // as asked (Model::options())
  EngineSettings planned_for;    // the engine settings its plan was made for
  ModelOptions resolved;         // with the plan applied (the precision the weights have ...)
  EngineSettings resolved_engine;  // planned_for with the plan applied
  std::string key;
  std::string device;
  std::shared_ptr<const detail::PreparedNet> net;  // read-only from here on
  std::string description, arch, notes;
  int64_t img_size = 0, backbone_size = 0, parameters = 0;
  int64_t native_size = 0;  // the checkpoint's own size: what img_size 0 asks for
  // The checkpoint file as it was when loaded: an engine at another size reads its pos_embed
  // again from it (model.cpp engine_on), and refuses a file that changed since.
  std::string file;
  std::uintmax_t file_bytes = 0;
  std::filesystem::file_time_type file_time{};
  TunePlan plan;
};

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {
/// The checkpoint a Model with these options reads: the one named, else the bundled model;
/// empty for random weights. The one place the default is filled in.
std::string checkpoint_to_read(const ModelOptions& options);

/// What an engine with `settings` runs on `model`.
struct EngineOnModel {
  /// The engine's settings with its plan applied: what the runner reads (the weights'
  /// options are the prepared network's, PreparedNet::options).
  EngineSettings settings;
  TunePlan plan;    // the Model's, or this engine's own at another size
  EngineSize size;  // empty at the Model's size
};

/// An engine's way of running on `model`: at the Model's size, the Model's plan (the
/// engine's own explicit Linear / convolution / tiling values win, and the report says so);
/// at another size (settings.img_size, 0 = the checkpoint's own; backbone_size or
/// backbone_percent), its own pos_embed where its encoder grid differs (resized bicubically
/// from the checkpoint's, read again from the file: the values Model::load at that size
/// gives) and its own plan at that size (the precision stays the Model's). ConfigError for a
/// size the checkpoint cannot run at (naming it); ModelError when the file's pos_embed is no
/// longer the one the Model read. One line in `notes` says what the engine holds.
EngineOnModel engine_on(const Model& model, const EngineSettings& settings, std::string& notes);

/// Whether the Model's checkpoint file has another size or modification time than when it
/// was read, or is gone (random weights: never). A host caching Models by key reloads one.
bool checkpoint_changed(const Model::Impl& model);
}  // namespace corridorkey::detail
