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

#include "simd_f32.h"

namespace corridorkey::kernels {
namespace {

// Tiles. A task owns up to kMq query rows of one problem and walks the keys in blocks of
// kKb. Its scores (kMq x kKb x 4 B = 48 KiB), output rows (kMq x d x 4 B = 21 KiB at d 56)
// and the key block (packed K and V rows, 2 x 28 KiB at d 56) stay in the 512 KiB L2 of a
// Zen 3 core; a micro-tile's V rows (kKb x 32 dims x 4 B = 16 KiB) stay in its 32 KiB L1.
constexpr int64_t kMq = 96;   // query rows per task (a multiple of 3, 4 and 6)
constexpr int64_t kKb = 128;  // keys per block (a multiple of kNr)
constexpr int64_t kNr = 16;   // keys per packed group: two ymm registers, one zmm

#ifdef CK_HAVE_X86

/// Taylor coefficients of 2^f = e^(f ln 2), highest degree first (Horner): exp2_v in
/// attention_f32_body.inc, the same for both variants so they compute the same probabilities.
constexpr float kExp2Poly[8] = {1.5252733804059841e-05f, 1.5403530393381609e-04f, 1.3333558146428443e-03f,
                                9.6181291076284772e-03f, 5.5504108664821580e-02f, 2.4022650695910071e-01f,
                                6.9314718055994531e-01f, 1.0f};

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

struct Scratch {
  std::vector<float> s, o, q, kp, v;
  std::vector<float> m, l;
  std::vector<float> vmax;  // 8 (AVX2) or 16 (AVX-512) lanes per row: the maximum of its raw scores
};

/// 8 lanes of a row of d floats (d a multiple of 8) times `alpha`, in place: a row's output
/// rescaled when its running maximum moves (both variants: d need not be a multiple of 16).
CK_AVX2 inline void scale_row(float* o, int64_t d, float alpha) {
  const __m256 av = _mm256_set1_ps(alpha);
  for (int64_t t = 0; t < d; t += 8) _mm256_storeu_ps(o + t, _mm256_mul_ps(_mm256_loadu_ps(o + t), av));
}

/// dst[0..d) = src[0..d) * k (the row's 1 / l), 8 lanes at a time.
CK_AVX2 inline void store_scaled_row(float* dst, const float* src, int64_t d, float k) {
  const __m256 kv = _mm256_set1_ps(k);
  for (int64_t t = 0; t < d; t += 8) _mm256_storeu_ps(dst + t, _mm256_mul_ps(_mm256_loadu_ps(src + t), kv));
}

// ---- The ISA traits (simd_f32.h) and the tiles that fit each ISA's register file --------
// kMr query rows per q k^T micro-tile times kQkVecs key vectors of accumulators (AVX2:
// 6 x 2 of 16 ymm; AVX-512: 12 x 2 of 32 zmm), and P V micro-tiles of up to kPvAcc
// accumulators over at most kPvRows rows (AVX2: 3 rows x 4 vectors = 32 dims at d 56's
// first chunk; AVX-512: 6 x 4 = 64 dims, the last vector masked, d 56 = 3 x 16 + 8).
struct Avx2 : simd::Avx2 {
  static constexpr int kMr = 6, kQkVecs = 2, kPvAcc = 12, kPvRows = 6;
};
struct Avx512 : simd::Avx512 {
  static constexpr int kMr = 12, kQkVecs = 2, kPvAcc = 24, kPvRows = 12;
};

// GCC 12's own avx512fintrin.h passes `_mm512_undefined_ps()` (`__m512 __Y = __Y;`) as the
// unused merge source of unmasked ops, which -Wmaybe-uninitialized reports at every inlined
// call (GCC bug 105593); nothing here reads an undefined lane. Clang has no such warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define CK_NS avx512
#define CK_T CK_AVX512
#define CK_TRAITS Avx512
#include "attention_f32_body.inc"
#undef CK_NS
#undef CK_T
#undef CK_TRAITS

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#define CK_NS avx2
#define CK_T CK_AVX2
#define CK_TRAITS Avx2
#include "attention_f32_body.inc"
#undef CK_NS
#undef CK_T
#undef CK_TRAITS

using simd::cpu_has_avx2_fma;
using simd::cpu_has_avx512;

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
        avx512::attend(qp, q.s_seq, kp, vp, op, out.s_seq, i0, i1, s.nk, d, scale, w);
      else
        avx2::attend(qp, q.s_seq, kp, vp, op, out.s_seq, i0, i1, s.nk, d, scale, w);
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
