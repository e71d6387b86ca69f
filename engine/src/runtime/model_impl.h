// Model's private state: the prepared network every engine made from the Model runs.
#pragma once

#include <corridorkey/model.h>

#include "runtime/model_runner.h"

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
  TunePlan plan;
};

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::detail {
/// The options an engine on `model` runs with: the Model's fields as the Model resolved them
/// (the measured plan's precision and kernels); the engine's own fields from `asked`, except
/// where `asked` holds what the Model was loaded with, which the plan may have resolved
/// (tiled_refiner auto). ConfigError when `asked` has another model_key.
EngineOptions engine_options_on(const Model& model, const EngineOptions& asked);
}  // namespace corridorkey::detail
