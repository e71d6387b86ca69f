#include "group_norm_cpu.h"

#include <ATen/Parallel.h>

#include <cstring>
#include <vector>

namespace corridorkey::kernels {
namespace {

// Each clone is the same plain C++ compiled for one ISA; the loader picks the best one
// the CPU has (GCC ifunc). The loops are written so GCC vectorizes them (bf16 <-> float
// as bit shifts, no aliasing, channel loops innermost and contiguous).
// Not under ThreadSanitizer: an ifunc resolver runs while the dynamic loader relocates the
// library, before the TSan runtime is up, and its instrumented entry crashes the process.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CK_CLONES
#endif

inline float bf16_to_float(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even, as c10::BFloat16
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// ---- statistics: sums of (x - k) and (x - k)^2 over a chunk ------------------------------
// The shift k (a value of the chunk itself) keeps the float sums from cancelling when the
// mean is large against the spread (var = E[(x-k)^2] - E[x-k]^2 loses nothing for k ~ mean).

// `pixels` NHWC pixels; per-channel shifts k[c].
CK_CLONES void sums_nhwc_f32(const float* x, int64_t pixels, int64_t C, const float* k, float* s,
                             float* q) {
  for (int64_t p = 0; p < pixels; ++p, x += C)
    for (int64_t c = 0; c < C; ++c) {
      const float v = x[c] - k[c];
      s[c] += v;
      q[c] += v * v;
    }
}

CK_CLONES void sums_nhwc_bf16(const uint16_t* x, int64_t pixels, int64_t C, const float* k,
                              float* s, float* q) {
  for (int64_t p = 0; p < pixels; ++p, x += C)
    for (int64_t c = 0; c < C; ++c) {
      const float v = bf16_to_float(x[c]) - k[c];
      s[c] += v;
      q[c] += v * v;
    }
}

// Contiguous run of one channel (NCHW): 16 partial accumulators so GCC vectorizes.
CK_CLONES void sums_run_f32(const float* x, int64_t n, float k, float& s, float& q) {
  float ps[16] = {}, pq[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      const float v = x[i + j] - k;
      ps[j] += v;
      pq[j] += v * v;
    }
  for (; i < n; ++i) {
    const float v = x[i] - k;
    ps[0] += v;
    pq[0] += v * v;
  }
  s = q = 0;
  for (int j = 0; j < 16; ++j) s += ps[j], q += pq[j];
}

CK_CLONES void sums_run_bf16(const uint16_t* x, int64_t n, float k, float& s, float& q) {
  float ps[16] = {}, pq[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      const float v = bf16_to_float(x[i + j]) - k;
      ps[j] += v;
      pq[j] += v * v;
    }
  for (; i < n; ++i) {
    const float v = bf16_to_float(x[i]) - k;
    ps[0] += v;
    pq[0] += v * v;
  }
  s = q = 0;
  for (int j = 0; j < 16; ++j) s += ps[j], q += pq[j];
}

/// Running (count, mean, M2), merged chunk by chunk (Chan et al.), in double.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  /// A chunk of `cnt` values given as sums of (x - k) and (x - k)^2.
  void add_chunk(double cnt, double k, double s, double q) {
    if (cnt <= 0) return;
    const double mb = k + s / cnt, m2b = std::max(0.0, q - s * s / cnt);
    const double nn = n + cnt, delta = mb - mean;
    mean += delta * (cnt / nn);
    m2 += m2b + delta * delta * (n * cnt / nn);
    n = nn;
  }
};

float first_value(const torch::Tensor& x, int64_t offset) {
  return x.scalar_type() == torch::kBFloat16
             ? bf16_to_float(reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>())[offset])
             : x.data_ptr<float>()[offset];
}

// ---- apply: y = act(x * scale + shift (+ r)) over `pixels` NHWC pixels ------------------
CK_CLONES void apply_nhwc_f32(const float* x, const float* r, float* y, int64_t pixels, int64_t C,
                              const float* scale, const float* shift, bool relu) {
  for (int64_t p = 0; p < pixels; ++p, x += C, y += C, r = r ? r + C : r)
    for (int64_t c = 0; c < C; ++c) {
      float v = x[c] * scale[c] + shift[c] + (r ? r[c] : 0.f);
      y[c] = relu && v < 0.f ? 0.f : v;  // NaN passes through, as torch::relu
    }
}

CK_CLONES void apply_nhwc_bf16(const uint16_t* x, const uint16_t* r, uint16_t* y, int64_t pixels,
                               int64_t C, const float* scale, const float* shift, bool relu) {
  for (int64_t p = 0; p < pixels; ++p, x += C, y += C, r = r ? r + C : r)
    for (int64_t c = 0; c < C; ++c) {
      float v = bf16_to_float(x[c]) * scale[c] + shift[c] + (r ? bf16_to_float(r[c]) : 0.f);
      y[c] = float_to_bf16(relu && v < 0.f ? 0.f : v);
    }
}

CK_CLONES void apply_run_f32(const float* x, const float* r, float* y, int64_t n, float scale,
                             float shift, bool relu) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * scale + shift + (r ? r[i] : 0.f);
    y[i] = relu && v < 0.f ? 0.f : v;
  }
}

CK_CLONES void apply_run_bf16(const uint16_t* x, const uint16_t* r, uint16_t* y, int64_t n,
                              float scale, float shift, bool relu) {
  for (int64_t i = 0; i < n; ++i) {
    float v = bf16_to_float(x[i]) * scale + shift + (r ? bf16_to_float(r[i]) : 0.f);
    y[i] = float_to_bf16(relu && v < 0.f ? 0.f : v);
  }
}

uint16_t* bf16_data(const torch::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>());
}

bool channels_last(const torch::Tensor& x) {
  return x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous();
}

/// Pixels per task: enough work to amortise a task, few enough partial sums to stay exact.
constexpr int64_t kPixelGrain = 4096;

}  // namespace

bool group_norm_cpu_supported(const torch::Tensor& x, int64_t groups) {
  return x.device().is_cpu() && x.dim() == 4 && groups > 0 && x.size(1) % groups == 0 &&
         (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16) &&
         (x.is_contiguous() || x.is_contiguous(at::MemoryFormat::ChannelsLast));
}

GroupMoments group_moments(const torch::Tensor& x, int64_t groups) {
  TORCH_CHECK(group_norm_cpu_supported(x, groups), "group_moments: unsupported tensor ",
              x.sizes(), " ", x.scalar_type());
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3), cpg = C / groups;
  const bool bf16 = x.scalar_type() == torch::kBFloat16;
  const int64_t tasks = (P + kPixelGrain - 1) / kPixelGrain;
  // One (shift, sum, sum of squares) per (sample, pixel chunk, channel), filled in parallel,
  // then merged per group in double.
  std::vector<float> ks(static_cast<size_t>(N * tasks * C)), ps(ks.size(), 0.f), pq(ks.size(), 0.f);
  if (channels_last(x)) {
    at::parallel_for(0, N * tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t n = t / tasks, p0 = (t % tasks) * kPixelGrain;
        const int64_t np = std::min(kPixelGrain, P - p0), off = (n * P + p0) * C;
        float* k = &ks[static_cast<size_t>(t * C)];
        for (int64_t c = 0; c < C; ++c) k[c] = first_value(x, off + c);
        if (bf16)
          sums_nhwc_bf16(bf16_data(x) + off, np, C, k, &ps[static_cast<size_t>(t * C)],
                         &pq[static_cast<size_t>(t * C)]);
        else
          sums_nhwc_f32(x.data_ptr<float>() + off, np, C, k, &ps[static_cast<size_t>(t * C)],
                        &pq[static_cast<size_t>(t * C)]);
      }
    });
  } else {
    at::parallel_for(0, N * C * tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t nc = i / tasks, chunk = i % tasks, n = nc / C, c = nc % C;
        const int64_t p0 = chunk * kPixelGrain, np = std::min(kPixelGrain, P - p0);
        const int64_t off = nc * P + p0;
        const size_t slot = static_cast<size_t>((n * tasks + chunk) * C + c);
        ks[slot] = first_value(x, off);
        if (bf16) sums_run_bf16(bf16_data(x) + off, np, ks[slot], ps[slot], pq[slot]);
        else sums_run_f32(x.data_ptr<float>() + off, np, ks[slot], ps[slot], pq[slot]);
      }
    });
  }
  GroupMoments m;
  m.count = static_cast<double>(P * cpg);
  m.mean = torch::empty({N, groups}, torch::kDouble);
  m.m2 = torch::empty({N, groups}, torch::kDouble);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      Moments acc;
      for (int64_t t = 0; t < tasks; ++t) {
        const double cnt = static_cast<double>(std::min(kPixelGrain, P - t * kPixelGrain));
        for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c) {
          const size_t slot = static_cast<size_t>((n * tasks + t) * C + c);
          acc.add_chunk(cnt, ks[slot], ps[slot], pq[slot]);
        }
      }
      m.mean.data_ptr<double>()[n * groups + g] = acc.mean;
      m.m2.data_ptr<double>()[n * groups + g] = acc.m2;
    }
  return m;
}

torch::Tensor group_norm_apply_cpu(const torch::Tensor& x, const torch::Tensor& mean,
                                   const torch::Tensor& rstd, const torch::Tensor& gamma,
                                   const torch::Tensor& beta, int64_t groups,
                                   const std::optional<torch::Tensor>& residual, bool relu,
                                   std::optional<torch::Tensor> out) {
  TORCH_CHECK(group_norm_cpu_supported(x, groups), "group_norm_apply_cpu: unsupported tensor ",
              x.sizes(), " ", x.scalar_type());
  const bool cl = channels_last(x);
  const auto fmt = cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  torch::Tensor r;
  if (residual) {
    r = residual->to(x.scalar_type()).contiguous(fmt);
    TORCH_CHECK(r.sizes() == x.sizes(), "group_norm_apply_cpu: residual ", r.sizes(), " vs x ",
                x.sizes());
  }
  torch::Tensor y = out ? *out : torch::empty_like(x, fmt);
  TORCH_CHECK(y.sizes() == x.sizes() && y.scalar_type() == x.scalar_type() && y.is_contiguous(fmt),
              "group_norm_apply_cpu: bad output tensor");
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3), cpg = C / groups;
  // Fold statistics and affine into one scale / shift per (sample, channel).
  const auto m = mean.to(torch::kDouble).contiguous(), rs = rstd.to(torch::kDouble).contiguous();
  const auto g = gamma.to(torch::kDouble).contiguous(), bt = beta.to(torch::kDouble).contiguous();
  std::vector<float> scale(static_cast<size_t>(N * C)), shift(scale.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double mu = m.data_ptr<double>()[n * groups + c / cpg];
      const double s = rs.data_ptr<double>()[n * groups + c / cpg] * g.data_ptr<double>()[c];
      scale[static_cast<size_t>(n * C + c)] = static_cast<float>(s);
      shift[static_cast<size_t>(n * C + c)] = static_cast<float>(bt.data_ptr<double>()[c] - mu * s);
    }
  const bool bf16 = x.scalar_type() == torch::kBFloat16;
  if (cl) {
    const int64_t tasks = (P + kPixelGrain - 1) / kPixelGrain;
    at::parallel_for(0, N * tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t n = t / tasks, p0 = (t % tasks) * kPixelGrain;
        const int64_t np = std::min(kPixelGrain, P - p0), off = (n * P + p0) * C;
        const float* sc = &scale[static_cast<size_t>(n * C)];
        const float* sh = &shift[static_cast<size_t>(n * C)];
        if (bf16) {
          apply_nhwc_bf16(bf16_data(x) + off, r.defined() ? bf16_data(r) + off : nullptr, bf16_data(y) + off, np, C,
                          sc, sh, relu);
        } else {
          apply_nhwc_f32(x.data_ptr<float>() + off, r.defined() ? r.data_ptr<float>() + off : nullptr,
                         y.data_ptr<float>() + off, np, C, sc, sh, relu);
        }
      }
    });
  } else {
    at::parallel_for(0, N * C, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const int64_t off = nc * P;
        const float sc = scale[static_cast<size_t>(nc)], sh = shift[static_cast<size_t>(nc)];
        if (bf16) {
          apply_run_bf16(bf16_data(x) + off, r.defined() ? bf16_data(r) + off : nullptr, bf16_data(y) + off, P, sc,
                         sh, relu);
        } else {
          apply_run_f32(x.data_ptr<float>() + off, r.defined() ? r.data_ptr<float>() + off : nullptr,
                        y.data_ptr<float>() + off, P, sc, sh, relu);
        }
      }
    });
  }
  return y;
}

}  // namespace corridorkey::kernels
