// The refiner's 3x3 convolutions, through Winograd's F(2x2, 3x3) where the measured plan
// timed it faster (engine option winograd_conv), else through at::conv2d (oneDNN).
#pragma once

#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <torch/types.h>

namespace corridorkey::model::functional {

/// m applied to x with zero padding `pad` on every side (m's own padding when pad < 0).
/// Inside a WinogradConvScope, a float32 channels-last CPU input to a 3x3, stride-1,
/// ungrouped convolution with 16k input and output channels (the refiner's eight 64 -> 64
/// ones; 16 -> 16 in the tiny and small models) runs through kernels::winograd_conv_f32; the result is channels-last as
/// at::conv2d's, and within float32 rounding of it (test_kernels.cpp, test_tune.cpp).
torch::Tensor conv2d(const torch::nn::Conv2d& m, const torch::Tensor& x, int64_t pad = -1);

/// While alive, conv2d() on this thread takes the Winograd path where the shape allows.
/// On a 2-core AMD EPYC Zen 5 a 64 -> 64 convolution of a 1024^2 map took 106-130 ms that
/// way against oneDNN's 168-292 ms (dilations 1-8; ck_tests "Winograd convolution speed*"). Nests. A no-op where the kernel is not
/// available (winograd_conv_available()).
class WinogradConvScope {
 public:
  explicit WinogradConvScope(bool on);
  ~WinogradConvScope();
  WinogradConvScope(const WinogradConvScope&) = delete;
  WinogradConvScope& operator=(const WinogradConvScope&) = delete;

 private:
  bool previous_;
};
/// Whether the kernel runs on this CPU (AVX2 + FMA and its start-up self-test).
bool winograd_conv_available();
/// Why a refiner of `channels` channels cannot run its convolutions by Winograd on this CPU
/// (the kernel, channels-last maps, its channel counts), or nullptr where it can: the one
/// rule the plan, the runner and the reports share.
const char* winograd_refiner_unavailable(bool channels_last, int64_t channels);
/// Whether conv2d(m, x) would take the Winograd path here.
bool winograd_conv_active(const torch::nn::Conv2d& m, const torch::Tensor& x);

}  // namespace corridorkey::model::functional
