// Where the bundled data lives (profiles/, checkpoints/, tools/): found from the location of
// the binary that holds this code, so an installed prefix may be moved and a Python wheel may
// carry the library and its data inside site-packages. Nothing here is fixed at build time.
#pragma once

#include <filesystem>

namespace corridorkey::config {

/// The shared library (libcorridorkey_engine.so) or executable this code was linked into,
/// symlinks resolved; empty when it cannot be told.
std::filesystem::path module_path();

/// The data folder, the first that applies:
///   1. $CORRIDORKEY_DATA_DIR;
///   2. a build tree: the source tree named by the file `corridorkey-build-tree` next to the
///      binary (CMake writes it beside the library, the CLI and the tests; `cmake --install`
///      never copies it, so an installed binary never reads the build machine's sources);
///   3. an install: <binary's folder>/../share/corridorkey (bin/ and lib/ are siblings of share/).
/// The third is returned when nothing is found there either, so messages name the place
/// that was looked in.
std::filesystem::path data_dir();

/// <data_dir>/tools: the Python scripts `bench --profile reference` runs.
std::filesystem::path tools_dir();

}  // namespace corridorkey::config
