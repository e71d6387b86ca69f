// `bench` rows for the PyTorch eager reference (tools/bench_reference.py run in the project
// venv as a subprocess), with the engine's own weights, input, thread count and precision.
#pragma once

#include <corridorkey/bench.h>

#include <vector>

namespace corridorkey::devtools {

/// True for the row names "reference", "reference-5d" and "reference-fast".
bool is_reference_row(const std::string& profile);

/// Runs one reference row. `alpha` / `fg` receive its outputs (planar float, [S,S] and
/// [3,S,S]). ConfigError when the Python or the tools folder cannot be found, ModelError
/// when the script fails (its stderr is in the message).
BenchRow run_reference_row(const BenchOptions& options, const std::string& variant,
                           std::vector<float>& alpha, std::vector<float>& fg);

}  // namespace corridorkey::devtools
