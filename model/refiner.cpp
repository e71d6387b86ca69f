#include "refiner.h"

#include "conv.h"
#include "group_norm_apply.h"

#include <torch/nn/modules/activation.h>

#include <string>

namespace corridorkey::model {
using torch::nn::Conv2dOptions;

RefinerBlockImpl::RefinerBlockImpl(int64_t ch, int64_t groups, int64_t d) {
  auto conv = [&] { return torch::nn::Conv2d(Conv2dOptions(ch, ch, 3).padding(d).dilation(d)); };
  auto gn = [&] { return torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, ch)); };
  conv1 = register_module("conv1", conv());
  gn1 = register_module("gn1", gn());
  conv2 = register_module("conv2", conv());
  gn2 = register_module("gn2", gn());
}

torch::Tensor RefinerBlockImpl::forward(const torch::Tensor& x) {
  auto out = torch::relu(gn1->forward(functional::conv2d(conv1, x)));
  out = gn2->forward(functional::conv2d(conv2, out));
  return torch::relu(out + x);
}

CNNRefinerImpl::CNNRefinerImpl(int64_t ch, int64_t groups) {
  stem = register_module(
      "stem", torch::nn::Sequential(torch::nn::Conv2d(Conv2dOptions(7, ch, 3).padding(1)),
                                    torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, ch)),
                                    torch::nn::ReLU()));
  for (int k = 0; k < 4; ++k)
    res[k] = register_module("res" + std::to_string(k + 1), RefinerBlock(ch, groups, 1 << k));
  final = register_module("final", torch::nn::Conv2d(Conv2dOptions(ch, 4, 1)));
}

torch::Tensor CNNRefinerImpl::forward(const torch::Tensor& rgb, const torch::Tensor& coarse) {
  return forward_input(torch::cat({rgb, coarse}, 1));
}

torch::Tensor CNNRefinerImpl::forward_input(const torch::Tensor& x) {
  auto f = stem->forward(x);
  for (auto& r : res) f = r->forward(f);
  return final->forward(f) * kOutputScale;
}

}  // namespace corridorkey::model

namespace corridorkey::model {
namespace {
torch::Tensor norm(const torch::nn::GroupNorm& gn, torch::Tensor x,
                   const std::optional<torch::Tensor>& residual, bool relu) {
  return kernels::group_norm_fused(std::move(x), gn->options.num_groups(), gn->weight, gn->bias,
                                   gn->options.eps(), residual, relu, /*in_place=*/true);
}
}  // namespace

torch::Tensor CNNRefinerImpl::forward_fused(const torch::Tensor& x) {
  auto f = norm(torch::nn::GroupNorm(stem->ptr<torch::nn::GroupNormImpl>(1)),
                stem->ptr<torch::nn::Conv2dImpl>(0)->forward(x), std::nullopt, true);
  for (auto& r : res) {
    auto h = norm(r->gn1, functional::conv2d(r->conv1, f), std::nullopt, true);
    f = norm(r->gn2, functional::conv2d(r->conv2, h), f, true);
  }
  return final->forward(f) * kOutputScale;
}

}  // namespace corridorkey::model
