#include "attention_cpu.h"
#include "flush_denormals.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <tuple>
#include <mutex>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_ps
// placeholders (GCC bug 105593); nothing in this file reads uninitialised data. Clang has
// no such warning (and would warn about the unknown name).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define CK_HAVE_X86 1
// Only these functions use AVX-512; they run only after the CPU check below.
#define CK_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#endif

namespace corridorkey::kernels {
namespace {

// Tile sizes. A task owns kMq query rows of one (batch, head) and walks every key in
// blocks of kKb; its float32 scores, bf16 probabilities and float32 output rows stay in
// L1/L2 (64 x 128 x 4 + 64 x 64 x 4 + 64 x 64 x 4 bytes = 64 KB).
constexpr int kMq = 64;    // query rows per task
constexpr int kKb = 128;   // keys per block (a multiple of 32)
constexpr int kMr = 8;     // query rows per q k^T micro-tile (8 x 32 keys = 16 accumulators)
constexpr int kMp = 4;     // query rows per p v micro-tile (4 x 64 dims = 16 accumulators)

bool cpu_has_avx512_bf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      return line.find(" avx512_bf16") != std::string::npos &&
             line.find(" avx512bw") != std::string::npos;
  return false;
}

#ifdef CK_HAVE_X86

/// exp(x) for x <= 0 (scores minus their running max): 2^(x log2 e) = 2^n 2^g with n an
/// integer and g in [-0.5, 0.5]; 2^g by its degree-4 Taylor polynomial in g (relative error
/// <= 4.2e-5, far below the bf16 rounding, 2^-9, the probabilities get next). -inf (masked
/// keys) is clamped first so it gives ~1e-38, not NaN.
CK_AVX512BF16 inline __m512 exp_neg(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 g = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(0.0096181291f);                        // ln2^4 / 24
  p = _mm512_fmadd_ps(p, g, _mm512_set1_ps(0.0555041087f));        // ln2^3 / 6
  p = _mm512_fmadd_ps(p, g, _mm512_set1_ps(0.2402265070f));        // ln2^2 / 2
  p = _mm512_fmadd_ps(p, g, _mm512_set1_ps(0.6931471806f));        // ln2
  p = _mm512_fmadd_ps(p, g, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/// K [Nk, d] -> groups of 32 keys, each [d/2 pairs][32 keys][2]: one zmm load gives 16 keys'
/// (dim 2p, 2p+1) pairs, the operand layout of vdpbf16ps. Keys past Nk are zero.
void pack_k(const uint16_t* k, int64_t nk, int64_t d, uint16_t* out) {
  const int64_t pairs = d / 2, groups = (nk + 31) / 32;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t p = 0; p < pairs; ++p) {
      uint16_t* dst = out + (g * pairs + p) * 64;
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t key = g * 32 + j;
        dst[2 * j] = key < nk ? k[key * d + 2 * p] : 0;
        dst[2 * j + 1] = key < nk ? k[key * d + 2 * p + 1] : 0;
      }
    }
}

/// V [Nk, d] -> [Nk/2 key pairs][dpad dims][2]: one zmm load gives 16 dims of two keys,
/// interleaved. Dims past d and keys past Nk are zero.
void pack_v(const uint16_t* v, int64_t nk, int64_t d, int64_t dpad, int64_t nkpad, uint16_t* out) {
  for (int64_t q = 0; q < nkpad / 2; ++q)
    for (int64_t t = 0; t < dpad; ++t)
      for (int64_t e = 0; e < 2; ++e) {
        const int64_t key = 2 * q + e;
        out[(q * dpad + t) * 2 + e] = key < nk && t < d ? v[key * d + t] : 0;
      }
}

/// S[r][0..31] = q_r . k_j for kMr query rows and one group of 32 keys.
CK_AVX512BF16 void qk_tile(const uint32_t* const* qrows, const uint16_t* kgroup, int64_t pairs,
                           float* s, int64_t s_stride) {
  __m512 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(kgroup + p * 64);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(kgroup + p * 64 + 32);
    for (int r = 0; r < kMr; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(qrows[r][p]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  for (int r = 0; r < kMr; ++r) {
    _mm512_storeu_ps(s + r * s_stride, acc[r][0]);
    _mm512_storeu_ps(s + r * s_stride + 16, acc[r][1]);
  }
}

/// O[r][c0 .. c0 + 16 NZ) += sum over key pairs of P[r][pair] . V[pair] for kMp rows. NZ is
/// a compile-time count so the kMp x NZ accumulators live in registers.
template <int NZ>
CK_AVX512BF16 void pv_chunk(const uint32_t* p_rows, int64_t p_stride, const uint16_t* vpairs,
                            int64_t npairs, int64_t dpad, int64_t c0, float* o, int64_t o_stride) {
  __m512 acc[kMp][NZ];
  for (int r = 0; r < kMp; ++r)
    for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_loadu_ps(o + r * o_stride + c0 + 16 * z);
  for (int64_t q = 0; q < npairs; ++q) {
    const uint16_t* vq = vpairs + (q * dpad + c0) * 2;
    __m512bh b[NZ];
    for (int z = 0; z < NZ; ++z) b[z] = (__m512bh)_mm512_loadu_si512(vq + 32 * z);
    for (int r = 0; r < kMp; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(p_rows[r * p_stride + q]));
      for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_dpbf16_ps(acc[r][z], a, b[z]);
    }
  }
  for (int r = 0; r < kMp; ++r)
    for (int z = 0; z < NZ; ++z) _mm512_storeu_ps(o + r * o_stride + c0 + 16 * z, acc[r][z]);
}

/// O[r][0..dpad) += P[r] . V for kMp rows, in chunks of up to 64 dims.
CK_AVX512BF16 void pv_tile(const uint32_t* p_rows, int64_t p_stride, const uint16_t* vpairs,
                           int64_t npairs, int64_t dpad, float* o, int64_t o_stride) {
  for (int64_t c0 = 0; c0 < dpad; c0 += 64) {
    switch (std::min<int64_t>(4, (dpad - c0) / 16)) {
      case 4: pv_chunk<4>(p_rows, p_stride, vpairs, npairs, dpad, c0, o, o_stride); break;
      case 3: pv_chunk<3>(p_rows, p_stride, vpairs, npairs, dpad, c0, o, o_stride); break;
      case 2: pv_chunk<2>(p_rows, p_stride, vpairs, npairs, dpad, c0, o, o_stride); break;
      default: pv_chunk<1>(p_rows, p_stride, vpairs, npairs, dpad, c0, o, o_stride); break;
    }
  }
}

/// Online-softmax update of one query row with a block of raw scores s[0..kb) (valid of them
/// real keys): rescales the row's output, writes bf16 probabilities (pairs) to p, updates the
/// running max m (in scaled units) and sum l. The softmax scale is folded into the exp's
/// argument, so the scores are read twice and never rewritten.
CK_AVX512BF16 void softmax_row(const float* s, int64_t kb, int64_t valid, float scale, float& m,
                               float& l, float* o, int64_t dpad, uint32_t* p) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  auto live = [&](int64_t j) -> __mmask16 {
    return valid - j >= 16 ? 0xFFFF : valid - j <= 0 ? 0 : static_cast<__mmask16>((1u << (valid - j)) - 1);
  };
  __m512 mx = ninf;
  if (valid == kb) {
    for (int64_t j = 0; j < kb; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + j));
  } else {
    for (int64_t j = 0; j < kb; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, live(j), s + j));
  }
  const float m_new = std::max(m, _mm512_reduce_max_ps(mx) * scale);
  const float alpha = m == -std::numeric_limits<float>::infinity() ? 0.f : std::exp(m - m_new);
  const __m512 mv = _mm512_set1_ps(m_new), sc = _mm512_set1_ps(scale);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < kb; j += 32) {
    __m512 x0, x1;
    if (valid == kb) {
      x0 = _mm512_loadu_ps(s + j);
      x1 = _mm512_loadu_ps(s + j + 16);
    } else {
      x0 = _mm512_mask_loadu_ps(ninf, live(j), s + j);
      x1 = _mm512_mask_loadu_ps(ninf, live(j + 16), s + j + 16);
    }
    const __m512 e0 = exp_neg(_mm512_fmsub_ps(x0, sc, mv));
    const __m512 e1 = exp_neg(_mm512_fmsub_ps(x1, sc, mv));
    // The row sum uses the probabilities as p v will see them (rounded to bf16), so the
    // normalisation matches what is accumulated.
    const __m512bh pb = _mm512_cvtne2ps_pbh(e1, e0);
    _mm512_storeu_si512(p + j / 2, (__m512i)pb);
    sum = _mm512_add_ps(
        sum, _mm512_add_ps(_mm512_cvtpbh_ps((__m256bh)_mm512_castsi512_si256((__m512i)pb)),
                           _mm512_cvtpbh_ps((__m256bh)_mm512_extracti64x4_epi64((__m512i)pb, 1))));
  }
  l = l * alpha + _mm512_reduce_add_ps(sum);
  m = m_new;
  if (alpha != 1.0f) {  // the max moved: rescale what the row has accumulated so far
    const __m512 av = _mm512_set1_ps(alpha);
    for (int64_t t = 0; t < dpad; t += 16) _mm512_storeu_ps(o + t, _mm512_mul_ps(_mm512_loadu_ps(o + t), av));
  }
}

/// One task: query rows [i0, i1) of one (batch, head).
CK_AVX512BF16 void attend_rows(const uint16_t* q, const uint16_t* kp, const uint16_t* vp, uint16_t* out,
                               int64_t i0, int64_t i1, int64_t nk, int64_t d, int64_t dpad,
                               float scale) {
  const int64_t pairs = d / 2, rows = i1 - i0;
  alignas(64) float s[kMq * kKb];
  alignas(64) uint32_t p[kMq * (kKb / 2)];
  alignas(64) float o[kMq * 256];
  float m[kMq], l[kMq];
  for (int64_t r = 0; r < kMq; ++r) m[r] = -std::numeric_limits<float>::infinity(), l[r] = 0;
  std::memset(o, 0, sizeof(float) * static_cast<size_t>(kMq * dpad));
  const uint32_t* q32 = reinterpret_cast<const uint32_t*>(q);
  for (int64_t k0 = 0; k0 < nk; k0 += kKb) {
    const int64_t kb = std::min<int64_t>(kKb, ((nk - k0 + 31) / 32) * 32), valid = std::min<int64_t>(kKb, nk - k0);
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const uint32_t* qrows[kMr];
      for (int r = 0; r < kMr; ++r) qrows[r] = q32 + (i0 + std::min<int64_t>(r0 + r, rows - 1)) * pairs;
      for (int64_t g = 0; g < kb / 32; ++g)
        qk_tile(qrows, kp + ((k0 / 32 + g) * pairs) * 64, pairs, s + r0 * kKb + g * 32, kKb);
    }
    for (int64_t r = 0; r < rows; ++r)
      softmax_row(s + r * kKb, kb, valid, scale, m[r], l[r], o + r * dpad, dpad, p + r * (kKb / 2));
    for (int64_t r0 = 0; r0 < rows; r0 += kMp) {
      if (rows - r0 < kMp) {  // tail rows one at a time through a padded copy
        for (int64_t r = r0; r < rows; ++r) {
          alignas(64) uint32_t pr[kMp * (kKb / 2)] = {};
          alignas(64) float orow[kMp * 256] = {};
          std::memcpy(pr, p + r * (kKb / 2), sizeof(uint32_t) * (kKb / 2));
          std::memcpy(orow, o + r * dpad, sizeof(float) * static_cast<size_t>(dpad));
          pv_tile(pr, kKb / 2, vp + (k0 / 2) * dpad * 2, kb / 2, dpad, orow, dpad);
          std::memcpy(o + r * dpad, orow, sizeof(float) * static_cast<size_t>(dpad));
        }
        break;
      }
      pv_tile(p + r0 * (kKb / 2), kKb / 2, vp + (k0 / 2) * dpad * 2, kb / 2, dpad, o + r0 * dpad, dpad);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / l[r];
    uint16_t* dst = out + (i0 + r) * d;
    for (int64_t t = 0; t < d; ++t) {
      const float v = o[r * dpad + t] * inv;
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even
      dst[t] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

#endif  // CK_HAVE_X86

bool self_test();

}  // namespace

bool native_attention_supported(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v) {
  auto ok = [](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kBFloat16 && t.dim() == 4 &&
           t.is_contiguous();
  };
  return ok(q) && ok(k) && ok(v) && q.size(0) == k.size(0) && q.size(1) == k.size(1) &&
         k.sizes() == v.sizes() && q.size(3) == k.size(3) && q.size(3) % 2 == 0 &&
         q.size(3) <= 256 && k.size(2) > 0 && q.size(2) > 0;
}

torch::Tensor native_attention_bf16(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v) {
  TORCH_CHECK(native_attention_supported(q, k, v), "native_attention_bf16: unsupported inputs ",
              q.sizes(), " ", k.sizes(), " ", v.sizes(), " ", q.scalar_type());
#ifdef CK_HAVE_X86
  const int64_t B = q.size(0), H = q.size(1), nq = q.size(2), nk = k.size(2), d = q.size(3);
  const int64_t dpad = (d + 15) / 16 * 16, nkpad = (nk + 31) / 32 * 32;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto out = torch::empty_like(q);
  auto u16 = [](const torch::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); };
  // Pack every head's K and V once (O(N d) work), then tile the queries.
  const int64_t kp_size = nkpad * d, vp_size = nkpad * dpad;
  std::vector<uint16_t> kp(static_cast<size_t>(B * H * kp_size)), vp(static_cast<size_t>(B * H * vp_size));
  at::parallel_for(0, B * H, 1, [&](int64_t b, int64_t e) {
    for (int64_t bh = b; bh < e; ++bh) {
      pack_k(u16(k) + bh * nk * d, nk, d, kp.data() + bh * kp_size);
      pack_v(u16(v) + bh * nk * d, nk, d, dpad, nkpad, vp.data() + bh * vp_size);
    }
  });
  const int64_t tiles = (nq + kMq - 1) / kMq;
  at::parallel_for(0, B * H * tiles, 1, [&](int64_t b, int64_t e) {
    const FlushDenormalsScope ftz;  // underflowing probabilities: flush_denormals.h
    for (int64_t t = b; t < e; ++t) {
      const int64_t bh = t / tiles, i0 = (t % tiles) * kMq, i1 = std::min(nq, i0 + kMq);
      attend_rows(u16(q) + bh * nq * d, kp.data() + bh * kp_size, vp.data() + bh * vp_size,
                  u16(out) + bh * nq * d, i0, i1, nk, d, dpad, scale);
    }
  });
  return out;
#else
  TORCH_CHECK(false, "native_attention_bf16: built without x86 AVX-512 support");
#endif
}

namespace {
bool self_test() {
  try {
    for (auto [nq, nk, d] : {std::tuple<int64_t, int64_t, int64_t>{77, 77, 56}, {21, 83, 56},
                             {130, 200, 64}, {5, 33, 18}}) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
      auto q = at::randn({1, 3, nq, d}, gen).to(torch::kBFloat16);
      auto k = at::randn({1, 3, nk, d}, gen).to(torch::kBFloat16);
      auto v = at::randn({1, 3, nk, d}, gen).to(torch::kBFloat16);
      const auto want = at::scaled_dot_product_attention(q.to(torch::kFloat), k.to(torch::kFloat),
                                                         v.to(torch::kFloat));
      const auto got = native_attention_bf16(q, k, v).to(torch::kFloat);
      if (!((got - want).abs().max().item<double>() <= 3e-2)) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

bool native_attention_available() {
  static std::once_flag once;
  static bool ok = false;
#ifdef CK_HAVE_X86
  std::call_once(once, [] { ok = cpu_has_avx512_bf16() && self_test(); });
#else
  (void)once;
#endif
  return ok;
}

}  // namespace corridorkey::kernels
