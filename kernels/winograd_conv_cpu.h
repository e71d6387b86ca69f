// 3x3 float32 convolution by Winograd's minimal filtering F(2x2, 3x3), channels-last, any
// dilation, zero padding, stride 1: the refiner's eight 64 -> 64 convolutions.
//
// Why: those eight convolutions are 0.62 TFLOP of a 1.69 TFLOP frame at 1024 (2.5 TFLOP
// at 2048), the largest single share of the float32 path, and the direct convolution
// (oneDNN) already runs them near the machine's GEMM rate: 168-292 ms each at 1024 on 2
// threads of a Zen 5 (265-460 GFLOP/s). F(2x2, 3x3) computes each 2x2 output tile from a 4x4 input tile
// with 16 multiplications per channel pair instead of 36: 2.25x fewer, at the price of
// transforms that cost a third of a call: 106-130 ms. LibTorch's own NNPACK F(6x6, 3x3) took
// 171-215 ms there (no dilation), with 8x the error (2.1e-5 against 2.5e-6 at output scale
// 1.65). All measured by ck_tests "Winograd convolution speed*".
//
// Dilation d: the 2x2 tile's outputs are d apart and its 4x4 inputs are d apart, so the
// dilated convolution is the plain one on each of the d x d interleaved sub-grids, with no
// copy into a sub-grid layout.
//
// Numerics: the transforms' coefficients are 0, +-1 and +-1/2 (exact in binary); the
// transformed weights are computed in double and rounded once; each of the 16 products sums
// its input channels in order with FMA. Against a float64 convolution the error is of the
// direct float32 convolution's size (test_kernels.cpp bounds both). The AVX-512 and AVX2
// variants do the same operations per element in the same order: the same bits.
#pragma once

#include <cstdint>
#include <string>

namespace corridorkey::kernels {

struct WinogradConvF32 {
  const float* in = nullptr;  // [n, h, w, cin] contiguous (a channels-last NCHW tensor)
  int64_t n = 0, h = 0, w = 0, cin = 0;
  const float* weights = nullptr;  // winograd_weights_f32's output: [16, cin, cout]
  const float* bias = nullptr;     // [cout] or null
  float* out = nullptr;            // [n, ho, wo, cout], ho = h + 2 pad - 2 dilation
  int64_t cout = 0, dilation = 1, pad = 1;
};

/// True when the CPU has AVX2 + FMA and the kernel passed its start-up self-test (once, on
/// a small odd-sized problem against a float64 direct convolution).
bool winograd_conv_f32_available();
/// "avx512", "avx2" or "none"; both variants give the same bits.
std::string winograd_conv_f32_isa();
/// Tests: run "avx2" or "avx512" from now on ("auto" restores the default, AVX-512 where it
/// passes its self-test). False, changing nothing, when that variant does not run here.
bool winograd_conv_f32_use_isa(const std::string& isa);
/// Channel counts the kernel takes: both multiples of 16.
bool winograd_conv_f32_supported(int64_t cin, int64_t cout);
/// G g G^T of every [cout, cin, 3, 3] filter, in double, as [16, cin, cout] float32 (u must
/// hold 16 cin cout floats). 64 x 64 filters: 64 KiB, ~0.1 ms, so callers need not cache it.
void winograd_weights_f32(const float* weight, int64_t cout, int64_t cin, float* u);
/// The convolution, parallel over tiles (at::parallel_for). Output size ho = h + 2 pad -
/// 2 dilation, wo likewise, both >= 1.
void winograd_conv_f32(const WinogradConvF32& p);
/// Calls of winograd_conv_f32 so far in this process (tests: proof that a path ran).
int64_t winograd_conv_f32_calls();

}  // namespace corridorkey::kernels
