// `bench` rows for the PyTorch eager reference (tools/bench_reference.py run in the project
// venv as a subprocess), with the engine's own weights, input, thread count and precision.
#pragma once

#include <corridorkey/bench.h>

#include <functional>
#include <string>
#include <vector>

namespace corridorkey::devtools {

/// True for the PyTorch-side rows: "reference", "reference-5d", "reference-fast",
/// "reference-upstream", "reference-openvino" and "reference-compile", each alone or with
/// ":precision=P" (float32, bfloat16 or float16).
bool is_reference_row(const std::string& profile);

/// Runs one reference row. `alpha` / `fg` receive its outputs (planar float, [S,S] and
/// [3,S,S]). ConfigError when the Python or the tools folder cannot be found, ModelError
/// when the script fails (its stderr is in the message).
/// `plan_precision` answers the precision the engine's plan picks on this machine; the
/// OpenVINO and torch.compile rows run in it unless their spec names one, so they run bf16
/// where the plan measured bf16 to pay and float32 elsewhere (never decided from CPU flags).
/// A row whose runtime is not installed comes back with `not_installed` set and no outputs.
BenchRow run_reference_row(const BenchOptions& options, const std::string& spec,
                           const std::function<std::string()>& plan_precision,
                           std::vector<float>& alpha, std::vector<float>& fg);

}  // namespace corridorkey::devtools
