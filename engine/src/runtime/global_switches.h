// LibTorch's process-global switches (cudnn.benchmark, TF32): applied once by the first
// engine, and restored by a scope guard where a tool changes them for a while (verify).
#pragma once

#include <corridorkey/options.h>

#include <string>

namespace corridorkey::detail {

/// Applies cudnn.benchmark and TF32 once per process (they are process-global in
/// LibTorch); a later CUDA engine asking for different values gets a note instead (they
/// do nothing on CPU / MPS).
void apply_global_switches(const ModelOptions& options, bool uses_cuda, std::string& notes);

/// Saves the switches on construction and restores them on destruction.
class GlobalSwitchGuard {
 public:
  GlobalSwitchGuard();
  ~GlobalSwitchGuard();
  GlobalSwitchGuard(const GlobalSwitchGuard&) = delete;
  GlobalSwitchGuard& operator=(const GlobalSwitchGuard&) = delete;

  /// Exact fp32 on CUDA (TF32 changes fp32 results by ~1e-3): for parity checks.
  void disable_tf32();

 private:
  bool benchmark_, tf32_cublas_, tf32_cudnn_;
};

}  // namespace corridorkey::detail
