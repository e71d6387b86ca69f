// Large host blocks for LibTorch's CPU tensors: mapped with transparent huge pages and kept
// for reuse between forwards.
//
// Why: glibc serves every allocation above 32 MiB (its largest mmap threshold) with a fresh
// mmap, and LibTorch's CPU allocator keeps nothing. At img_size 1024 a float32 frame makes
// hundreds of such tensors (a refiner map is 1024^2 x 64 x 4 B = 256 MiB), so each frame
// faulted in and zeroed its whole working set again, 4 KiB at a time: 3.58 M page faults for
// four frames, 20% of the run in the kernel (AMD EPYC Zen 3 VM, docs/performance.md). Huge pages alone
// (THP "always" as a test) made the frame 10% faster (13.62 -> 12.27 s).
//
// Memory rule: the cache never makes the process map more than the most it has needed at
// once. A request that no cached block fits first unmaps cached blocks (least recently freed
// first) until the mapping fits under that high-water mark, so peak RSS stays the peak of
// live tensors (plus at most 1/8 + 2 MiB of slack per reused block).
#pragma once

#include <cstddef>
#include <cstdint>

namespace corridorkey::detail {

/// Requests at or above this go through the block cache (when on); smaller ones stay with
/// the C heap, which already reuses its own free chunks.
constexpr size_t kHostBlockMin = size_t{1} << 20;

/// A block of at least n bytes (64-byte aligned, 2 MiB aligned in practice), reused or newly
/// mapped with MADV_HUGEPAGE; nullptr when the mapping fails. Thread-safe.
void* host_block_alloc(size_t n);
/// Returns a block from host_block_alloc to the cache. Thread-safe.
void host_block_free(void* p);
/// Unmaps every cached (free) block. Thread-safe.
void host_block_release();

struct HostBlockStats {
  uint64_t mapped = 0;   // bytes mapped now (live + cached)
  uint64_t cached = 0;   // bytes in free blocks
  uint64_t high_water = 0;  // the most bytes live at once in blocks, so far
  uint64_t hits = 0, misses = 0;
};
HostBlockStats host_block_stats();

}  // namespace corridorkey::detail
