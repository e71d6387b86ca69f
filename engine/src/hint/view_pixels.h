// Reading one sample of an ImageView of any pixel type, scaled to 0..1 like the engine does.
#pragma once

#include <corridorkey/image.h>

#include "io/half_float.h"

#include <cstdint>
#include <cstring>

namespace corridorkey::hint {

inline float sample(const ImageView& v, int x, int y, int c) {
  // At the sample's byte offset: any channel, pixel and row stride (image.h), reversed too.
  const auto* p = static_cast<const unsigned char*>(v.at(x, y, c));
  switch (v.type) {
    case PixelType::UInt8: return *p / 255.f;
    case PixelType::UInt16: {
      uint16_t s;
      std::memcpy(&s, p, 2);
      return s / 65535.f;
    }
    case PixelType::Float16: {
      uint16_t s;
      std::memcpy(&s, p, 2);
      return io::half_to_float(s);
    }
    case PixelType::Float32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
  return 0.f;
}

}  // namespace corridorkey::hint
