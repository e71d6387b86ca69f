#include "decoder_head.h"

#include <torch/nn/functional/upsampling.h>

#include <string>

namespace corridorkey::model {
namespace F = torch::nn::functional;

FeatureProjectionImpl::FeatureProjectionImpl(int64_t in, int64_t out) {
  proj = register_module("proj", torch::nn::Linear(in, out));
}

torch::Tensor FeatureProjectionImpl::forward(const torch::Tensor& c) {
  const auto n = c.size(0), h = c.size(2), w = c.size(3);
  return proj->forward(c.flatten(2).transpose(1, 2)).permute({0, 2, 1}).reshape({n, -1, h, w});
}

DecoderHeadImpl::DecoderHeadImpl(const std::vector<int64_t>& ch, int64_t embed_dim,
                                 int64_t out_channels) {
  // Registration order c4..c1 is irrelevant for loading (by name) but mirrors upstream.
  for (int k = 3; k >= 0; --k)
    linear_c[k] = register_module("linear_c" + std::to_string(k + 1),
                                  FeatureProjection(ch[k], embed_dim));
  linear_fuse = register_module(
      "linear_fuse",
      torch::nn::Conv2d(torch::nn::Conv2dOptions(4 * embed_dim, embed_dim, 1).bias(false)));
  bn = register_module("bn", torch::nn::BatchNorm2d(embed_dim));
  classifier = register_module(
      "classifier", torch::nn::Conv2d(torch::nn::Conv2dOptions(embed_dim, out_channels, 1)));
}

torch::Tensor DecoderHeadImpl::forward(const std::vector<torch::Tensor>& f) {
  const std::vector<int64_t> size{f[0].size(2), f[0].size(3)};
  auto up = [&](torch::Tensor t) {
    return F::interpolate(t, F::InterpolateFuncOptions().size(size).mode(torch::kBilinear)
                                 .align_corners(false));
  };
  auto fused = linear_fuse->forward(torch::cat(
      {up(linear_c[3]->forward(f[3])), up(linear_c[2]->forward(f[2])),
       up(linear_c[1]->forward(f[1])), linear_c[0]->forward(f[0])}, 1));
  // BatchNorm uses running statistics (eval); dropout is the identity at inference.
  return classifier->forward(torch::relu(bn->forward(fused)));
}

}  // namespace corridorkey::model
