#include "flops.h"

#include <algorithm>

namespace corridorkey::model {

FrameFlops frame_flops(const GreenFormerConfig& cfg) {
  FrameFlops f;
  const auto& e = cfg.encoder;
  const double side = static_cast<double>(cfg.encoder_size());
  const double gh = side / static_cast<double>(e.patch_stride[0]), gw = side / static_cast<double>(e.patch_stride[1]);
  // Patch embedding: a strided convolution, one output per token.
  f.stage_linear[0] = 2 * gh * gw * static_cast<double>(e.embed_dim * e.in_chans * e.patch_kernel[0] * e.patch_kernel[1]);

  const auto specs = block_specs(e);
  const auto ends = stage_ends(e);
  double n = gh * gw;  // tokens into the block
  size_t stage = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& b = specs[i];
    const double d = static_cast<double>(b.dim), dout = static_cast<double>(b.dim_out);
    const double nq = n / static_cast<double>(b.q_stride);  // tokens out of the block
    double lin = 2 * n * d * 3 * dout;                        // qkv, over every token in
    if (b.dim != b.dim_out) lin += 2 * n * d * dout;          // the expanding block's projection
    lin += 2 * nq * dout * dout;                              // attention output projection
    lin += 2 * 2 * nq * dout * static_cast<double>(b.mlp_hidden);  // fc1 and fc2
    // Keys per query: a mask unit's tokens (windowed), or every token (global).
    const double keys = b.mask_unit_attn ? static_cast<double>(b.q_stride * b.window_size) : n;
    f.stage_linear[stage] += lin;
    f.stage_attention[stage] += 4 * nq * keys * dout;
    (b.mask_unit_attn ? f.windowed_attention : f.global_attention) += 4 * nq * keys * dout;
    (b.mask_unit_attn ? f.windowed_scores : f.global_scores) += nq * keys * static_cast<double>(b.heads);
    n = nq;
    if (stage < ends.size() && static_cast<int64_t>(i) == ends[stage]) stage = std::min<size_t>(stage + 1, 3);
  }

  // Decoder heads: a Linear per feature level to decoder_dim, a 1x1 fuse of the four, a 1x1
  // classifier; alpha (1 channel) and fg (3).
  const auto ch = feature_channels(e);
  const double dd = static_cast<double>(cfg.decoder_dim);
  const double c1 = (side / 4) * (side / 4);
  for (const double out : {1.0, 3.0}) {
    for (size_t i = 0; i < ch.size(); ++i) {
      const double s = side / static_cast<double>(int64_t{4} << i);
      f.decoders += 2 * s * s * static_cast<double>(ch[i]) * dd;
    }
    f.decoders += 2 * c1 * static_cast<double>(ch.size()) * dd * dd + 2 * c1 * dd * out;
  }

  // Refiner at img_size: a 3x3 stem from 7 channels, four residual blocks of two 3x3
  // convolutions, a 1x1 to 4 channels.
  const double px = static_cast<double>(cfg.img_size) * static_cast<double>(cfg.img_size);
  const double rc = static_cast<double>(cfg.refiner_channels);
  f.refiner = 2 * px * rc * 7 * 9 + 4 * 2 * (2 * px * rc * rc * 9) + 2 * px * 4 * rc;
  return f;
}

}  // namespace corridorkey::model
