// Reading one sample of an ImageView of any pixel type, scaled to 0..1 like the engine does.
#pragma once

#include <corridorkey/image.h>

#include "io/half_float.h"

#include <cstdint>
#include <cstring>

namespace corridorkey::hint {

inline float sample(const ImageView& v, int x, int y, int c) {
  const auto* row = static_cast<const unsigned char*>(v.data) + static_cast<size_t>(y) * v.stride();
  const size_t i = static_cast<size_t>(x) * v.channels + c;
  switch (v.type) {
    case PixelType::UInt8: return row[i] / 255.f;
    case PixelType::UInt16: {
      uint16_t s;
      std::memcpy(&s, row + i * 2, 2);
      return s / 65535.f;
    }
    case PixelType::Float16: {
      uint16_t s;
      std::memcpy(&s, row + i * 2, 2);
      return io::half_to_float(s);
    }
    case PixelType::Float32: {
      float f;
      std::memcpy(&f, row + i * 4, 4);
      return f;
    }
  }
  return 0.f;
}

}  // namespace corridorkey::hint
