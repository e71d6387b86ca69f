// What this build and machine offer: LibTorch version, compiled features, devices.
//
// Thread-safety: every function here may be called from any thread, concurrently.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/options.h>
#include <corridorkey/version.h>

#include <cstdint>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  uint64_t total_memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;
};

/// Which accelerators are usable right now (the input of device selection).
struct DeviceAvailability {
  int cuda_devices = 0;
  bool mps = false;
};

/// What the CPU offers LibTorch's kernels (as ATen detects it).
struct CORRIDORKEY_API CpuFeatures {
  bool avx2 = false, avx512 = false, avx512_bf16 = false, amx = false;
  /// The first processor's /proc/cpuinfo "model name", "cpu family", "model" and
  /// "stepping" (VMs often name only the vendor's brand: family and model tell the
  /// generations apart),
  /// and an FNV-1a hash of its flags line (a VM may hide AMX on the same model). Empty / 0
  /// where there is no /proc/cpuinfo.
  std::string model_name, family, model, stepping;
  uint32_t flags_hash = 0;
  /// "VENDOR MODEL (family F model M stepping S, flags XXXXXXXX)": what benchmarks and the
  /// measured plan's cache key name the CPU by.
  std::string identity() const;
  /// The oneDNN (mkldnn) library LibTorch uses for convolutions and bf16 GEMMs.
  bool onednn = false;
};

struct SystemInfo {
  std::string engine_version;
  std::string torch_version;
  bool cuda_build = false;        // kernels/ and CUDA code paths compiled in
  std::string cuda_runtime;       // LibTorch's CUDA version ("" on CPU-only wheels)
  std::vector<CudaDeviceInfo> cuda;
  bool mps = false;
  int cpu_threads = 0;            // intra-op threads LibTorch will use
  CpuFeatures cpu;
  /// What model_precision auto resolves to on each device of this machine.
  std::string auto_precision_cpu, auto_precision_cuda;
};

CORRIDORKEY_API CpuFeatures cpu_features();

/// model_precision `auto` on a device ("cpu", "cuda:0", "mps"): Float16 on CUDA and MPS
/// (as the reference), BFloat16 on a CPU with AMX or AVX-512 BF16, else Float32. Other
/// precisions are returned unchanged.
CORRIDORKEY_API Precision resolve_precision(Precision requested, const std::string& device);

/// Probes LibTorch for the devices present. Never throws for missing drivers.
CORRIDORKEY_API DeviceAvailability probe_devices();
CORRIDORKEY_API SystemInfo system_info();

/// Resolves a device request against what is available:
///   "auto" -> "cuda:0" if any CUDA device, else "mps", else "cpu";
///   "cuda" / "cuda:N" / "mps" / "cpu" -> itself, or DeviceError naming what is missing.
/// Pure function of its inputs (tests pass faked availability).
CORRIDORKEY_API std::string choose_device(const std::string& request, const DeviceAvailability& available);

CORRIDORKEY_NAMESPACE_END
