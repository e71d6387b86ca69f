// POSIX shared-memory images for `serve`: a host that holds pixels in memory names a block
// (shm_open name) and states its layout; the server maps it for the call only.
//
//   {"shm": "/nuke-plate-7", "width": 1920, "height": 1080, "channels": 3,
//    "type": "float32", "stride": 23040}
//
// type: uint8 | uint16 | float16 | float32; stride: bytes per row (0 or absent: packed).
// The client owns the block (creates, sizes, unlinks it). The server checks that the
// block holds stride * height bytes before touching it, maps it only inside the request,
// and keeps no reference afterwards.
#pragma once

#include <corridorkey/image.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace corridorkey::serve {

/// The largest block a layout may describe (64 GiB): 16-bit sizes times any stride below
/// it cannot overflow 64 bits.
constexpr std::size_t kMaxShmBytes = std::size_t{64} << 30;

struct ShmImage {
  std::string name;
  int width = 0, height = 0, channels = 0;
  std::string type = "float32";
  std::size_t stride = 0;  // bytes per row; 0 = packed

  std::size_t sample_bytes() const;
  std::size_t row_bytes() const { return stride ? stride : static_cast<std::size_t>(width) * channels * sample_bytes(); }
  /// stride * height; parse_shm refuses layouts where it would pass kMaxShmBytes, so this
  /// cannot wrap.
  std::size_t bytes() const { return row_bytes() * static_cast<std::size_t>(height); }
};

/// Parses and checks the object (`what` names it in errors: "frame.key: plate").
ShmImage parse_shm(const nlohmann::json& j, const std::string& what);

/// Maps the block read-only and converts it to float (integers scaled to 0..1).
Image read_shm(const ShmImage& s, const std::string& what);
/// Maps the block read-write and stores `image` (same width, height, channels) in its type:
/// integers clamped to 0..1 and rounded, float16 rounded to nearest even.
void write_shm(const ShmImage& s, const Image& image, const std::string& what);

/// Opens and maps the block as write_shm would (IoError if it is missing or too small)
/// without writing: outputs are checked before any of them is written.
void check_shm(const ShmImage& s, const std::string& what);


}  // namespace corridorkey::serve
