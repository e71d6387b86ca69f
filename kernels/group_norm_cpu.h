// CPU GroupNorm in two passes, for the refiner's 64-channel full-resolution maps:
//   group_moments:        one read of x -> per-(sample, group) count, mean and M2
//   group_norm_apply_cpu: one read of x (+ residual), one write:
//                         y = act(x * scale[n,c] + shift[n,c] (+ residual))
// PyTorch's eager path (GroupNorm, then add, then ReLU) makes five passes over the map; at
// 1024 x 1024 x 64 in bf16 that is ~0.7 s of a frame on 2 cores (bench --ops:
// native_group_norm 320 ms, clamp_min 297 ms, add 175 ms).
//
// Layouts: channels-last or contiguous NCHW; dtypes float32 and bfloat16 (math in float32,
// bf16 rounded to nearest even like c10::BFloat16). The inner loops are compiled for
// AVX-512, AVX2 and baseline x86-64 and picked at load time (GCC target_clones).
#pragma once

#include <torch/types.h>

#include <optional>

namespace corridorkey::kernels {

/// Per-(sample, group) statistics of x [N, C, H, W]: {count (double scalar), mean [N, G]
/// float64, M2 [N, G] float64} (M2 = sum of squared deviations), so tiles can be merged
/// (Chan et al.) and var = M2 / count.
struct GroupMoments {
  double count = 0;
  torch::Tensor mean, m2;
};
GroupMoments group_moments(const torch::Tensor& x, int64_t groups);

/// True when x can go through the CPU kernels (CPU, float32 / bfloat16, NCHW contiguous
/// or channels-last contiguous, C divisible by groups).
bool group_norm_cpu_supported(const torch::Tensor& x, int64_t groups);

/// y = act((x - mean) * rstd * gamma + beta (+ residual)); mean / rstd [N, G] (any float
/// dtype), gamma / beta [C]. Writes into `out` when given (it may be x itself), else a new
/// tensor with x's layout.
torch::Tensor group_norm_apply_cpu(const torch::Tensor& x, const torch::Tensor& mean,
                                   const torch::Tensor& rstd, const torch::Tensor& gamma,
                                   const torch::Tensor& beta, int64_t groups,
                                   const std::optional<torch::Tensor>& residual, bool relu,
                                   std::optional<torch::Tensor> out = std::nullopt);

}  // namespace corridorkey::kernels
