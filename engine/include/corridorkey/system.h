// What this build and machine offer: LibTorch version, compiled features, devices.
#pragma once

#include <corridorkey/export.h>
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

struct SystemInfo {
  std::string engine_version;
  std::string torch_version;
  bool cuda_build = false;        // kernels/ and CUDA code paths compiled in
  std::string cuda_runtime;       // LibTorch's CUDA version ("" on CPU-only wheels)
  std::vector<CudaDeviceInfo> cuda;
  bool mps = false;
  int cpu_threads = 0;            // intra-op threads LibTorch will use
};

/// Probes LibTorch for the devices present. Never throws for missing drivers.
CORRIDORKEY_API DeviceAvailability probe_devices();
CORRIDORKEY_API SystemInfo system_info();

/// Resolves a device request against what is available:
///   "auto" -> "cuda:0" if any CUDA device, else "mps", else "cpu";
///   "cuda" / "cuda:N" / "mps" / "cpu" -> itself, or DeviceError naming what is missing.
/// Pure function of its inputs (tests pass faked availability).
CORRIDORKEY_API std::string choose_device(const std::string& request, const DeviceAvailability& available);

CORRIDORKEY_NAMESPACE_END
