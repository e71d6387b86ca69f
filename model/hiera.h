// Hiera encoder (timm `hiera_base_plus_224` semantics, features_only) as LibTorch modules.
// Registered names equal timm's attribute names, so named_parameters() under the
// GreenFormer root reads "encoder.model.blocks.3.attn.qkv.weight" like the checkpoint.
#pragma once

#include "config.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <functional>
#include <vector>

namespace corridorkey::model {

/// While alive, attention blocks run on this thread take the kernel choice per stage from
/// `by_stage` instead of their native_attention flag. The flags belong to a module that
/// engines on several threads share; an engine at another size than the one the shared
/// flags were timed at brings its own choice this way. Nests; nullptr = the flags.
class NativeAttentionScope {
 public:
  explicit NativeAttentionScope(const std::array<bool, 4>* by_stage);
  ~NativeAttentionScope();
  NativeAttentionScope(const NativeAttentionScope&) = delete;
  NativeAttentionScope& operator=(const NativeAttentionScope&) = delete;

 private:
  const std::array<bool, 4>* previous_;
};

/// Attention over mask units (windows) or, with use_mask_unit_attn = false, globally.
class MaskUnitAttentionImpl : public torch::nn::Module {
 public:
  explicit MaskUnitAttentionImpl(const BlockSpec& spec);
  /// attn_mask: see functional::mask_unit_attention (token routing's padded batches).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& attn_mask = {});
  /// The attention itself: qkv projection output in, [B, N / q_stride, dim_out] out, before
  /// the output projection.
  torch::Tensor core(const torch::Tensor& qkv_out, const torch::Tensor& attn_mask = {});
  const BlockSpec& spec() const { return spec_; }
  /// Global blocks only: run SDPA on contiguous 4-D q/k/v (flash / memory-efficient
  /// kernels) instead of timm's 5-D layout (math kernel, T x T scores materialised).
  bool flash_4d = false;
  /// The engine's CPU kernels instead of SDPA: bf16 global attention (with flash_4d) through
  /// the AVX-512 BF16 kernel, float32 windowed or global attention through the AVX2 kernel.
  bool native_attention = false;
  /// The encoder stage this block belongs to (0-based), for NativeAttentionScope.
  size_t stage = 0;

  torch::nn::Linear qkv{nullptr}, proj{nullptr};

 private:
  BlockSpec spec_;
};
TORCH_MODULE(MaskUnitAttention);

/// timm Mlp: fc1 -> GELU (erf) -> fc2.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t dim, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

class HieraBlockImpl : public torch::nn::Module {
 public:
  explicit HieraBlockImpl(const BlockSpec& spec);
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& attn_mask = {});
  const BlockSpec& spec() const { return attn->spec(); }
  /// > 0: the token-wise parts of a block that keeps its width (LN1 + qkv; proj + residual,
  /// LN2 + MLP + residual) run over this many token rows at a time, so the 4x-wide MLP
  /// hidden rows and the normalised rows stay in cache instead of streaming through memory
  /// (stage 1 at 1024: 65536 x 448 floats = 117 MiB per MLP), where that was measured to pay
  /// (chunk_pays). Equal to the whole rows to float32 rounding: every op is row-wise; only
  /// a GEMM may reduce a row slice in another order (MKL on an Intel Xeon: a few ulp; bit-
  /// identical on the Zen 3 measured; test_functional, test_engine).
  int64_t token_chunk = 0;
  /// Whether chunking a block of this width over `rows` tokens paid in the measurements.
  bool chunk_pays(int64_t rows) const;
  bool chunk_always = false;  // tests: chunk whatever chunk_pays says

  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  MaskUnitAttention attn{nullptr};
  Mlp mlp{nullptr};
  torch::nn::Linear proj{nullptr};  // only in expanding blocks (dim != dim_out)

 private:
  torch::Tensor forward_chunked(const torch::Tensor& x);
};
TORCH_MODULE(HieraBlock);

/// Patch embedding conv; tokens come out in raster order [B, (S/4)^2, C].
class PatchEmbedImpl : public torch::nn::Module {
 public:
  explicit PatchEmbedImpl(const HieraConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

/// Replaces a block's forward (token routing): returns the block's output, or an undefined
/// tensor to run the block normally.
using BlockHook = std::function<torch::Tensor(size_t block, HieraBlockImpl& blk, const torch::Tensor& x)>;

/// The Hiera trunk (registered as "model" inside the encoder, like timm's features_only
/// FeatureGetterNet). forward() returns the four stage-end features, NCHW.
class HieraImpl : public torch::nn::Module {
 public:
  HieraImpl(const HieraConfig& c, int64_t img_size);
  /// `pos`: a position embedding for another input size than the module's (an engine's own,
  /// [1, g*g, C] for a g x g token grid); undefined = the module's pos_embed. Every other
  /// weight is the same at every size, so engines at several sizes share one module.
  std::vector<torch::Tensor> forward(const torch::Tensor& x, const BlockHook& hook = {},
                                     const torch::Tensor& pos = {});

  /// Switch the 4-D SDPA layout on/off for every global-attention block.
  void set_flash_attention(bool on);
  /// The engine's own CPU attention kernels per stage (index 0 = the first stage), as the
  /// measured plan decided each shape; functional::mask_unit_attention says which kernel
  /// takes which dtype and falls back to SDPA for the rest.
  void set_native_attention(const std::array<bool, 4>& by_stage);
  /// HieraBlockImpl::token_chunk for every block (0: whole rows).
  void set_token_chunk(int64_t rows);
  const HieraConfig& config() const { return cfg_; }
  int64_t grid() const { return grid_; }

  torch::Tensor pos_embed;
  PatchEmbed patch_embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};

 private:
  HieraConfig cfg_;
  int64_t grid_;                    // token grid side after patch embed (S/4)
  std::vector<int64_t> stage_ends_;
  std::vector<HieraBlock> block_refs_;
};
TORCH_MODULE(Hiera);

/// Wrapper that only exists to give the trunk the "encoder.model." key prefix.
class HieraEncoderImpl : public torch::nn::Module {
 public:
  HieraEncoderImpl(const HieraConfig& c, int64_t img_size);
  std::vector<torch::Tensor> forward(const torch::Tensor& x, const BlockHook& hook = {},
                                     const torch::Tensor& pos = {}) {
    return model->forward(x, hook, pos);
  }
  Hiera model{nullptr};
};
TORCH_MODULE(HieraEncoder);

}  // namespace corridorkey::model
