// group_norm_apply: GroupNorm with GIVEN statistics, fused with residual add and ReLU.
//
//   y = act( (x - mean[n,g]) * rstd[n,g] * gamma[c] + beta[c]  (+ residual) )
//
// Why: the tiled refiner (engine) normalises each tile with image-global GroupNorm
// statistics gathered in a first pass; PyTorch has no op for "GroupNorm with these
// statistics", and the plain-torch form below makes 4-5 passes over the tile. The CUDA
// kernel does one read of x (+ residual) and one write.
//
// Every op here has a plain-torch reference that is also the fallback on CPU / MPS, and the
// CUDA version is enabled only after it passes a self-test against that reference.
#pragma once

#include <torch/types.h>

#include <optional>

namespace corridorkey::kernels {

/// x: [N, C, H, W]; mean, rstd: [N, groups] float32; gamma, beta: [C]; residual like x.
torch::Tensor group_norm_apply(const torch::Tensor& x, const torch::Tensor& mean,
                               const torch::Tensor& rstd, const torch::Tensor& gamma,
                               const torch::Tensor& beta, int64_t groups,
                               const std::optional<torch::Tensor>& residual, bool relu);

/// Plain-torch reference (and fallback). Computes in float32, returns x's dtype.
torch::Tensor group_norm_apply_reference(const torch::Tensor& x, const torch::Tensor& mean,
                                         const torch::Tensor& rstd, const torch::Tensor& gamma,
                                         const torch::Tensor& beta, int64_t groups,
                                         const std::optional<torch::Tensor>& residual,
                                         bool relu);

/// Whole GroupNorm (statistics of x itself) fused with residual add and ReLU:
///   y = act(GroupNorm(x) (+ residual)).
/// CPU float32 / bfloat16 NCHW or channels-last: two passes (group_norm_cpu.h), written
/// into x when `in_place`; elsewhere torch::group_norm + add + relu. Same result as those up
/// to float summation order (<= 1e-5 in fp32, tests/model/test_kernels.cpp).
torch::Tensor group_norm_fused(torch::Tensor x, int64_t groups, const torch::Tensor& gamma,
                               const torch::Tensor& beta, double eps,
                               const std::optional<torch::Tensor>& residual, bool relu,
                               bool in_place);

/// True when the CPU kernels (group_norm_cpu.h) passed their self-test in this process
/// (run once, lazily, on small tensors of every layout and dtype against the references).
bool cpu_kernels_enabled();

/// True when this build has the CUDA kernels and their self-test passed on the current
/// CUDA device (run once, lazily, isolated from the caller's tensors).
bool cuda_kernels_enabled();

}  // namespace corridorkey::kernels
