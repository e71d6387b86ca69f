// Token routing for the experimental profile: only "edge" tokens (uncertain alpha in the
// hint) go through the expensive global-attention blocks; every token also goes through a
// light LTRM, and the edge tokens' block outputs are scattered over the LTRM output.
//
// Unlike the reference fork, the edge mask is laid out in the order the routed blocks
// actually hold their tokens: blocks 6-20 still carry one level of Hiera's unroll (window
// index fastest), blocks 22-23 are in raster order. Index sets are computed once per stage
// (not per block) and without per-sample host loops inside blocks.
#pragma once

#include "config.h"
#include "hiera.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>
#include <vector>

namespace corridorkey::model {

/// Efficient channel attention: mean over tokens -> Conv1d(1, 1, k) over channels ->
/// sigmoid -> per-channel gate. k from ECA-Net's rule |log2(C)/2 + 1/2| rounded to odd
/// (5 for 448 and 896 channels).
class EcaImpl : public torch::nn::Module {
 public:
  explicit EcaImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);  // [B, N, C] -> gate [B, 1, C]
  static int64_t kernel_size(int64_t channels);
  torch::nn::Conv1d conv{nullptr};
};
TORCH_MODULE(Eca);

/// Lightweight token refinement: LN -> Linear d->2d -> GELU -> depthwise 5x5 conv on the
/// 2-D token grid -> GELU -> Linear 2d->d -> ECA gate -> + residual. fc2 starts at zero,
/// so an untrained LTRM is the identity.
class LtrmImpl : public torch::nn::Module {
 public:
  explicit LtrmImpl(int64_t dim);
  /// x: [B, N, C] in the token order of its stage (`unroll_levels` of Hiera's 2x2 unroll
  /// still applied over a grid x grid token map).
  torch::Tensor forward(const torch::Tensor& x, int64_t grid, int64_t unroll_levels);
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Conv2d dwconv{nullptr};
  Eca eca{nullptr};
};
TORCH_MODULE(Ltrm);

/// Edge tokens of one routed stage, in that stage's token order.
struct StageRoute {
  int64_t grid = 0, unroll_levels = 0, tokens = 0;
  bool all_edge = true;          // nothing to route: run blocks normally
  torch::Tensor index;           // [B, E] long: token positions of the edge tokens
  torch::Tensor key_mask;        // [B, 1, 1, E] bool when samples have different E, else undefined
  int64_t edge_tokens = 0;       // summed over the batch
  double fraction = 1.0;         // edge / all tokens
};

struct RoutingOptions {
  double low = 0.02, high = 0.98;
  int64_t min_edge_tokens = 64;
};

/// The hint channel [B, 1, S, S] area-downsampled to `grid` x `grid`; token (y, x) is edge
/// iff low < h < high; a sample with fewer than min_edge_tokens edge tokens routes all.
StageRoute plan_stage_route(const torch::Tensor& hint, int64_t grid, int64_t unroll_levels,
                            const RoutingOptions& options);

/// The routing modules, registered as ltrm_stage2.{i} (one per stage-2 block, dim 448 for
/// hiera_base_plus) and ltrm_stage3.{i}, so trained weights in a checkpoint load by name.
/// Index i is the block's position in its stage; the expanding first block of a stage runs
/// normally, so ltrm_stageK.0 exists (for checkpoint compatibility) but is unused.
class TokenRouterImpl : public torch::nn::Module {
 public:
  TokenRouterImpl(const HieraConfig& config, int64_t img_size, RoutingOptions options);

  /// Plans both routed stages from the model input's hint channel (x[:, 3]).
  void plan(const torch::Tensor& x);
  /// Block hook for Hiera::forward: routed blocks return their output, others undefined.
  torch::Tensor run_block(size_t block, HieraBlockImpl& blk, const torch::Tensor& x);
  /// Loads ltrm_* tensors; returns how many were found (0: identity LTRMs). Not `load`:
  /// that would hide torch::nn::Module::load(InputArchive&).
  int64_t load_weights(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
               const std::string& source);
  const StageRoute& route(int stage) const { return stage == 2 ? r2_ : r3_; }

  torch::nn::ModuleList ltrm_stage2{nullptr}, ltrm_stage3{nullptr};

 private:
  HieraConfig cfg_;
  int64_t img_size_;
  RoutingOptions opt_;
  std::vector<int64_t> stage_start_;  // first block of each stage
  StageRoute r2_, r3_;
};
TORCH_MODULE(TokenRouter);

}  // namespace corridorkey::model
