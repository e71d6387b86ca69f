// SegFormer-style multiscale decoder head (alpha: 1 channel, fg: 3 channels).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <vector>

namespace corridorkey::model {

/// Per-scale channel projection; the checkpoint names it linear_cK.proj.
class FeatureProjectionImpl : public torch::nn::Module {
 public:
  FeatureProjectionImpl(int64_t in, int64_t out);
  /// NCHW [B, Ci, h, w] -> NCHW [B, out, h, w] through Linear over the flattened tokens.
  torch::Tensor forward(const torch::Tensor& c);
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(FeatureProjection);

class DecoderHeadImpl : public torch::nn::Module {
 public:
  DecoderHeadImpl(const std::vector<int64_t>& feature_channels, int64_t embed_dim,
                  int64_t out_channels);
  /// features = {c1, c2, c3, c4}; returns logits at c1's resolution (S/4).
  torch::Tensor forward(const std::vector<torch::Tensor>& features);

  /// Same result without the 1024-channel concatenation: linear_fuse is linear and the
  /// bilinear resize acts per channel, so fuse(cat(up(P_k c_k))) = sum_k up(F_k P_k c_k).
  /// F_k P_k is folded into one Linear(C_k -> 256) (computed once from the weights), each
  /// scale is resized with 256 channels and accumulated. Decoder peak memory drops ~4x
  /// and the 1024 -> 256 conv at S/4 disappears; fp32 results move by summation order only
  /// (<= 1e-5 on final alpha/fg, tests/test_engine.cpp).
  bool fused = false;
  /// Drops the folded weights (call after changing parameters).
  void invalidate_fused() { folded_.clear(); }
  /// Computes the folded weights now. A model shared by engines on several threads is
  /// folded once when it is prepared: forward_fused then only reads them (no lazy write
  /// racing between threads).
  void fold();

  std::array<FeatureProjection, 4> linear_c{nullptr, nullptr, nullptr, nullptr};
  torch::nn::Conv2d linear_fuse{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Conv2d classifier{nullptr};

 private:
  torch::Tensor forward_fused(const std::vector<torch::Tensor>& features);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> folded_;  // (weight, bias) per scale
};
TORCH_MODULE(DecoderHead);

}  // namespace corridorkey::model
