#include "runtime/memory.h"

#include "runtime/host_blocks.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#ifdef CK_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif
#include <ATen/detail/MPSHooksInterface.h>

#include <atomic>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

namespace corridorkey::detail {
namespace {

// g_peak: peak since the current PeakMemoryScope began; g_interval: since the last
// interval_peak() call (per-stage peaks inside one forward).
std::atomic<uint64_t> g_live{0}, g_peak{0}, g_interval{0};

void raise(std::atomic<uint64_t>& peak, uint64_t now) {
  uint64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}

// Small requests: the same memory source as LibTorch's default CPU allocator (c10::alloc_cpu:
// aligned, and honours its env knobs). Large ones, with the block cache on: host_blocks.h.
// Every request is counted. data == context, as raw_allocate() requires.
std::atomic<bool> g_blocks_on{false};

struct Allocation {
  size_t size;
  bool block;
};
std::mutex g_sizes_mutex;
std::unordered_map<void*, Allocation>& sizes() {
  static auto* m = new std::unordered_map<void*, Allocation>;  // outlives static tensors
  return *m;
}

void counting_free(void* p) {
  if (!p) return;
  Allocation a{0, false};
  {
    std::lock_guard<std::mutex> lock(g_sizes_mutex);
    auto it = sizes().find(p);
    if (it != sizes().end()) {
      a = it->second;
      sizes().erase(it);
    }
  }
  g_live.fetch_sub(a.size);
  if (a.block) host_block_free(p);
  else c10::free_cpu(p);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* data = nullptr;
    bool block = false;
    if (n >= kHostBlockMin && g_blocks_on.load(std::memory_order_relaxed)) {
      data = host_block_alloc(n);
      block = data != nullptr;
    }
    if (!data && n) data = c10::alloc_cpu(n);  // throws on failure, as LibTorch's does
    if (data) {
      std::lock_guard<std::mutex> lock(g_sizes_mutex);
      sizes()[data] = {n, block};
    }
    const uint64_t now = g_live.fetch_add(n) + n;
    raise(g_peak, now);
    raise(g_interval, now);
    return {data, data, &counting_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

uint64_t read_status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k(key);
  while (std::getline(f, line))
    if (line.rfind(k, 0) == 0) return std::stoull(line.substr(k.size())) * 1024;
  return 0;
}

void reset_rss_peak() {
  std::ofstream f("/proc/self/clear_refs");
  if (f) f << "5";  // "5": reset the peak RSS (VmHWM) to the current RSS (Linux >= 4.0)
}

}  // namespace

void set_host_block_cache(bool on) {
  if (on) install_cpu_memory_tracker();
  g_blocks_on.store(on);
  if (!on) host_block_release();
}

void install_cpu_memory_tracker() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator alloc;
    c10::SetCPUAllocator(&alloc, /*priority=*/100);
  });
}

PeakMemoryScope::PeakMemoryScope(const torch::Device& device) : device_(device) {
  host_base_ = g_live.load();
  g_peak.store(host_base_);
  reset_rss_peak();
  rss_base_ = read_status_kib("VmRSS:");
#ifdef CK_WITH_CUDA
  if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
#endif
}

MemoryStats PeakMemoryScope::finish() const {
  MemoryStats m;
  m.host_peak_allocated = g_peak.load() - host_base_;
  const uint64_t hwm = read_status_kib("VmHWM:");
  m.host_peak_rss_growth = hwm > rss_base_ ? hwm - rss_base_ : 0;
#ifdef CK_WITH_CUDA
  if (device_.is_cuda()) {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
    using c10::CachingAllocator::StatType;
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    m.device_peak_allocated = static_cast<uint64_t>(s.allocated_bytes[agg].peak);
    m.device_peak_reserved = static_cast<uint64_t>(s.reserved_bytes[agg].peak);
  }
#endif
  return m;
}

uint64_t live_bytes(const torch::Device& device) {
#ifdef CK_WITH_CUDA
  if (device.is_cuda()) {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<uint64_t>(
        s.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current);
  }
#endif
  return g_live.load();
}

uint64_t interval_peak(const torch::Device& device, uint64_t base) {
  uint64_t peak = 0;
#ifdef CK_WITH_CUDA
  if (device.is_cuda()) {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    peak = static_cast<uint64_t>(
        s.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak);
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return peak > base ? peak - base : 0;
  }
#endif
  peak = g_interval.exchange(g_live.load());
  return peak > base ? peak - base : 0;
}

uint64_t free_memory_bytes(const torch::Device& device) {
#ifdef CK_WITH_CUDA
  if (device.is_cuda()) {
    size_t free = 0, total = 0;
    c10::cuda::CUDAGuard guard(device.index() < 0 ? 0 : device.index());
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    // Blocks LibTorch caches but no tensor uses are free for this process too.
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    const auto cached = stats.reserved_bytes[0].current - stats.allocated_bytes[0].current;
    return static_cast<uint64_t>(free) + static_cast<uint64_t>(std::max<int64_t>(cached, 0));
  }
#endif
  if (device.is_cpu()) {
    std::ifstream f("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit)
      if (key == "MemAvailable:") return kib << 10;
  }
  return 0;
}

void release_free_memory() {
  host_block_release();
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

void empty_device_cache(const torch::Device& device) {
  // CPU: give the C heap's free pages back between stages so one stage's freed activations
  // do not add to the next stage's peak. The block cache stays: it never maps more than the
  // most the process has needed at once (host_blocks.h), and the next frame reuses it.
#ifdef __GLIBC__
  if (device.is_cpu()) ::malloc_trim(0);
#endif
#ifdef CK_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  if (device.is_mps()) at::detail::getMPSHooks().emptyCache();
}

}  // namespace corridorkey::detail
