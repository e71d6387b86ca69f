#include "runtime/host_blocks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace corridorkey::detail {
namespace {

constexpr size_t kHuge = size_t{2} << 20;  // x86-64 transparent huge page
constexpr size_t kPage = 4096;

struct FreeBlock {
  void* p;
  size_t size;
  uint64_t seq;  // when it was freed: the oldest goes first when room is needed
};

struct Cache {
  std::mutex m;
  std::unordered_map<void*, size_t> live;  // block -> mapped bytes
  std::vector<FreeBlock> free;             // a few dozen at most: linear scans are cheap
  uint64_t seq = 0, live_bytes = 0, cached = 0, high_water = 0, hits = 0, misses = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may be freed during exit
  return *c;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/// `size` bytes at a 2 MiB boundary, so every whole 2 MiB extent of the block can be a huge
/// page (the tail past the last boundary gets small pages: no rounding waste).
void* map_block(size_t size) {
  const size_t span = size + kHuge;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(base, kHuge);
  if (start > base) ::munmap(raw, start - base);
  const uintptr_t end = start + size, raw_end = base + span;
  if (raw_end > end) ::munmap(reinterpret_cast<void*>(end), raw_end - end);
  void* p = reinterpret_cast<void*>(start);
#ifdef MADV_HUGEPAGE
  ::madvise(p, size, MADV_HUGEPAGE);  // THP in "madvise" mode (Debian's default); harmless if off
#endif
  return p;
}

}  // namespace

void* host_block_alloc(size_t n) {
  const size_t size = round_up(std::max<size_t>(n, 1), kPage);
  auto& c = cache();
  std::vector<FreeBlock> victims;
  {
    std::lock_guard<std::mutex> lock(c.m);
    // Smallest cached block that fits with at most 1/8 slack.
    auto best = c.free.end();
    for (auto it = c.free.begin(); it != c.free.end(); ++it)
      if (it->size >= size && it->size - size <= size / 8 && (best == c.free.end() || it->size < best->size))
        best = it;
    if (best != c.free.end()) {
      void* p = best->p;
      c.live[p] = best->size;
      c.live_bytes += best->size;
      c.cached -= best->size;
      c.high_water = std::max(c.high_water, c.live_bytes);
      ++c.hits;
      c.free.erase(best);
      return p;
    }
    ++c.misses;
    // Room first: mapped (live + cached) + size may not pass the most ever needed at once.
    const uint64_t limit = std::max(c.high_water, c.live_bytes + size);
    std::sort(c.free.begin(), c.free.end(), [](const FreeBlock& a, const FreeBlock& b) { return a.seq < b.seq; });
    size_t drop = 0;
    while (drop < c.free.size() && c.live_bytes + c.cached + size > limit) {
      c.cached -= c.free[drop].size;
      victims.push_back(c.free[drop++]);
    }
    c.free.erase(c.free.begin(), c.free.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  for (const auto& v : victims) ::munmap(v.p, v.size);  // outside the lock: freeing pages is slow
  void* p = map_block(size);
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(c.m);
  c.live[p] = size;
  c.live_bytes += size;
  c.high_water = std::max(c.high_water, c.live_bytes);
  return p;
}

void host_block_free(void* p) {
  if (!p) return;
  auto& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  const auto it = c.live.find(p);
  if (it == c.live.end()) return;  // not ours: never happens through the allocator
  c.free.push_back({p, it->second, ++c.seq});
  c.live_bytes -= it->second;
  c.cached += it->second;
  c.live.erase(it);
}

void host_block_release() {
  auto& c = cache();
  std::vector<FreeBlock> victims;
  {
    std::lock_guard<std::mutex> lock(c.m);
    victims.swap(c.free);
    c.cached = 0;
  }
  for (const auto& v : victims) ::munmap(v.p, v.size);
}

HostBlockStats host_block_stats() {
  auto& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  return {c.live_bytes + c.cached, c.cached, c.high_water, c.hits, c.misses};
}

}  // namespace corridorkey::detail
