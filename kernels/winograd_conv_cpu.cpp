#include "winograd_conv_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "simd_f32.h"

namespace corridorkey::kernels {
namespace {

std::atomic<int64_t> g_calls{0};

// Tiles per task step: v and m hold 16 x 48 x 64 floats each (192 KiB at 64 channels), so a
// step's transformed tiles stay in a core's L2 (1 MiB on a Zen 5) between the transform, the
// GEMMs and the inverse transform. Other step sizes were not timed.
constexpr int64_t kTilesPerStep = 48;
// Tiles per GEMM micro-tile (6 x 4 zmm or 6 x 2 ymm accumulators): a step's buffers hold its
// tiles rounded up to a multiple of this.
constexpr int kRows = 6;

/// Floats between two of the 16 transformed planes of a step: rows x channels plus one
/// cache line, so that the 16 planes do not start at multiples of 4 KiB from one another
/// (4 KiB aliasing between the 16 store streams and the loads): a call at 1024 on a Zen 5
/// ran 7-24% slower without the line.
inline int64_t plane_stride(int64_t rows, int64_t channels) { return rows * channels + 16; }

/// Output rows (or columns) of an input extent: h + 2 pad - 2 dilation.
inline int64_t out_extent(int64_t in, const WinogradConvF32& p) { return in + 2 * p.pad - 2 * p.dilation; }

struct TileAt {
  int64_t n, y0, x0;
};

/// Output tiles: a tile row's first output row y0 = 2 d a + r (r < d) covers rows y0 and
/// y0 + d, so tile rows 0..ny-1 cover every output row once; columns likewise.
struct TileGrid {
  int64_t ho, wo, d, ny, nx;
  static int64_t count(int64_t size, int64_t d) {
    const int64_t full = size / (2 * d), rest = size % (2 * d);
    return full * d + std::min(rest, d);
  }
  TileGrid(int64_t ho_, int64_t wo_, int64_t d_)
      : ho(ho_), wo(wo_), d(d_), ny(count(ho_, d_)), nx(count(wo_, d_)) {}
  int64_t base(int64_t i) const { return 2 * d * (i / d) + i % d; }
  TileAt at(int64_t t) const {
    const int64_t ix = t % nx, rest = t / nx;
    return {rest / ny, base(rest % ny), base(ix)};
  }
};

#ifdef CK_HAVE_X86
#define CK_NS avx512
#define CK_T CK_AVX512
#define CK_TRAITS simd::Avx512
#define CK_NV 4
#include "winograd_conv_body.inc"
#undef CK_NS
#undef CK_T
#undef CK_TRAITS
#undef CK_NV

#define CK_NS avx2
#define CK_T CK_AVX2
#define CK_TRAITS simd::Avx2
#define CK_NV 2
#include "winograd_conv_body.inc"
#undef CK_NS
#undef CK_T
#undef CK_TRAITS
#undef CK_NV
#endif

enum class Isa { none, avx2, avx512 };

void run(Isa isa, const WinogradConvF32& p) {
  const int64_t ho = out_extent(p.h, p), wo = out_extent(p.w, p);
  const TileGrid g(ho, wo, p.dilation);
  const int64_t tiles = p.n * g.ny * g.nx;
  at::parallel_for(0, tiles, kTilesPerStep, [&](int64_t b, int64_t e) {
    const int64_t rows = (kTilesPerStep + kRows - 1) / kRows * kRows;
    std::vector<float> v(static_cast<size_t>(16 * plane_stride(rows, p.cin))),
        m(static_cast<size_t>(16 * plane_stride(rows, p.cout)));
    for (int64_t t = b; t < e; t += kTilesPerStep) {
      const int64_t t1 = std::min(e, t + kTilesPerStep);
#ifdef CK_HAVE_X86
      if (isa == Isa::avx512)
        avx512::run_tiles(p, g, t, t1, v.data(), m.data());
      else
        avx2::run_tiles(p, g, t, t1, v.data(), m.data());
#else
      (void)isa;
      (void)t1;
#endif
    }
  });
}

/// float64 direct convolution of the same problem: the self-test's reference.
std::vector<double> direct(const WinogradConvF32& p, const std::vector<float>& weight) {
  const int64_t ho = out_extent(p.h, p), wo = out_extent(p.w, p);
  std::vector<double> out(static_cast<size_t>(p.n * ho * wo * p.cout));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t y = 0; y < ho; ++y)
      for (int64_t x = 0; x < wo; ++x)
        for (int64_t co = 0; co < p.cout; ++co) {
          double s = p.bias ? p.bias[co] : 0.0;
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int64_t iy = y - p.pad + ky * p.dilation, ix = x - p.pad + kx * p.dilation;
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              const float* in = p.in + ((n * p.h + iy) * p.w + ix) * p.cin;
              for (int64_t ci = 0; ci < p.cin; ++ci)
                s += double(in[ci]) * weight[static_cast<size_t>(((co * p.cin + ci) * 3 + ky) * 3 + kx)];
            }
          out[static_cast<size_t>(((n * ho + y) * wo + x) * p.cout + co)] = s;
        }
  return out;
}

/// A 2 x 11 x 13 x 16 -> 80 problem (both GEMM tile widths) at dilation 2 and pad 2 (odd sizes: partial tiles,
/// taps in the padding) must match float64 within 1e-5 relative to the output's scale.
bool self_test(Isa isa) {
  WinogradConvF32 p;
  p.n = 2, p.h = 11, p.w = 13, p.cin = 16, p.cout = 80, p.dilation = 2, p.pad = 2;
  std::vector<float> in(static_cast<size_t>(p.n * p.h * p.w * p.cin)), w(static_cast<size_t>(p.cout * p.cin * 9)),
      bias(static_cast<size_t>(p.cout)), u(static_cast<size_t>(16 * p.cin * p.cout));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 2654435761u) % 1000) * 2e-3f - 1.f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 40503u) % 1000) * 2e-4f - 0.1f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i);
  winograd_weights_f32(w.data(), p.cout, p.cin, u.data());
  const int64_t ho = out_extent(p.h, p), wo = out_extent(p.w, p);
  std::vector<float> out(static_cast<size_t>(p.n * ho * wo * p.cout), NAN);
  p.in = in.data(), p.weights = u.data(), p.bias = bias.data(), p.out = out.data();
  run(isa, p);
  const auto ref = direct(p, w);
  double scale = 0, err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(out[i])) return false;  // an output pixel never written
    scale = std::max(scale, std::fabs(ref[i]));
    err = std::max(err, std::fabs(ref[i] - out[i]));
  }
  return err <= 1e-5 * scale;
}

struct Choice {
  bool avx2 = false, avx512 = false;
  Isa isa = Isa::none;
  Choice() {
#ifdef CK_HAVE_X86
    avx2 = simd::cpu_has_avx2_fma() && self_test(Isa::avx2);
    avx512 = simd::cpu_has_avx512() && self_test(Isa::avx512);
    isa = avx512 ? Isa::avx512 : avx2 ? Isa::avx2 : Isa::none;
#endif
  }
};

const Choice& choice() {
  static const Choice c;
  return c;
}

std::atomic<int> g_forced{-1};  // tests: a variant forced by winograd_conv_f32_use_isa

Isa active_isa() {
  const int f = g_forced.load();
  return f >= 0 ? static_cast<Isa>(f) : choice().isa;
}

}  // namespace

bool winograd_conv_f32_available() { return choice().isa != Isa::none; }

std::string winograd_conv_f32_isa() {
  const Isa isa = active_isa();
  return isa == Isa::avx512 ? "avx512" : isa == Isa::avx2 ? "avx2" : "none";
}

bool winograd_conv_f32_use_isa(const std::string& isa) {
  const Choice& c = choice();
  if (isa.empty() || isa == "auto") {
    g_forced.store(-1);
    return true;
  }
  if ((isa == "avx512" && c.avx512) || (isa == "avx2" && c.avx2)) {
    g_forced.store(static_cast<int>(isa == "avx512" ? Isa::avx512 : Isa::avx2));
    return true;
  }
  return false;
}

bool winograd_conv_f32_supported(int64_t cin, int64_t cout) {
  return cin > 0 && cout > 0 && cin % 16 == 0 && cout % 16 == 0;
}

void winograd_weights_f32(const float* weight, int64_t cout, int64_t cin, float* u) {
  // G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  for (int64_t co = 0; co < cout; ++co)
    for (int64_t ci = 0; ci < cin; ++ci) {
      const float* g = weight + (co * cin + ci) * 9;
      double gg[4][3];  // G g
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) gg[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          u[((i * 4 + j) * cin + ci) * cout + co] =
              static_cast<float>(gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2]);
    }
}

void winograd_conv_f32(const WinogradConvF32& p) {
  const Isa isa = active_isa();
  if (isa == Isa::none) throw std::runtime_error("winograd_conv_f32: no AVX2 + FMA on this CPU");
  if (!winograd_conv_f32_supported(p.cin, p.cout) || p.dilation < 1 || p.pad < 0 ||
      out_extent(p.h, p) < 1 || out_extent(p.w, p) < 1)
    throw std::invalid_argument("winograd_conv_f32: unsupported shape");
  g_calls.fetch_add(1, std::memory_order_relaxed);
  run(isa, p);
}

int64_t winograd_conv_f32_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace corridorkey::kernels
