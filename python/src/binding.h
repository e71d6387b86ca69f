// What the two translation units of the Python module share: the objects Python holds and
// how option values and errors cross the boundary. Only the engine's public API (no
// LibTorch): the module links libcorridorkey_engine.so as any other host does.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/model.h>
#include <corridorkey/options.h>

#include <nanobind/nanobind.h>

#include <memory>
#include <mutex>
#include <string>

namespace corridorkey::python {

namespace nb = nanobind;

/// corridorkey.Model: the loaded weights and the options they were loaded with (the profile
/// and overrides that engines start from).
struct PyModel {
  std::shared_ptr<const Model> model;
  EngineOptions options;
};

/// corridorkey.Engine: an engine on a Model. Calls on one engine are serialised (the engine
/// is not re-entrant); engines of one Model key concurrently.
struct PyEngine {
  std::unique_ptr<BaseEngine> engine;
  std::mutex busy;
};

/// A Python value as the CLI writes it: True/False as true/false, a list or tuple joined
/// by commas (outputs=("matte", "comp")), anything else as str().
std::string option_text(nb::handle value);

/// Sets `key` of `options` from a keyword argument (the CLI's keys and units: despill 0-10),
/// ConfigError naming the key when it is not an option or the value is refused.
void set_option(EngineOptions& options, const std::string& key, nb::handle value);

/// Registers process_frame on corridorkey.Engine (frames.cpp).
void bind_frames(nb::class_<PyEngine>& engine);

}  // namespace corridorkey::python
