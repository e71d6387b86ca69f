// CUDA implementation of group_norm_apply (declared here, defined in group_norm_apply.cu).
#pragma once

#include <torch/types.h>

#include <optional>

namespace corridorkey::kernels::cuda {

torch::Tensor group_norm_apply(const torch::Tensor& x, const torch::Tensor& mean,
                               const torch::Tensor& rstd, const torch::Tensor& gamma,
                               const torch::Tensor& beta, int64_t groups,
                               const std::optional<torch::Tensor>& residual, bool relu);

}  // namespace corridorkey::kernels::cuda
