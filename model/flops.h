// Nominal FLOPs of one GreenFormer forward, counted from its shapes as PyTorch's
// torch.utils.flop_counter.FlopCounterMode counts the reference forward: 2 per multiply-add
// of every convolution and matrix product (biases not counted), and 4 x queries x keys x
// width per attention (q k^T, then the weights times v). Norms, softmax, GELU, resizes and
// the rest of the elementwise work are not counted. It is the reference's arithmetic,
// whatever runs it: Winograd convolutions and token routing do less of it, so a stage can
// run "above" the GEMM rate (bench --roofline, docs/performance.md). Checked against
// FlopCounterMode on the reference at two sizes by tools/check_flops.py (ctest tools.flops).
#pragma once

#include "config.h"

#include <array>

namespace corridorkey::model {

struct FrameFlops {
  /// Per encoder stage: the patch embedding (stage 1) and every Linear layer.
  std::array<double, 4> stage_linear{};
  /// Per encoder stage: the attention products.
  std::array<double, 4> stage_attention{};
  /// The attention products split by kind: global blocks (every token a key) and
  /// mask-unit (windowed) blocks. They sum to encoder_attention().
  double global_attention = 0, windowed_attention = 0;
  /// Attention scores per frame (queries x keys x heads), one exponential each, by kind.
  /// Not FLOPs: FlopCounterMode counts no softmax; attention's own ceiling depends on them.
  double global_scores = 0, windowed_scores = 0;
  double decoders = 0;  // both heads
  double refiner = 0;

  double encoder_linear() const { return stage_linear[0] + stage_linear[1] + stage_linear[2] + stage_linear[3]; }
  double encoder_attention() const {
    return stage_attention[0] + stage_attention[1] + stage_attention[2] + stage_attention[3];
  }
  double encoder() const { return encoder_linear() + encoder_attention(); }
  double total() const { return encoder() + decoders + refiner; }
};

/// The counts at cfg's sizes: the encoder and decoders at encoder_size(), the refiner at
/// img_size (a decoupled backbone), batch 1.
FrameFlops frame_flops(const GreenFormerConfig& cfg);

}  // namespace corridorkey::model
