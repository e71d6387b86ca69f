// Peak-memory measurement per engine call.
//  - CPU: a counting wrapper around LibTorch's CPU allocator (bytes live, peak since reset)
//    plus the process's peak RSS (VmHWM, reset through /proc/self/clear_refs), which also
//    sees oneDNN scratch buffers that bypass the allocator.
//  - CUDA: the caching allocator's peak allocated / reserved bytes.
#pragma once

#include <corridorkey/engine.h>

#include <torch/types.h>

namespace corridorkey::detail {

/// Installs the counting CPU allocator (idempotent, process-wide).
void install_cpu_memory_tracker();
/// Large CPU tensors from the block cache (host_blocks.h: huge pages, reused between frames)
/// or from LibTorch's allocator. Process-wide: each engine applies its options' value when
/// it is built; results are bit-identical either way (only where the bytes live changes).
/// Off also unmaps the cached blocks.
void set_host_block_cache(bool on);

class PeakMemoryScope {
 public:
  explicit PeakMemoryScope(const torch::Device& device);  // resets peaks
  MemoryStats finish() const;                             // peaks since construction

 private:
  torch::Device device_;
  uint64_t host_base_ = 0, rss_base_ = 0;
};

/// Peak bytes allocated on `device` since the last call (or since the scope started),
/// above `base`; then starts a new interval. For per-stage peaks inside one forward.
uint64_t interval_peak(const torch::Device& device, uint64_t base);
/// Bytes currently allocated on `device` (LibTorch allocators).
uint64_t live_bytes(const torch::Device& device);

/// Memory free for new allocations on `device` now: CUDA free device memory, CPU
/// MemAvailable from /proc/meminfo (0 when unknown: callers then take the safe path).
uint64_t free_memory_bytes(const torch::Device& device);

/// Unmaps the block cache's free blocks and returns the C heap's free pages to the OS
/// (glibc malloc_trim).
void release_free_memory();

/// Releases cached allocator blocks on `device` (CUDA caching allocator, MPS heap).
void empty_device_cache(const torch::Device& device);

}  // namespace corridorkey::detail
