#include "green_former.h"

#include <corridorkey/check.h>

#include <torch/nn/functional/upsampling.h>

namespace corridorkey::model {
namespace F = torch::nn::functional;

const std::vector<std::string>& GreenFormerOutput::names() {
  static const std::vector<std::string> n{
      "c1", "c2", "c3", "c4", "alpha_logits", "fg_logits", "alpha_logits_up", "fg_logits_up",
      "alpha_coarse", "fg_coarse", "delta_logits", "alpha", "fg"};
  return n;
}

torch::Tensor GreenFormerOutput::get(const std::string& name) const {
  for (size_t i = 0; i < 4; ++i)
    if (name == names()[i]) return i < features.size() ? features[i] : torch::Tensor();
  const std::pair<const char*, const torch::Tensor*> rest[] = {
      {"alpha_logits", &alpha_logits}, {"fg_logits", &fg_logits},
      {"alpha_logits_up", &alpha_logits_up}, {"fg_logits_up", &fg_logits_up},
      {"alpha_coarse", &alpha_coarse}, {"fg_coarse", &fg_coarse},
      {"delta_logits", &delta_logits}, {"alpha", &alpha}, {"fg", &fg}};
  for (const auto& [n, t] : rest)
    if (name == n) return *t;
  throw ModelError("unknown GreenFormer output '" + name + "'");
}

GreenFormerImpl::GreenFormerImpl(const GreenFormerConfig& config) : config_(config) {
  config_.validate();
  const auto ch = feature_channels(config_.encoder);
  encoder = register_module("encoder", HieraEncoder(config_.encoder, config_.encoder_size()));
  alpha_decoder = register_module("alpha_decoder", DecoderHead(ch, config_.decoder_dim, 1));
  fg_decoder = register_module("fg_decoder", DecoderHead(ch, config_.decoder_dim, 3));
  refiner = register_module("refiner", CNNRefiner(config_.refiner_channels,
                                                  config_.refiner_groups));
}

void GreenFormerImpl::to_channels_last() {
  torch::NoGradGuard ng;
  for (auto& p : parameters())
    if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
  alpha_decoder->invalidate_fused();
  fg_decoder->invalidate_fused();
}

GreenFormerOutput GreenFormerImpl::forward(const torch::Tensor& x, const ForwardOptions& opt) {
  const auto S = opt.img_size > 0 ? opt.img_size : config_.img_size;
  CK_CHECK(x.dim() == 4 && x.size(1) == config_.encoder.in_chans && x.size(2) == S &&
               x.size(3) == S,
           ModelError, "GreenFormer input must be [B,", config_.encoder.in_chans, ",", S, ",", S,
           "], got ", x.sizes());
  auto stage = [&](const char* s) {
    if (opt.on_stage) opt.on_stage(s);
  };
  GreenFormerOutput out;
  const auto layout = opt.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  // Decoupled sizes: the encoder sees the whole 4-channel input (normalised rgb + hint)
  // resized to backbone_size, exactly as the reference's GreenFormer does (bilinear,
  // align_corners=False, no antialias); the refiner below still gets the full-size x.
  const auto B = opt.img_size > 0 ? (opt.encoder_size > 0 ? opt.encoder_size : S) : config_.encoder_size();
  auto features = B == S ? encoder->forward(x.contiguous(layout), opt.encoder_block_hook, opt.pos_embed)
                         : encoder->forward(F::interpolate(x, F::InterpolateFuncOptions()
                                                                  .size(std::vector<int64_t>{B, B})
                                                                  .mode(torch::kBilinear)
                                                                  .align_corners(false))
                                                .contiguous(layout),
                                            opt.encoder_block_hook, opt.pos_embed);
  stage("encoder");
  auto alpha_logits = alpha_decoder->forward(features);
  auto fg_logits = fg_decoder->forward(features);
  if (opt.keep_intermediates) {
    out.features = std::move(features);
    out.alpha_logits = alpha_logits;
    out.fg_logits = fg_logits;
  } else {
    features.clear();  // the encoder features are the largest activations left
  }
  stage("decoders");
  auto up = [&](const torch::Tensor& t) {
    return F::interpolate(
        t, F::InterpolateFuncOptions().size(std::vector<int64_t>{S, S}).mode(torch::kBilinear)
               .align_corners(false));
  };
  auto alpha_up = up(alpha_logits);
  auto fg_up = up(fg_logits);
  alpha_logits = fg_logits = torch::Tensor();
  auto alpha_coarse = torch::sigmoid(alpha_up);
  auto fg_coarse = torch::sigmoid(fg_up);
  auto refiner_in = torch::cat({x.slice(1, 0, 3), alpha_coarse, fg_coarse}, 1).contiguous(layout);
  if (opt.keep_intermediates) {
    out.alpha_coarse = alpha_coarse;
    out.fg_coarse = fg_coarse;
  }
  alpha_coarse = fg_coarse = torch::Tensor();
  auto delta = opt.refiner_override ? opt.refiner_override(refiner_in)
                                    : refiner->forward_input(refiner_in);
  refiner_in = torch::Tensor();
  if (opt.refiner_scale != 1.0) delta = delta * opt.refiner_scale;
  stage("refiner");
  out.alpha = torch::sigmoid(alpha_up + delta.slice(1, 0, 1));
  out.fg = torch::sigmoid(fg_up + delta.slice(1, 1, 4));
  if (opt.keep_intermediates) {
    out.alpha_logits_up = alpha_up;
    out.fg_logits_up = fg_up;
    out.delta_logits = delta;
  }
  return out;
}

}  // namespace corridorkey::model
