#include "runtime/global_switches.h"

#include "config/cpu_limit.h"
#include "config/log.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <mutex>

namespace corridorkey::detail {
void apply_global_switches(const ModelOptions& o, bool uses_cuda, std::string& notes) {
  static std::mutex m;
  static bool applied = false;
  static bool bench = false, tf32 = false;
  std::lock_guard<std::mutex> lock(m);
  // Intra-op threads: the engine asked for a count (0 keeps LibTorch's one per core), at
  // most the CPUs this process may use (a farm slot's cpuset / quota, not the host's cores).
  int threads = o.threads;
  if (const int cap = config::usable_cpus(); threads > cap) {
    note(notes, "threads " + std::to_string(threads) + ": this process may use " + std::to_string(cap) +
                    " CPU(s) (affinity mask and cgroup CPU quota); using " + std::to_string(cap));
    threads = cap;
  }
  if (threads > 0 && at::get_num_threads() != threads) at::set_num_threads(threads);
  if (!applied) {
    bench = !o.disable_cudnn_benchmark;
    tf32 = o.tf32;
    at::globalContext().setBenchmarkCuDNN(bench);
    at::globalContext().setAllowTF32CuBLAS(tf32);
    at::globalContext().setAllowTF32CuDNN(tf32);
    applied = true;
    return;
  }
  if (uses_cuda && (bench != !o.disable_cudnn_benchmark || tf32 != o.tf32))
    note(notes, "cudnn benchmark / tf32 are process-global and were already set by the first "
                "engine (benchmark " + std::string(bench ? "on" : "off") + ", tf32 " +
                    (tf32 ? "on" : "off") + "); this engine's values are not applied");
}

GlobalSwitchGuard::GlobalSwitchGuard()
    : benchmark_(at::globalContext().benchmarkCuDNN()),
      tf32_cublas_(at::globalContext().allowTF32CuBLAS()),
      tf32_cudnn_(at::globalContext().allowTF32CuDNN()) {}

GlobalSwitchGuard::~GlobalSwitchGuard() {
  at::globalContext().setBenchmarkCuDNN(benchmark_);
  at::globalContext().setAllowTF32CuBLAS(tf32_cublas_);
  at::globalContext().setAllowTF32CuDNN(tf32_cudnn_);
}

void GlobalSwitchGuard::disable_tf32() {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

}  // namespace corridorkey::detail
