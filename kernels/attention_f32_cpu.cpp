#include "attention_f32_cpu.h"
#include "flush_denormals.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CK_HAVE_X86 1
// Only these functions use AVX2 / FMA; they run only after the CPU check below.
#define CK_AVX2 __attribute__((target("avx2,fma")))
// The 16-lane variant: the same algorithm, tiles and numerics on zmm registers.
#define CK_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))
#endif

namespace corridorkey::kernels {
namespace {

// Tiles. A task owns up to kMq query rows of one problem and walks the keys in blocks of
// kKb. Its scores (kMq x kKb x 4 B = 48 KiB), output rows (kMq x d x 4 B = 21 KiB at d 56)
// and the key block (packed K and V rows, 2 x 28 KiB at d 56) stay in the 512 KiB L2 of a
// Zen 3 core; a micro-tile's V rows (kKb x 32 dims x 4 B = 16 KiB) stay in its 32 KiB L1.
constexpr int64_t kMq = 96;   // query rows per task (a multiple of 3, 4 and 6)
constexpr int64_t kKb = 128;  // keys per block (a multiple of kNr)
constexpr int64_t kNr = 16;   // keys per packed group: two ymm registers
constexpr int kMr = 6;        // query rows per q k^T micro-tile: 6 x 2 accumulators

#ifdef CK_HAVE_X86

/// 2^x by 2^n 2^f with n = round(x), f in [-0.5, 0.5] and 2^f by its degree-7 Taylor
/// polynomial in f ln 2 (truncation <= 5e-9 relative: within 1-2 ulp of exp2f). Arguments
/// below -126 give 2^-126, the smallest normal float: a probability that small next to the
/// row's largest, 1, changes no sum. The softmax's scale and log2(e) fold into one FMA
/// before it, so the exp costs no Cody-Waite reduction.
/// Taylor coefficients of 2^f = e^(f ln 2), highest degree first (Horner), shared by both
/// variants so they compute the same probabilities.
constexpr float kExp2Poly[8] = {1.5252733804059841e-05f, 1.5403530393381609e-04f, 1.3333558146428443e-03f,
                                9.6181291076284772e-03f, 5.5504108664821580e-02f, 2.4022650695910071e-01f,
                                6.9314718055994531e-01f, 1.0f};

CK_AVX2 inline __m256 exp2_ps(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(kExp2Poly[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

CK_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

CK_AVX2 inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Lanes [0, n) set, n in 0..8.
CK_AVX2 inline __m256 lanes_below(int64_t n) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), iota));
}

/// K rows [0, nk) (row stride s_seq) -> groups of kNr keys, each [d][kNr]: row t of a group
/// is two ymm loads holding dimension t of 16 keys. Keys past nk are zero.
void pack_k(const float* k, int64_t s_seq, int64_t nk, int64_t d, float* out) {
  const int64_t groups = (nk + kNr - 1) / kNr;
  for (int64_t g = 0; g < groups; ++g) {
    float* dst = out + g * d * kNr;
    for (int64_t j = 0; j < kNr; ++j) {
      const int64_t key = g * kNr + j;
      if (key < nk) {
        const float* src = k + key * s_seq;
        for (int64_t t = 0; t < d; ++t) dst[t * kNr + j] = src[t];
      } else {
        for (int64_t t = 0; t < d; ++t) dst[t * kNr + j] = 0.f;
      }
    }
  }
}

/// Rows [0, n) of a strided [n, d] matrix -> contiguous. Hiera's q, k and v rows lie
/// 3 * heads * d floats apart in qkv (5.4 KiB at stage 3): a 128-key block of V read in
/// place touches 168 pages and one cache set in four, read contiguously it is 28 KiB of L1.
void pack_rows(const float* src, int64_t s_seq, int64_t n, int64_t d, float* out) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * d, src + i * s_seq, sizeof(float) * static_cast<size_t>(d));
}

/// S[r][0..16) = q_r . k_j for kMr query rows (pointers; duplicates allowed) and one group
/// of keys, of which the first `live` are real; folds the real scores into each row's
/// running maximum vmax[r] (8 lanes), so the softmax needs no separate pass for it.
CK_AVX2 inline void qk_tile(const float* const* q, const float* kg, int64_t d, float* const* s,
                            float* const* vmax, int64_t live) {
  __m256 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t t = 0; t < d; ++t) {
    const __m256 b0 = _mm256_loadu_ps(kg + t * kNr);
    const __m256 b1 = _mm256_loadu_ps(kg + t * kNr + 8);
    for (int r = 0; r < kMr; ++r) {
      const __m256 a = _mm256_broadcast_ss(q[r] + t);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256 m0 = lanes_below(live);  // all lanes when live >= 8
  const __m256 m1 = lanes_below(live - 8);
  for (int r = 0; r < kMr; ++r) {
    _mm256_storeu_ps(s[r], acc[r][0]);
    _mm256_storeu_ps(s[r] + 8, acc[r][1]);
    __m256 mx = _mm256_max_ps(_mm256_blendv_ps(ninf, acc[r][0], m0), _mm256_blendv_ps(ninf, acc[r][1], m1));
    _mm256_storeu_ps(vmax[r], _mm256_max_ps(_mm256_loadu_ps(vmax[r]), mx));
  }
}

/// O[r][c0 .. c0 + 8 NV) += sum over keys j < kb of P[r][j] V[j] for R rows (pointers;
/// duplicates allowed: a duplicate computes and stores the same values).
template <int R, int NV>
CK_AVX2 inline void pv_tile(const float* const* p, const float* v, int64_t s_seq, int64_t kb,
                            float* const* o, int64_t c0) {
  __m256 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int z = 0; z < NV; ++z) acc[r][z] = _mm256_loadu_ps(o[r] + c0 + 8 * z);
  for (int64_t j = 0; j < kb; ++j) {
    const float* vj = v + j * s_seq + c0;
    __m256 b[NV];
    for (int z = 0; z < NV; ++z) b[z] = _mm256_loadu_ps(vj + 8 * z);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(p[r] + j);
      for (int z = 0; z < NV; ++z) acc[r][z] = _mm256_fmadd_ps(a, b[z], acc[r][z]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int z = 0; z < NV; ++z) _mm256_storeu_ps(o[r] + c0 + 8 * z, acc[r][z]);
}

/// Rows [0, rows) of O (row stride ldo) += P V, in chunks of up to 4 vectors (32 dims),
/// each with as many rows as keep 12 accumulators in registers.
template <int R, int NV>
CK_AVX2 void pv_chunk(const float* p, int64_t ldp, const float* v, int64_t s_seq, int64_t kb,
                      float* o, int64_t ldo, int64_t rows, int64_t c0) {
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const float* pr[R];
    float* orow[R];
    for (int r = 0; r < R; ++r) {
      const int64_t row = std::min<int64_t>(r0 + r, rows - 1);
      pr[r] = p + row * ldp;
      orow[r] = o + row * ldo;
    }
    pv_tile<R, NV>(pr, v, s_seq, kb, orow, c0);
  }
}

CK_AVX2 void pv_rows(const float* p, int64_t ldp, const float* v, int64_t s_seq, int64_t kb,
                     float* o, int64_t ldo, int64_t rows, int64_t d) {
  int64_t c0 = 0;
  for (; c0 + 32 <= d; c0 += 32) pv_chunk<3, 4>(p, ldp, v, s_seq, kb, o, ldo, rows, c0);
  switch ((d - c0) / 8) {
    case 3: pv_chunk<4, 3>(p, ldp, v, s_seq, kb, o, ldo, rows, c0); break;
    case 2: pv_chunk<6, 2>(p, ldp, v, s_seq, kb, o, ldo, rows, c0); break;
    case 1: pv_chunk<6, 1>(p, ldp, v, s_seq, kb, o, ldo, rows, c0); break;
    default: break;
  }
}

/// Online-softmax step for one query row and a block of raw scores s[0..kbp) of which the
/// first `valid` are real keys, whose maximum qk_tile gathered in vmax: turns them into
/// probabilities in place (0 past `valid`), rescales the row's output if its running max m
/// moved, and updates the running sum l. m is kept in log2 units (scaled scores times
/// log2 e), so each probability is one FMA and an exp2.
CK_AVX2 void softmax_row(float* s, int64_t kbp, int64_t valid, float scale2, __m256 vmax, float& m,
                         float& l, float* o, int64_t d) {
  const float m_new = std::max(m, hmax(vmax) * scale2);
  const float alpha = m == -std::numeric_limits<float>::infinity() ? 0.f : std::exp2(m - m_new);
  const __m256 mv = _mm256_set1_ps(m_new), sc = _mm256_set1_ps(scale2);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < kbp; j += 8) {
    __m256 e = exp2_ps(_mm256_fmsub_ps(_mm256_loadu_ps(s + j), sc, mv));
    if (j + 8 > valid) e = _mm256_and_ps(e, lanes_below(valid - j));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  l = l * alpha + hsum(sum);
  m = m_new;
  if (alpha != 1.0f) {
    const __m256 av = _mm256_set1_ps(alpha);
    for (int64_t t = 0; t < d; t += 8) _mm256_storeu_ps(o + t, _mm256_mul_ps(_mm256_loadu_ps(o + t), av));
  }
}

struct Scratch {
  std::vector<float> s, o, q, kp, v;
  std::vector<float> m, l;
  std::vector<float> vmax;  // 8 (AVX2) or 16 (AVX-512) lanes per row: the maximum of its raw scores
};

/// Query rows [i0, i1) of one problem (q rows qs apart); kp: its packed keys; v: its values,
/// contiguous [nk, d].
CK_AVX2 void attend(const float* q_in, int64_t qs, const float* kp, const float* v, float* out,
                    int64_t os, int64_t i0, int64_t i1, int64_t nk, int64_t d, float scale,
                    Scratch& w) {
  const float scale2 = scale * 1.44269504088896341f;  // scores -> log2 units
  const int64_t rows = i1 - i0, vs = d;
  w.q.resize(static_cast<size_t>(kMq * d));
  pack_rows(q_in + i0 * qs, qs, rows, d, w.q.data());
  const float* q = w.q.data();
  w.s.resize(static_cast<size_t>(kMq * kKb));
  w.o.assign(static_cast<size_t>(rows * d), 0.f);
  w.m.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  w.l.assign(static_cast<size_t>(rows), 0.f);
  float* s = w.s.data();
  float* o = w.o.data();
  for (int64_t k0 = 0; k0 < nk; k0 += kKb) {
    const int64_t valid = std::min(kKb, nk - k0), kbp = (valid + kNr - 1) / kNr * kNr;
    w.vmax.assign(static_cast<size_t>(rows * 8), -std::numeric_limits<float>::infinity());
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const float* qr[kMr];
      float* sr[kMr];
      float* vm[kMr];
      for (int r = 0; r < kMr; ++r) {
        const int64_t row = std::min<int64_t>(r0 + r, rows - 1);
        qr[r] = q + row * d;
        sr[r] = s + row * kKb;
        vm[r] = w.vmax.data() + row * 8;
      }
      for (int64_t g = 0; g < kbp / kNr; ++g) {
        float* sg[kMr];
        for (int r = 0; r < kMr; ++r) sg[r] = sr[r] + g * kNr;
        qk_tile(qr, kp + (k0 / kNr + g) * d * kNr, d, sg, vm, valid - g * kNr);
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      softmax_row(s + r * kKb, kbp, valid, scale2, _mm256_loadu_ps(w.vmax.data() + r * 8),
                  w.m[static_cast<size_t>(r)], w.l[static_cast<size_t>(r)], o + r * d, d);
    pv_rows(s, kKb, v + k0 * vs, vs, valid, o, d, rows, d);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const __m256 inv = _mm256_set1_ps(1.0f / w.l[static_cast<size_t>(r)]);
    float* dst = out + (i0 + r) * os;
    for (int64_t t = 0; t < d; t += 8)
      _mm256_storeu_ps(dst + t, _mm256_mul_ps(_mm256_loadu_ps(o + r * d + t), inv));
  }
}

// ---- AVX-512: 16 lanes, 32 registers ------------------------------------------------------
// Same packed keys (groups of 16 keys = one zmm per dimension), same online softmax and the
// same polynomial; the q k^T micro-tile is 12 rows x 32 keys (24 accumulators) and a P V
// micro-tile up to 64 output dimensions, the last vector masked (d 56 = 3 x 16 + 8).

constexpr int kMr512 = 12;  // query rows per q k^T micro-tile

// GCC 12's own avx512fintrin.h passes `_mm512_undefined_ps()` (`__m512 __Y = __Y;`) as the
// unused merge source of unmasked ops, which -Wmaybe-uninitialized reports at every inlined
// call (GCC bug 105593); nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

CK_AVX512 inline __m512 exp2_ps512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(kExp2Poly[0]);
  for (int i = 1; i < 8; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[i]));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/// Lanes [0, n) of 16, n any integer.
inline __mmask16 mask16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << n) - 1);
}

/// S[r][0 .. 16 G) = q_r . k_j for kMr512 rows and G (1 or 2) consecutive key groups, of which
/// the first `live` keys are real; folds the real scores into vmax[r] (16 lanes).
template <int G>
CK_AVX512 inline void qk_tile512(const float* const* q, const float* kg, int64_t d, float* const* s,
                                 float* const* vmax, int64_t live) {
  __m512 acc[kMr512][G];
  for (int r = 0; r < kMr512; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t t = 0; t < d; ++t) {
    __m512 b[G];
    for (int g = 0; g < G; ++g) b[g] = _mm512_loadu_ps(kg + g * d * kNr + t * kNr);
    for (int r = 0; r < kMr512; ++r) {
      const __m512 a = _mm512_set1_ps(q[r][t]);
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(a, b[g], acc[r][g]);
    }
  }
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int r = 0; r < kMr512; ++r) {
    __m512 mx = _mm512_loadu_ps(vmax[r]);
    for (int g = 0; g < G; ++g) {
      _mm512_storeu_ps(s[r] + g * kNr, acc[r][g]);
      mx = _mm512_max_ps(mx, _mm512_mask_mov_ps(ninf, mask16(live - 16 * g), acc[r][g]));
    }
    _mm512_storeu_ps(vmax[r], mx);
  }
}

/// O[r][c0 .. c0 + 16 NV) += P[r][0..kb) V for R rows; the last vector covers only the lanes
/// in `tail` (loads masked, so nothing past a row's d is read or written).
template <int R, int NV>
CK_AVX512 inline void pv_tile512(const float* const* p, const float* v, int64_t s_seq, int64_t kb,
                                 float* const* o, int64_t c0, __mmask16 tail) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int z = 0; z < NV; ++z)
      acc[r][z] = _mm512_maskz_loadu_ps(z == NV - 1 ? tail : static_cast<__mmask16>(0xFFFF), o[r] + c0 + 16 * z);
  for (int64_t j = 0; j < kb; ++j) {
    const float* vj = v + j * s_seq + c0;
    __m512 b[NV];
    for (int z = 0; z < NV - 1; ++z) b[z] = _mm512_loadu_ps(vj + 16 * z);
    b[NV - 1] = _mm512_maskz_loadu_ps(tail, vj + 16 * (NV - 1));
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(p[r][j]);
      for (int z = 0; z < NV; ++z) acc[r][z] = _mm512_fmadd_ps(a, b[z], acc[r][z]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int z = 0; z < NV - 1; ++z) _mm512_storeu_ps(o[r] + c0 + 16 * z, acc[r][z]);
    _mm512_mask_storeu_ps(o[r] + c0 + 16 * (NV - 1), tail, acc[r][NV - 1]);
  }
}

template <int R, int NV>
CK_AVX512 void pv_chunk512(const float* p, int64_t ldp, const float* v, int64_t s_seq, int64_t kb,
                           float* o, int64_t ldo, int64_t rows, int64_t c0, __mmask16 tail) {
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const float* pr[R];
    float* orow[R];
    for (int r = 0; r < R; ++r) {
      const int64_t row = std::min<int64_t>(r0 + r, rows - 1);
      pr[r] = p + row * ldp;
      orow[r] = o + row * ldo;
    }
    pv_tile512<R, NV>(pr, v, s_seq, kb, orow, c0, tail);
  }
}

CK_AVX512 void pv_rows512(const float* p, int64_t ldp, const float* v, int64_t s_seq, int64_t kb,
                          float* o, int64_t ldo, int64_t rows, int64_t d) {
  int64_t c0 = 0;
  for (; c0 + 64 <= d; c0 += 64) pv_chunk512<6, 4>(p, ldp, v, s_seq, kb, o, ldo, rows, c0, 0xFFFF);
  const int64_t rem = d - c0;
  if (rem == 0) return;
  const __mmask16 tail = mask16(rem % 16 == 0 ? 16 : rem % 16);
  switch ((rem + 15) / 16) {
    case 4: pv_chunk512<6, 4>(p, ldp, v, s_seq, kb, o, ldo, rows, c0, tail); break;
    case 3: pv_chunk512<8, 3>(p, ldp, v, s_seq, kb, o, ldo, rows, c0, tail); break;
    case 2: pv_chunk512<12, 2>(p, ldp, v, s_seq, kb, o, ldo, rows, c0, tail); break;
    default: pv_chunk512<12, 1>(p, ldp, v, s_seq, kb, o, ldo, rows, c0, tail); break;
  }
}

CK_AVX512 void softmax_row512(float* s, int64_t kbp, int64_t valid, float scale2, __m512 vmax, float& m,
                              float& l, float* o, int64_t d) {
  const float m_new = std::max(m, _mm512_reduce_max_ps(vmax) * scale2);
  const float alpha = m == -std::numeric_limits<float>::infinity() ? 0.f : std::exp2(m - m_new);
  const __m512 mv = _mm512_set1_ps(m_new), sc = _mm512_set1_ps(scale2);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < kbp; j += 16) {
    const __m512 e = _mm512_maskz_mov_ps(mask16(valid - j), exp2_ps512(_mm512_fmsub_ps(_mm512_loadu_ps(s + j), sc, mv)));
    _mm512_storeu_ps(s + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  l = l * alpha + _mm512_reduce_add_ps(sum);
  m = m_new;
  if (alpha != 1.0f) {
    const __m256 av = _mm256_set1_ps(alpha);
    for (int64_t t = 0; t < d; t += 8) _mm256_storeu_ps(o + t, _mm256_mul_ps(_mm256_loadu_ps(o + t), av));
  }
}

CK_AVX512 void attend512(const float* q_in, int64_t qs, const float* kp, const float* v, float* out,
                         int64_t os, int64_t i0, int64_t i1, int64_t nk, int64_t d, float scale,
                         Scratch& w) {
  const float scale2 = scale * 1.44269504088896341f;
  const int64_t rows = i1 - i0, vs = d;
  w.q.resize(static_cast<size_t>(kMq * d));
  pack_rows(q_in + i0 * qs, qs, rows, d, w.q.data());
  const float* q = w.q.data();
  w.s.resize(static_cast<size_t>(kMq * kKb));
  w.o.assign(static_cast<size_t>(rows * d), 0.f);
  w.m.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  w.l.assign(static_cast<size_t>(rows), 0.f);
  float* s = w.s.data();
  float* o = w.o.data();
  for (int64_t k0 = 0; k0 < nk; k0 += kKb) {
    const int64_t valid = std::min(kKb, nk - k0), groups = (valid + kNr - 1) / kNr, kbp = groups * kNr;
    w.vmax.assign(static_cast<size_t>(rows * 16), -std::numeric_limits<float>::infinity());
    for (int64_t r0 = 0; r0 < rows; r0 += kMr512) {
      const float* qr[kMr512];
      float* sr[kMr512];
      float* vm[kMr512];
      for (int r = 0; r < kMr512; ++r) {
        const int64_t row = std::min<int64_t>(r0 + r, rows - 1);
        qr[r] = q + row * d;
        sr[r] = s + row * kKb;
        vm[r] = w.vmax.data() + row * 16;
      }
      int64_t g = 0;
      for (; g + 2 <= groups; g += 2) {
        float* sg[kMr512];
        for (int r = 0; r < kMr512; ++r) sg[r] = sr[r] + g * kNr;
        qk_tile512<2>(qr, kp + (k0 / kNr + g) * d * kNr, d, sg, vm, valid - g * kNr);
      }
      if (g < groups) {
        float* sg[kMr512];
        for (int r = 0; r < kMr512; ++r) sg[r] = sr[r] + g * kNr;
        qk_tile512<1>(qr, kp + (k0 / kNr + g) * d * kNr, d, sg, vm, valid - g * kNr);
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      softmax_row512(s + r * kKb, kbp, valid, scale2, _mm512_loadu_ps(w.vmax.data() + r * 16),
                     w.m[static_cast<size_t>(r)], w.l[static_cast<size_t>(r)], o + r * d, d);
    pv_rows512(s, kKb, v + k0 * vs, vs, valid, o, d, rows, d);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const __m256 inv = _mm256_set1_ps(1.0f / w.l[static_cast<size_t>(r)]);
    float* dst = out + (i0 + r) * os;
    for (int64_t t = 0; t < d; t += 8)
      _mm256_storeu_ps(dst + t, _mm256_mul_ps(_mm256_loadu_ps(o + r * d + t), inv));
  }
}

#pragma GCC diagnostic pop

bool cpu_has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool cpu_has_avx512() {
  return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

#endif  // CK_HAVE_X86

enum class Isa : int { none = 0, avx2 = 1, avx512 = 2 };

bool self_test(Isa isa);
Isa chosen_isa();
std::atomic<int> g_forced{-1};  // tests: an ISA forced by native_attention_f32_use_isa

std::atomic<uint64_t> g_calls{0};

Isa active_isa() {
  const int f = g_forced.load(std::memory_order_relaxed);
  return f >= 0 ? static_cast<Isa>(f) : chosen_isa();
}

void run(Isa isa, const AttentionF32Shape& s, const AttentionF32View& q, const AttentionF32View& k,
         const AttentionF32View& v, const AttentionF32Out& out);

}  // namespace

uint64_t native_attention_f32_calls() { return g_calls.load(); }

bool native_attention_f32_supported(const AttentionF32Shape& s) {
  return s.d > 0 && s.d % 8 == 0 && s.d <= 256 && s.nq > 0 && s.nk > 0 && s.batch > 0 &&
         s.windows > 0 && s.heads > 0;
}

void native_attention_f32(const AttentionF32Shape& s, const AttentionF32View& q,
                          const AttentionF32View& k, const AttentionF32View& v,
                          const AttentionF32Out& out) {
  if (!native_attention_f32_supported(s))
    throw std::invalid_argument("native_attention_f32: unsupported shape (d " + std::to_string(s.d) +
                                ", nq " + std::to_string(s.nq) + ", nk " + std::to_string(s.nk) + ")");
  const Isa isa = active_isa();
  if (isa == Isa::none) throw std::invalid_argument("native_attention_f32: no usable AVX2 / AVX-512 variant on this CPU");
  g_calls.fetch_add(1, std::memory_order_relaxed);
  run(isa, s, q, k, v, out);
}

namespace {
void run(Isa isa, const AttentionF32Shape& s, const AttentionF32View& q, const AttentionF32View& k,
         const AttentionF32View& v, const AttentionF32Out& out) {
#ifdef CK_HAVE_X86
  const int64_t problems = s.batch * s.windows * s.heads, d = s.d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t groups = (s.nk + kNr - 1) / kNr, kp_size = groups * kNr * d;
  const int64_t tiles = (s.nq + kMq - 1) / kMq;
  auto offset = [&](int64_t p, int64_t sb, int64_t sw, int64_t sh) {
    const int64_t h = p % s.heads, w = (p / s.heads) % s.windows, b = p / (s.heads * s.windows);
    return b * sb + w * sw + h * sh;
  };
  // Several query tiles per problem (global attention): pack each problem's keys and values
  // once, in parallel (O(N d) against the O(N^2 d) that follows). One tile per problem (mask
  // units): each task packs its own few.
  std::vector<float> packed, values;
  const int64_t v_size = s.nk * d;
  if (tiles > 1) {
    packed.resize(static_cast<size_t>(problems * kp_size));
    values.resize(static_cast<size_t>(problems * v_size));
    at::parallel_for(0, problems, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        pack_k(k.data + offset(p, k.s_batch, k.s_window, k.s_head), k.s_seq, s.nk, d,
               packed.data() + p * kp_size);
        pack_rows(v.data + offset(p, v.s_batch, v.s_window, v.s_head), v.s_seq, s.nk, d,
                  values.data() + p * v_size);
      }
    });
  }
  at::parallel_for(0, problems * tiles, 1, [&](int64_t b, int64_t e) {
    const FlushDenormalsScope ftz;  // underflowing probabilities: flush_denormals.h
    thread_local Scratch w;
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / tiles, i0 = (t % tiles) * kMq, i1 = std::min(s.nq, i0 + kMq);
      const float *kp, *vp;
      if (tiles > 1) {
        kp = packed.data() + p * kp_size;
        vp = values.data() + p * v_size;
      } else {
        w.kp.resize(static_cast<size_t>(kp_size));
        w.v.resize(static_cast<size_t>(v_size));
        pack_k(k.data + offset(p, k.s_batch, k.s_window, k.s_head), k.s_seq, s.nk, d, w.kp.data());
        pack_rows(v.data + offset(p, v.s_batch, v.s_window, v.s_head), v.s_seq, s.nk, d, w.v.data());
        kp = w.kp.data();
        vp = w.v.data();
      }
      const float* qp = q.data + offset(p, q.s_batch, q.s_window, q.s_head);
      float* op = out.data + offset(p, out.s_batch, out.s_window, out.s_head);
      if (isa == Isa::avx512)
        attend512(qp, q.s_seq, kp, vp, op, out.s_seq, i0, i1, s.nk, d, scale, w);
      else
        attend(qp, q.s_seq, kp, vp, op, out.s_seq, i0, i1, s.nk, d, scale, w);
    }
  });
#else
  (void)isa, (void)s, (void)q, (void)k, (void)v, (void)out;
  throw std::invalid_argument("native_attention_f32: built without x86 AVX2 support");
#endif
}

/// Against a float64 softmax(q k^T / sqrt(d)) v on odd sizes that exercise every tail (row
/// tiles, key blocks, 8- and 16-lane masks, each pv chunk width) and strided, interleaved
/// inputs, through the given variant.
bool self_test(Isa isa) {
  try {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    struct Case { int64_t nq, nk, d; };
    for (const Case c : {Case{77, 77, 56}, Case{21, 300, 56}, Case{130, 17, 64}, Case{5, 33, 8}, Case{40, 150, 88},
                         Case{13, 45, 120}, Case{9, 20, 200},
                         Case{97, 129, 24}, Case{3, 1, 16}}) {
      const int64_t H = 2, row = 3 * H * c.d;  // [N, 3, H, d] as Hiera's qkv projection lays it out
      const int64_t n = std::max(c.nq, c.nk);
      std::vector<float> qkv(static_cast<size_t>(n * row));
      for (auto& x : qkv) x = 2.0f * nd(rng);
      std::vector<float> out(static_cast<size_t>(c.nq * H * c.d), 0.f);
      AttentionF32Shape s{1, 1, H, c.nq, c.nk, c.d};
      run(isa, s, {qkv.data(), 0, 0, c.d, row}, {qkv.data() + H * c.d, 0, 0, c.d, row},
                           {qkv.data() + 2 * H * c.d, 0, 0, c.d, row},
                           {out.data(), 0, 0, c.d, H * c.d});
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < c.nq; ++i) {
          std::vector<double> w(static_cast<size_t>(c.nk));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < c.nk; ++j) {
            double dot = 0;
            for (int64_t t = 0; t < c.d; ++t)
              dot += double(qkv[i * row + h * c.d + t]) * double(qkv[j * row + H * c.d + h * c.d + t]);
            w[j] = dot * scale;
            mx = std::max(mx, w[j]);
          }
          for (auto& x : w) sum += (x = std::exp(x - mx));
          for (int64_t t = 0; t < c.d; ++t) {
            double acc = 0;
            for (int64_t j = 0; j < c.nk; ++j) acc += w[j] * double(qkv[j * row + 2 * H * c.d + h * c.d + t]);
            if (!(std::fabs(acc / sum - out[i * H * c.d + h * c.d + t]) <= 1e-4)) return false;
          }
        }
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// Median of 3 timed runs (after one warm-up) of a stage-3-like problem: 4 heads x 1024
/// tokens, d 56 (0.94 GFLOP), in the layout the blocks hand over.
double time_isa(Isa isa) {
  const int64_t H = 4, N = 1024, d = 56, row = 3 * H * d;
  std::vector<float> qkv(static_cast<size_t>(N * row), 0.25f), out(static_cast<size_t>(N * H * d));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  const AttentionF32Shape s{1, 1, H, N, N, d};
  std::vector<double> t;
  for (int i = 0; i < 4; ++i) {
    const auto a = std::chrono::steady_clock::now();
    run(isa, s, {qkv.data(), 0, 0, d, row}, {qkv.data() + H * d, 0, 0, d, row},
        {qkv.data() + 2 * H * d, 0, 0, d, row}, {out.data(), 0, 0, d, H * d});
    if (i > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

struct Choice {
  bool avx2 = false, avx512 = false;
  Isa isa = Isa::none;
};

/// Each variant the CPU can run must pass its self-test; AVX-512 runs where it passes. The
/// choice is not timed per process: the two variants sum each softmax row in a different
/// order, so a per-process race would let two processes on one machine (`inference` and
/// `serve`, two chunks of a job) differ in the last bits. Whether the kernel runs at all is
/// the measured plan's per-stage trial against SDPA, with the variant chosen here;
/// time_isa() reports both (tests, `native_attention_f32_timing`).
const Choice& choice() {
  static const Choice c = [] {
    Choice r;
#ifdef CK_HAVE_X86
    r.avx2 = cpu_has_avx2_fma() && self_test(Isa::avx2);
    r.avx512 = cpu_has_avx512() && self_test(Isa::avx512);
    r.isa = r.avx512 ? Isa::avx512 : r.avx2 ? Isa::avx2 : Isa::none;
#endif
    return r;
  }();
  return c;
}

Isa chosen_isa() { return choice().isa; }
}  // namespace

bool native_attention_f32_available() { return active_isa() != Isa::none; }

std::string native_attention_f32_isa() {
  const Isa isa = active_isa();
  const std::string out = isa == Isa::avx512 ? "avx512" : isa == Isa::avx2 ? "avx2" : "none";
  return g_forced.load() >= 0 ? out + " (forced)" : out;
}

std::string native_attention_f32_timing() {
  const Choice& c = choice();
  if (!(c.avx2 && c.avx512)) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "avx512 %.1f ms, avx2 %.1f ms", 1e3 * time_isa(Isa::avx512),
                1e3 * time_isa(Isa::avx2));
  return buf;
}

bool native_attention_f32_use_isa(const std::string& isa) {
  const Choice& c = choice();
  if (isa.empty() || isa == "auto") {
    g_forced.store(-1);
    return true;
  }
  const Isa want = isa == "avx512" ? Isa::avx512 : isa == "avx2" ? Isa::avx2 : Isa::none;
  if (want == Isa::none || (want == Isa::avx512 && !c.avx512) || (want == Isa::avx2 && !c.avx2)) return false;
  g_forced.store(static_cast<int>(want));
  return true;
}

}  // namespace corridorkey::kernels
