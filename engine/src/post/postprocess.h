// Post-processing with the reference CPU path's exact semantics (OpenCV), on plain float
// images. The constants below are the reference's; tests/unit/test_postprocess.cpp pins
// its known values (comp 0.545655 for alpha 0.8, fg 0.6 over the first checker square).
#pragma once

#include <corridorkey/image.h>

#include "post/srgb_transfer.h"

namespace corridorkey::post {

constexpr int kCheckerSize = 128;
constexpr float kCheckerDark = 0.15f, kCheckerLight = 0.55f;  // sRGB
constexpr int kDespeckleDilation = 25;   // 51x51 ellipse
constexpr int kDespeckleBlur = 5;        // 11x11 Gaussian, sigma from OpenCV's rule (2.0)

/// Lanczos-4 resize (cv::INTER_LANCZOS4, may overshoot like the reference: not clamped).
Image resize_lanczos(const Image& src, int width, int height);

/// Keeps connected components (8-connectivity) of alpha > 0.5 with area >= min_area,
/// dilates them with a 51x51 ellipse, blurs the uint8 mask 11x11, returns alpha * mask/255.
Image despeckle(const Image& alpha, int min_area);

/// "average" despill on sRGB straight fg, blended by strength 0..1, of the backing's
/// channel (1 = green, the reference's; 2 = blue). `threads` split the rows (the result is
/// the same for any count).
Image despill(const Image& fg, float strength, int backing_channel = 1, int threads = 1);

/// sRGB -> linear per sample: the first step of both premultiply_linear and checker_comp,
/// as full-frame steps (the FG EXR writer's, and the reference the one-pass
/// despill_premultiply_comp below is tested against). The *_from_linear forms give
/// bit-identical results to the two above.
Image to_linear(const Image& fg_srgb, int threads = 1);
Image premultiply_from_linear(const Image& fg_linear, const Image& alpha, int threads = 1);
Image checker_comp_from_linear(const Image& fg_linear, const Image& alpha, int threads = 1);

/// [fg_lin * a, a]: linear premultiplied RGBA from sRGB straight fg and alpha.
Image premultiply_linear(const Image& fg_srgb, const Image& alpha);

/// sRGB composite over the 128 px checkerboard (0.15 / 0.55 sRGB), blended in linear light.
Image checker_comp(const Image& fg_srgb, const Image& alpha);

/// despill -> sRGB to linear -> processed (linear premultiplied RGBA) and / or comp (sRGB
/// over the checkerboard) in one pass over rows, with row-sized temporaries: the same bits
/// as despill + to_linear + premultiply_from_linear + checker_comp_from_linear (test), but
/// no full-frame intermediates. Why: at 1920x1080 the despilled and linear copies are 50 MB
/// whose allocation and first-touch page faults, with two more passes over memory, were
/// most of a frame.repost's post-processing once the transfer function was vectorised.
/// `alpha` is the (despeckled) matte; a null output is not computed; an output that already
/// holds an image of the right size is overwritten in place (no allocation).
void despill_premultiply_comp(const Image& fg_srgb, const Image& alpha, float despill_strength,
                              int backing_channel, Image* processed, Image* comp, int threads = 1);


}  // namespace corridorkey::post
