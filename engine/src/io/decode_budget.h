// The decode budget: the bytes a frame's decoding will hold, told from its header, summed
// over the read workers that decode at once, against the memory this process may still use.
// A 1 KB JPEG whose header declares 16000 x 16000 (under --max-pixels) was decoded in full:
// 35 s and 7.2 GB RSS per read worker. Torch-free.
#pragma once

#include "io/image_header.h"

#include <cstdint>
#include <string>

namespace corridorkey::io {

struct DecodeLimits {
  int64_t max_pixels = kDefaultMaxPixels;
  /// Bytes all read workers together may hold while decoding; 0: no budget.
  int64_t budget_bytes = 0;
  /// Frames decoded at once (the read workers): each may hold a frame's bytes.
  int workers = 1;
  /// Where the budget came from, for the message ("--decode-budget-mb 1000").
  std::string origin;
};

/// Bytes read_image holds at its peak for a file with this header: the decoder's image
/// (channels x bytes per sample), the whole-image buffers the decoder keeps besides it, and
/// the float image it is converted into; an EXR: the float image and its largest chunk.
/// Unknown channels or sample size count as 4 channels of float.
int64_t decode_bytes(const ImageSize& s, uint64_t exr_chunk_bytes = 0);

/// MemAvailable (kB) of a /proc/meminfo text, in bytes; -1 when it has none.
int64_t mem_available_from_meminfo(const std::string& meminfo);

/// What this process may still allocate: MemAvailable, bounded by the free room of its
/// cgroup and every ancestor (v2 memory.max - memory.current, v1 limit - usage); -1 when
/// unknown (no /proc/meminfo).
int64_t available_memory_bytes();

/// The limits of a run: budget_mb > 0 as given, 0 = half of available_memory_bytes() now
/// (the other half is left to pre-processing, the model and the writers); no budget when the
/// available memory is unknown.
DecodeLimits decode_limits(int64_t max_pixels, int64_t budget_mb, int workers);

/// IoError naming the file and the sizes when decode_bytes x workers exceeds the budget.
void check_decode_budget(const std::string& path, const ImageSize& s, uint64_t exr_chunk_bytes,
                         const DecodeLimits& limits);

}  // namespace corridorkey::io
