// Stateless tensor helpers of the Hiera encoder (in the spirit of torch::nn::functional):
// the token reorderings and the attention core. Shapes follow timm's hiera.py exactly, so
// the native model reproduces the reference op for op.
#pragma once

#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <torch/types.h>

namespace corridorkey::model::functional {

/// A Linear module applied through at::linear, which fuses the bias into the GEMM (addmm)
/// for inputs of any rank. torch::nn::Linear::forward (torch::nn::functional::linear) runs a
/// 3-D input as matmul + a separate bias add: one more pass over every output, ~190 ms of a
/// 1024 bf16 frame on 2 cores (bench --ops). Same math up to rounding order.
/// Inside a OnednnLinearScope, float32 CPU inputs go through oneDNN's matmul instead.
torch::Tensor linear(const torch::nn::Linear& m, const torch::Tensor& x);
/// GELU (exact, erf) of linear(m, x): inside a OnednnLinearScope (float32 CPU) as the
/// matmul's fused epilogue, else at::gelu_ in place on the output.
torch::Tensor linear_gelu(const torch::nn::Linear& m, const torch::Tensor& x);

/// While alive, float32 CPU linear() / linear_gelu() calls on this thread run through
/// oneDNN's matmul (LibTorch's mkldnn::_linear_pointwise, dense weights, no packed copy)
/// instead of at::linear, whose float32 GEMM is MKL's. On a 2-core AMD EPYC Zen 5 the
/// encoder's Linear shapes ran 1.2-2.6x faster through oneDNN (65536x448x112: 45.7 -> 17.7
/// ms; 16384x448x1344 + GELU: 174 -> 74 ms); MKL is Intel's own and may win on Intel CPUs,
/// so the measured plan chooses (tune_plan.cpp, decision "onednn_linear"). Same products and sums in
/// another order: within float32 rounding (test_functional.cpp). A no-op where LibTorch
/// has no oneDNN (onednn_linear_available()). Nests.
class OnednnLinearScope {
 public:
  explicit OnednnLinearScope(bool on);
  ~OnednnLinearScope();
  OnednnLinearScope(const OnednnLinearScope&) = delete;
  OnednnLinearScope& operator=(const OnednnLinearScope&) = delete;

 private:
  bool previous_;
};
/// Whether this LibTorch has oneDNN's matmul op (mkldnn::_linear_pointwise).
bool onednn_linear_available();
/// Whether linear(m, x) would run through oneDNN here: a scope is on, x is float32 on a
/// CPU, no autograd, and the process-wide float32 matmul precision is IEEE (not TF32/BF16).
bool onednn_linear_active(const torch::Tensor& x);
/// Linear layers run through oneDNN in this process so far (all threads): tests observe the
/// path taken with it.
uint64_t onednn_linear_calls();

/// Hiera "unroll": [B, H*W, C] raster tokens -> [B, H*W, C] with `levels` rounds of
/// stride-(sy,sx) patches moved outward, so that after 3 rounds of 2x2 the mask-unit
/// (window) index varies fastest: token (y, x) goes to
///   n = s * (H/8 * W/8) + (y>>3) * (W/8) + (x>>3),  s = bits y0 x0 y1 x1 y2 x2 (y0 = y&1 first).
torch::Tensor unroll(const torch::Tensor& x, int64_t height, int64_t width, int64_t levels,
                     int64_t sy, int64_t sx);

/// Inverse of the `levels` unroll rounds still pending at a feature tap, followed by
/// undoing the mask-unit windowing: [B, N, C] -> spatial [B, height, width, C].
torch::Tensor reroll(const torch::Tensor& x, int64_t height, int64_t width, int64_t levels,
                     int64_t sy, int64_t sx);

/// Raster index of every token position in unrolled order (for routing masks and tests):
/// result[n] = y * width + x of the token stored at position n.
torch::Tensor unrolled_positions(int64_t height, int64_t width, int64_t levels, int64_t sy,
                                 int64_t sx);

/// Mask-unit attention core: qkv [B, N, 3*heads*head_dim] (channel layout [3][heads][d]).
/// num_windows = 1 is global attention. q_stride > 1 max-pools q over the q_stride
/// sub-tokens. Returns [B, N/q_stride, heads*head_dim], before the output projection.
///
/// four_d = false keeps timm's 5-D [B, heads, windows, T, d] tensors, which SDPA serves
/// with its math kernel (it materialises the T x T scores). four_d = true (only used for
/// num_windows == 1) hands SDPA contiguous 4-D [B, heads, N, d] so the flash /
/// memory-efficient kernels run: same result up to summation order (~1e-6 in fp32).
/// attn_mask (optional, global attention only): [B, 1, 1, N] bool, true = may attend.
/// native: the engine's own CPU kernels instead of LibTorch's SDPA. bf16 (four_d, global
/// only) on a CPU with AVX-512 BF16: kernels::native_attention_bf16 (attention_cpu.h).
/// float32 (windowed and global) on a CPU with AVX2 + FMA: kernels::native_attention_f32
/// straight on qkv, no layout copies (attention_f32_cpu.h). Anything a kernel does not
/// take (a mask, another dtype or device) falls back to SDPA.
torch::Tensor mask_unit_attention(const torch::Tensor& qkv, int64_t heads, int64_t num_windows,
                                  int64_t q_stride, bool four_d,
                                  const torch::Tensor& attn_mask = {}, bool native = false);

}  // namespace corridorkey::model::functional
