#include "token_routing.h"

#include "functional.h"

#include <corridorkey/check.h>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

#include <cmath>

namespace corridorkey::model {
namespace F = torch::nn::functional;

int64_t EcaImpl::kernel_size(int64_t channels) {
  const auto t = static_cast<int64_t>(std::abs(std::log2(static_cast<double>(channels)) / 2.0 + 0.5));
  return t % 2 ? t : t + 1;
}

EcaImpl::EcaImpl(int64_t channels) {
  const auto k = kernel_size(channels);
  conv = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(1, 1, k).padding(k / 2).bias(false)));
}

torch::Tensor EcaImpl::forward(const torch::Tensor& x) {
  auto y = x.mean(1, /*keepdim=*/true);        // [B, 1, C]
  return torch::sigmoid(conv->forward(y));     // channels as the conv's length axis
}

LtrmImpl::LtrmImpl(int64_t dim) {
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  fc1 = register_module("fc1", torch::nn::Linear(dim, 2 * dim));
  dwconv = register_module(
      "dwconv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2 * dim, 2 * dim, 5).padding(2).groups(2 * dim)));
  fc2 = register_module("fc2", torch::nn::Linear(2 * dim, dim));
  eca = register_module("eca", Eca(dim));
  torch::NoGradGuard ng;
  fc2->weight.zero_();  // identity until trained
  fc2->bias.zero_();
}

torch::Tensor LtrmImpl::forward(const torch::Tensor& x, int64_t grid, int64_t levels) {
  auto h = functional::linear(fc1, norm->forward(x));
  at::gelu_(h);
  auto sp = functional::reroll(h, grid, grid, levels, 2, 2).permute({0, 3, 1, 2});  // [B,2C,g,g]
  sp = F::gelu(dwconv->forward(sp)).permute({0, 2, 3, 1}).reshape({x.size(0), grid * grid, -1});
  h = functional::linear(fc2, functional::unroll(sp, grid, grid, levels, 2, 2));
  return x + h * eca->forward(h);
}

StageRoute plan_stage_route(const torch::Tensor& hint, int64_t grid, int64_t levels,
                            const RoutingOptions& o) {
  StageRoute r;
  r.grid = grid;
  r.unroll_levels = levels;
  r.tokens = grid * grid;
  const int64_t B = hint.size(0);
  // Area downsampling = mean over each token's receptive square (S/grid pixels a side).
  auto h = F::adaptive_avg_pool2d(hint.to(torch::kFloat), F::AdaptiveAvgPool2dFuncOptions({grid, grid}))
               .reshape({B, grid * grid});
  auto edge = (h > o.low) & (h < o.high);                                     // raster order
  const auto order = functional::unrolled_positions(grid, grid, levels, 2, 2).to(hint.device());
  edge = edge.index_select(1, order);                                           // block order
  auto counts = edge.sum(1);
  edge = torch::where((counts < o.min_edge_tokens).unsqueeze(1), torch::ones_like(edge), edge);
  counts = edge.sum(1);
  // One host read per stage (not per block): the sizes of the index sets.
  const auto c = counts.cpu();
  const auto* cp = c.data_ptr<int64_t>();
  int64_t emax = 0, total = 0;
  for (int64_t b = 0; b < B; ++b) {
    emax = std::max(emax, cp[b]);
    total += cp[b];
  }
  r.edge_tokens = total;
  r.fraction = static_cast<double>(total) / static_cast<double>(B * r.tokens);
  r.all_edge = total == B * r.tokens;
  if (r.all_edge) return r;
  // Stable sort puts each sample's edge tokens first, in token order: [B, emax] indices.
  auto keys = (~edge).to(torch::kInt);
  auto sorted = std::get<1>(keys.sort(/*stable=*/true, /*dim=*/1, /*descending=*/false));
  r.index = sorted.slice(1, 0, emax).contiguous();
  bool ragged = false;
  for (int64_t b = 0; b < B; ++b) ragged |= cp[b] != emax;
  if (ragged)
    r.key_mask = (torch::arange(emax, counts.options()).unsqueeze(0) < counts.unsqueeze(1))
                     .view({B, 1, 1, emax});
  return r;
}

TokenRouterImpl::TokenRouterImpl(const HieraConfig& c, int64_t img_size, RoutingOptions o)
    : cfg_(c), img_size_(img_size), opt_(o) {
  CK_CHECK(c.stages.size() == 4, ConfigError, "token routing needs a 4-stage Hiera");
  const auto ch = feature_channels(c);
  ltrm_stage2 = register_module("ltrm_stage2", torch::nn::ModuleList());
  ltrm_stage3 = register_module("ltrm_stage3", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.stages[2]; ++i) ltrm_stage2->push_back(Ltrm(ch[2]));
  for (int64_t i = 0; i < c.stages[3]; ++i) ltrm_stage3->push_back(Ltrm(ch[3]));
  int64_t start = 0;
  for (auto s : c.stages) {
    stage_start_.push_back(start);
    start += s;
  }
}

void TokenRouterImpl::plan(const torch::Tensor& x) {
  const auto hint = x.slice(1, 3, 4);
  const int64_t g2 = img_size_ / 16, g3 = img_size_ / 32;
  r2_ = plan_stage_route(hint, g2, /*unroll_levels=*/1, opt_);
  r3_ = plan_stage_route(hint, g3, /*unroll_levels=*/0, opt_);
}

torch::Tensor TokenRouterImpl::run_block(size_t i, HieraBlockImpl& blk, const torch::Tensor& x) {
  const auto b = static_cast<int64_t>(i);
  int stage = 0;
  for (int s = 3; s >= 0; --s)
    if (b >= stage_start_[static_cast<size_t>(s)]) {
      stage = s;
      break;
    }
  const int64_t pos = b - stage_start_[static_cast<size_t>(stage)];
  if (stage < 2 || pos == 0) return {};  // not routed: windowed stages, expanding blocks
  const auto& r = stage == 2 ? r2_ : r3_;
  if (r.all_edge) return {};             // every token is an edge token: the normal block
  auto& ltrm = *(stage == 2 ? ltrm_stage2 : ltrm_stage3)->ptr<LtrmImpl>(static_cast<size_t>(pos));
  const int64_t C = x.size(2);
  auto y = ltrm.forward(x, r.grid, r.unroll_levels);              // all tokens, light path
  const auto idx = r.index.unsqueeze(-1).expand({-1, -1, C});
  auto ye = blk.forward(x.gather(1, idx), r.key_mask);            // attention among edge tokens
  if (r.key_mask.defined()) {
    // Padded slots must not overwrite real tokens: send them to a scratch row.
    auto valid = r.key_mask.view({x.size(0), -1, 1});
    auto target = torch::where(valid.squeeze(-1), r.index, torch::full_like(r.index, r.tokens));
    auto ext = torch::cat({y, torch::zeros_like(y.slice(1, 0, 1))}, 1);
    ext.scatter_(1, target.unsqueeze(-1).expand({-1, -1, C}), ye);
    return ext.slice(1, 0, r.tokens);
  }
  return y.scatter(1, idx, ye);
}

int64_t TokenRouterImpl::load_weights(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                              const std::string& source) {
  torch::NoGradGuard ng;
  auto params = named_parameters(true);
  auto buffers = named_buffers(true);
  int64_t n = 0;
  for (const auto& [k, t] : tensors) {
    if (k.rfind("ltrm_stage", 0) != 0) continue;
    torch::Tensor* dst = params.find(k);
    if (!dst) dst = buffers.find(k);
    CK_CHECK(dst, ModelError, source, ": unexpected key '", k, "' (no such token-routing parameter)");
    CK_CHECK(dst->sizes() == t.sizes(), ModelError, source, ": shape mismatch for '", k,
             "': checkpoint ", t.sizes(), ", model expects ", dst->sizes());
    dst->copy_(t);
    ++n;
  }
  return n;
}

}  // namespace corridorkey::model
