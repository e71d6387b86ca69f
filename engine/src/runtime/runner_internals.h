// What the model runner's files share (model_runner.cpp, precision_layout.cpp,
// oom_policy.cpp, execution.cpp): the compile modes' state and a few helpers. Internal.
#pragma once

#include "runtime/model_runner.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#ifdef CK_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#endif

#include <memory>
#include <string>

namespace corridorkey::detail {

struct ModelRunner::Graph {
#ifdef CK_WITH_CUDA
  at::cuda::CUDAGraph graph;
  torch::Tensor in, alpha, fg;
#endif
};

struct ModelRunner::Aoti {
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
};

/// Precision enum -> storage type (precision_layout.cpp).
torch::ScalarType to_dtype(Precision p);
/// on_oom's precision step for one engine (precision_layout.cpp).
model::GreenFormer half_copy(const PreparedNet& p, torch::ScalarType dtype);
/// A runner's own token router on the prepared router's weights, routing an encoder that
/// runs at `encoder_size` (precision_layout.cpp).
model::TokenRouter own_router(const PreparedNet& p, int64_t encoder_size);
/// The first line of a LibTorch message, at most 300 characters (model_runner.cpp).
std::string first_line(const char* what);
/// A c10::Error that is an allocation failure on any device (oom_policy.cpp).
bool is_out_of_memory(const c10::Error& e);

}  // namespace corridorkey::detail
