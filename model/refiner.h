// CNN refiner: 7 channels (normalised RGB + coarse alpha + coarse fg) -> 4 delta logits.
// Receptive-field radius 31 px: stem 1 + 2*(1+2+4+8) = 31.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <array>

namespace corridorkey::model {

class RefinerBlockImpl : public torch::nn::Module {
 public:
  RefinerBlockImpl(int64_t channels, int64_t groups, int64_t dilation);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::GroupNorm gn1{nullptr}, gn2{nullptr};
};
TORCH_MODULE(RefinerBlock);

class CNNRefinerImpl : public torch::nn::Module {
 public:
  CNNRefinerImpl(int64_t channels, int64_t groups);
  /// rgb: normalised [B,3,S,S]; coarse: [B,4,S,S] (alpha, fg). Returns final(x) * 10.
  torch::Tensor forward(const torch::Tensor& rgb, const torch::Tensor& coarse);
  /// Same network on an already concatenated 7-channel input.
  torch::Tensor forward_input(const torch::Tensor& x);
  /// The same network with every GroupNorm fused with its residual add and ReLU
  /// (kernels::group_norm_fused: two passes per norm instead of five, in place), in the
  /// input's memory format (channels-last when given channels-last). fp32 results move by
  /// summation order only (<= 1e-5, tests/model/test_engine.cpp).
  torch::Tensor forward_fused(const torch::Tensor& x);

  torch::nn::Sequential stem{nullptr};  // 0 conv3x3, 1 GroupNorm, 2 ReLU
  std::array<RefinerBlock, 4> res{nullptr, nullptr, nullptr, nullptr};  // res1..res4
  torch::nn::Conv2d final{nullptr};
  static constexpr double kOutputScale = 10.0;
};
TORCH_MODULE(CNNRefiner);

}  // namespace corridorkey::model
