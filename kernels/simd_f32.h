#pragma once
// The float32 vector ISAs the CPU kernels are written over: one traits type per ISA (AVX2,
// AVX-512), so a kernel's body is written once (an .inc included per variant) and each
// variant differs only in vector width, masks and horizontal reductions.
//
// Every function carries its ISA's target attribute and runs only after the CPU checks
// below, in a process whose kernels pick their variant at run time: the rest of the build
// stays baseline x86-64.

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#define CK_HAVE_X86 1
#define CK_AVX2 __attribute__((target("avx2,fma")))
// AVX-512 F with VL and DQ: every AVX-512 CPU since Skylake-SP has all three.
#define CK_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))

namespace corridorkey::kernels::simd {

inline bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
inline bool cpu_has_avx512() {
  return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

// The operations both ISAs spell alike but for the intrinsics' prefix, defined once.
#define CK_SIMD_F32_COMMON(TARGET, PFX, VEC)                                        \
  using V = VEC;                                                                    \
  TARGET static V load(const float* p) { return PFX##_loadu_ps(p); }               \
  TARGET static void store(float* p, V v) { PFX##_storeu_ps(p, v); }                \
  TARGET static V zero() { return PFX##_setzero_ps(); }                             \
  TARGET static V set1(float x) { return PFX##_set1_ps(x); }                        \
  TARGET static V add(V a, V b) { return PFX##_add_ps(a, b); }                      \
  TARGET static V sub(V a, V b) { return PFX##_sub_ps(a, b); }                      \
  TARGET static V mul(V a, V b) { return PFX##_mul_ps(a, b); }                      \
  TARGET static V max(V a, V b) { return PFX##_max_ps(a, b); }                      \
  TARGET static V fma(V a, V b, V c) { return PFX##_fmadd_ps(a, b, c); } /* ab+c */ \
  TARGET static V fms(V a, V b, V c) { return PFX##_fmsub_ps(a, b, c); } /* ab-c */

struct Avx2 {
  CK_SIMD_F32_COMMON(CK_AVX2, _mm256, __m256)
  using Mask = __m256;  // lanes all ones or all zeros
  static constexpr int W = 8;
  CK_AVX2 static V round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  /// 2^n for whole n in [-126, 127], through the exponent field.
  CK_AVX2 static V pow2(V n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  /// Lanes [0, n) set, n any integer: 8 lanes of a table of 8 set and 8 clear lanes. A load
  /// rather than a compare against a lane-index constant, which GCC kept in a register through
  /// a whole attention kernel, leaving its P V tile one short (4% slower).
  CK_AVX2 static Mask below(int64_t n) {
    alignas(64) static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_ps(reinterpret_cast<const float*>(kLanes + W - std::clamp<int64_t>(n, 0, W)));
  }
  CK_AVX2 static V keep(Mask m, V v, V fill) { return _mm256_blendv_ps(fill, v, m); }  // v where m
  CK_AVX2 static V zero_unless(Mask m, V v) { return _mm256_and_ps(v, m); }
  // A row's last vector. The kernels over this type take rows of whole 8-lane vectors (the
  // attention kernel's d is a multiple of 8), so a tail is always whole and needs no mask.
  CK_AVX2 static V load_tail(Mask, const float* p) { return _mm256_loadu_ps(p); }
  CK_AVX2 static void store_tail(float* p, Mask, V v) { _mm256_storeu_ps(p, v); }
  CK_AVX2 static float reduce_add(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  CK_AVX2 static float reduce_max(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

struct Avx512 {
  CK_SIMD_F32_COMMON(CK_AVX512, _mm512, __m512)
  using Mask = __mmask16;
  static constexpr int W = 16;
  CK_AVX512 static V round(V x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  CK_AVX512 static V pow2(V n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static Mask below(int64_t n) {
    return n >= 16 ? static_cast<Mask>(0xFFFF) : n <= 0 ? static_cast<Mask>(0) : static_cast<Mask>((1u << n) - 1);
  }
  CK_AVX512 static V keep(Mask m, V v, V fill) { return _mm512_mask_mov_ps(fill, m, v); }
  CK_AVX512 static V zero_unless(Mask m, V v) { return _mm512_maskz_mov_ps(m, v); }
  CK_AVX512 static V load_tail(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  CK_AVX512 static void store_tail(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  CK_AVX512 static float reduce_add(V v) { return _mm512_reduce_add_ps(v); }
  CK_AVX512 static float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
};

#undef CK_SIMD_F32_COMMON

}  // namespace corridorkey::kernels::simd

#endif
