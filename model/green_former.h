// GreenFormer: Hiera encoder -> alpha / fg decoder heads -> bilinear upsample -> CNN refiner.
#pragma once

#include "config.h"
#include "decoder_head.h"
#include "hiera.h"
#include "refiner.h"

#include <functional>
#include <string>
#include <vector>

namespace corridorkey::model {

/// Every tensor the forward pass produces, in the order of the TorchScript export's tuple.
/// Stages the caller did not ask for stay undefined (see ForwardOptions::keep_intermediates).
struct GreenFormerOutput {
  std::vector<torch::Tensor> features;      // c1..c4, NCHW
  torch::Tensor alpha_logits, fg_logits;    // encoder_size / 4
  torch::Tensor alpha_logits_up, fg_logits_up;
  torch::Tensor alpha_coarse, fg_coarse;
  torch::Tensor delta_logits;               // refiner output * refiner_scale
  torch::Tensor alpha, fg;                  // final, [B,1,S,S] and [B,3,S,S]

  /// Names in export order: c1 c2 c3 c4 alpha_logits ... alpha fg.
  static const std::vector<std::string>& names();
  /// Tensor by export name (undefined if not kept).
  torch::Tensor get(const std::string& name) const;
};

struct ForwardOptions {
  double refiner_scale = 1.0;
  /// false: drop features/logits as soon as they are consumed (only alpha, fg returned).
  bool keep_intermediates = true;
  /// Runs the refiner on its 7-channel input; empty = the plain untiled refiner.
  std::function<torch::Tensor(const torch::Tensor&)> refiner_override;
  /// Called between stages ("encoder", "decoders", "refiner") e.g. to release caches.
  std::function<void(const char* stage_done)> on_stage;
  /// Replaces encoder blocks' forward (token routing); see BlockHook.
  BlockHook encoder_block_hook;
  /// Feed the convolutions channels-last tensors (call to_channels_last() on the model
  /// first, so the weights match).
  bool channels_last = false;
  /// Another model size than the module's config: the engine's img_size, the size its
  /// encoder runs at (backbone_size or img_size) and pos_embed resized to that encoder
  /// grid. 0 / undefined: the module's own. Only pos_embed depends on the size, so engines
  /// at several sizes run one module (one copy of the weights) with their own pos_embed.
  int64_t img_size = 0, encoder_size = 0;
  torch::Tensor pos_embed;
};

class GreenFormerImpl : public torch::nn::Module {
 public:
  explicit GreenFormerImpl(const GreenFormerConfig& config);
  GreenFormerOutput forward(const torch::Tensor& x, const ForwardOptions& opt = {});

  const GreenFormerConfig& config() const { return config_; }
  void set_flash_attention(bool on) { encoder->model->set_flash_attention(on); }
  /// Every convolution weight to channels-last memory (same values; oneDNN / cuDNN pick
  /// their NHWC kernels when input and weight are channels-last).
  void to_channels_last();
  void set_fused_decoders(bool on) {
    alpha_decoder->fused = on;
    fg_decoder->fused = on;
  }

  HieraEncoder encoder{nullptr};
  DecoderHead alpha_decoder{nullptr}, fg_decoder{nullptr};
  CNNRefiner refiner{nullptr};

 private:
  GreenFormerConfig config_;
};
TORCH_MODULE(GreenFormer);

}  // namespace corridorkey::model
