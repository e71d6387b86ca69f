#include "upsample_add_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace corridorkey::kernels {
namespace {

struct Tap {
  int64_t i0, i1;
  float l0, l1;
};

/// LibTorch's compute_source_index_and_lambda for align_corners = false, in float.
Tap source_tap(int64_t dst, int64_t in_size, int64_t out_size) {
  if (in_size == out_size) return {dst, dst, 1.f, 0.f};
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  float src = scale * (static_cast<float>(dst) + 0.5f) - 0.5f;
  if (src < 0.f) src = 0.f;
  const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in_size - 1);
  const float l1 = std::min(std::max(src - static_cast<float>(i0), 0.f), 1.f);
  return {i0, i0 + (i0 < in_size - 1 ? 1 : 0), 1.f - l1, l1};
}

}  // namespace

void upsample_bilinear_add_nhwc(const float* in, int64_t n, int64_t hi, int64_t wi, int64_t c,
                                float* out, int64_t ho, int64_t wo, bool accumulate) {
  std::vector<Tap> xs(static_cast<size_t>(wo));
  for (int64_t x = 0; x < wo; ++x) xs[static_cast<size_t>(x)] = source_tap(x, wi, wo);
  at::parallel_for(0, n * ho, 1, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t img = row / ho, y = row % ho;
      const Tap ty = source_tap(y, hi, ho);
      const float* r0 = in + (img * hi + ty.i0) * wi * c;
      const float* r1 = in + (img * hi + ty.i1) * wi * c;
      float* o = out + row * wo * c;
      for (int64_t x = 0; x < wo; ++x, o += c) {
        const Tap& tx = xs[static_cast<size_t>(x)];
        const float w00 = ty.l0 * tx.l0, w01 = ty.l0 * tx.l1, w10 = ty.l1 * tx.l0, w11 = ty.l1 * tx.l1;
        const float* a = r0 + tx.i0 * c;
        const float* b1 = r0 + tx.i1 * c;
        const float* c0 = r1 + tx.i0 * c;
        const float* d = r1 + tx.i1 * c;
        if (accumulate) {
#pragma omp simd
          for (int64_t k = 0; k < c; ++k) o[k] += a[k] * w00 + b1[k] * w01 + c0[k] * w10 + d[k] * w11;
        } else {
#pragma omp simd
          for (int64_t k = 0; k < c; ++k) o[k] = a[k] * w00 + b1[k] * w01 + c0[k] * w10 + d[k] * w11;
        }
      }
    }
  });
}

}  // namespace corridorkey::kernels
