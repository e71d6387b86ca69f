// The one 64-bit FNV-1a (http://www.isthe.com/chongo/tech/comp/fnv/): the CPU identity's
// flags hash, a plan file's name, serve's model slot id, review's clip id. Not for secrets:
// a short, stable name for text that is compared in full where it matters.
#pragma once

#include <cstdint>
#include <string_view>

namespace corridorkey::base {

// The published 64-bit offset basis and prime. In hex: a decimal copy of the basis once lost
// its last digit, and every CPU identity and plan file name made with it changed when it
// was corrected (plan cache version 2).
inline constexpr uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;

/// FNV-1a over `bytes`, continuing from `h` (the offset basis for a fresh hash).
constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1aOffsetBasis) {
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * kFnv1aPrime;
  return h;
}

// The reference implementation's test vectors: a wrong basis or prime does not compile.
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cull && fnv1a64("foobar") == 0x85944171f73967e8ull);

}  // namespace corridorkey::base
