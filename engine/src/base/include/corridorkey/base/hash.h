// The one 64-bit FNV-1a (http://www.isthe.com/chongo/tech/comp/fnv/): the CPU identity's
// flags hash, a plan file's name, serve's model slot id, review's clip id. Not for secrets:
// a short, stable name for text that is compared in full where it matters.
#pragma once

#include <cstdint>
#include <string_view>

namespace corridorkey::base {

inline constexpr uint64_t kFnv1aOffsetBasis = 14695981039346656037ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

/// FNV-1a over `bytes`, continuing from `h` (the offset basis for a fresh hash).
constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1aOffsetBasis) {
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * kFnv1aPrime;
  return h;
}

}  // namespace corridorkey::base
