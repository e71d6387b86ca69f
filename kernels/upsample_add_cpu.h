// Bilinear upsampling (align_corners = false, as F::interpolate) of a channels-last float32
// map, written or added straight into a channels-last accumulator.
//
// Why: the fused decoders resize three projected scales (32^2, 64^2, 128^2 at 1024) to S/4
// with 256 channels and sum them. Through LibTorch that is an interpolate (a new 64 MiB map,
// ~42 ms on 2 threads of a Xeon 6/207) and an add_ (another pass) per scale and head: 0.66 s
// of a 10.9 s float32 frame (bench --ops). Here each output pixel is 4 weighted rows of the
// small input added into the accumulator in one pass.
//
// Numerics: the source index and the two lambdas per axis are LibTorch's formulas
// (scale = in / out in float, src = scale (dst + 0.5) - 0.5 clamped at 0); the four weighted
// taps are summed in one fixed order, which may differ from LibTorch's by float32 rounding
// (test_kernels.cpp bounds it).
#pragma once

#include <cstdint>

namespace corridorkey::kernels {

/// out[n, y, x, :] = (accumulate ? out[n, y, x, :] : 0) + bilinear(in)[n, y, x, :], both
/// contiguous [N, H, W, C] float32; parallel over output rows.
void upsample_bilinear_add_nhwc(const float* in, int64_t n, int64_t hi, int64_t wi, int64_t c,
                                float* out, int64_t ho, int64_t wo, bool accumulate);

}  // namespace corridorkey::kernels
