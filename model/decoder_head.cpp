#include "decoder_head.h"

#include "functional.h"
#include "upsample_add_cpu.h"

#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/upsampling.h>

#include <string>

namespace corridorkey::model {
namespace F = torch::nn::functional;

FeatureProjectionImpl::FeatureProjectionImpl(int64_t in, int64_t out) {
  proj = register_module("proj", torch::nn::Linear(in, out));
}

torch::Tensor FeatureProjectionImpl::forward(const torch::Tensor& c) {
  // Linear over channels = per-pixel GEMM on the NHWC view. The encoder's features are
  // NHWC in memory (reroll), so the permute is free and the result, permuted back, is a
  // channels-last NCHW map: no transposing copies (the reference's flatten / transpose /
  // reshape costs 12 copies of 32 MB, ~0.7 s of a 1024 bf16 frame on 2 cores).
  return functional::linear(proj, c.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
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
  if (fused) return forward_fused(f);
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

namespace corridorkey::model {

void DecoderHeadImpl::fold() {
  if (!folded_.empty()) return;
  const int64_t E = linear_fuse->weight.size(0);
  // Fold in float32 whatever the storage type, then store in the weights' type.
  torch::NoGradGuard ng;
  const auto wf = linear_fuse->weight.to(torch::kFloat).view({E, 4 * E});
  for (int k = 0; k < 4; ++k) {
    // cat order is [c4, c3, c2, c1]: scale k+1 owns columns (3-k)*E .. (4-k)*E.
    const auto fk = wf.slice(1, (3 - k) * E, (4 - k) * E);
    const auto& p = linear_c[k]->proj;
    folded_.emplace_back(torch::mm(fk, p->weight.to(torch::kFloat)).to(p->weight.scalar_type()),
                         torch::mv(fk, p->bias.to(torch::kFloat)).to(p->bias.scalar_type()));
  }
}

torch::Tensor DecoderHeadImpl::forward_fused(const std::vector<torch::Tensor>& f) {
  fold();
  const std::vector<int64_t> size{f[0].size(2), f[0].size(3)};
  torch::Tensor acc;
  for (int k = 3; k >= 0; --k) {
    const auto& c = f[k];
    // NHWC GEMM, viewed back as a channels-last NCHW map (see FeatureProjectionImpl).
    auto z = at::linear(c.permute({0, 2, 3, 1}), folded_[k].first, folded_[k].second)
                 .permute({0, 3, 1, 2});
    if (k > 0 && z.is_cpu() && z.scalar_type() == torch::kFloat &&
        z.is_contiguous(torch::MemoryFormat::ChannelsLast) &&
        (!acc.defined() || acc.is_contiguous(torch::MemoryFormat::ChannelsLast))) {
      // Resize and sum in one pass (kernels/upsample_add_cpu.h): no 64 MiB map per scale.
      if (!acc.defined())
        acc = torch::empty({z.size(0), z.size(1), size[0], size[1]},
                           z.options().memory_format(torch::MemoryFormat::ChannelsLast));
      kernels::upsample_bilinear_add_nhwc(z.data_ptr<float>(), z.size(0), z.size(2), z.size(3), z.size(1),
                                          acc.data_ptr<float>(), size[0], size[1], k < 3);
      continue;
    }
    if (k > 0)
      z = F::interpolate(z, F::InterpolateFuncOptions().size(size).mode(torch::kBilinear)
                                .align_corners(false));
    acc = acc.defined() ? acc.add_(z) : z;
  }
  return classifier->forward(torch::relu(bn->forward(acc)));
}

}  // namespace corridorkey::model
