// Grey-level morphology and blurs on one-channel float images (row-major W x H), each
// separable and O(1) per pixel whatever the radius: a 4K hint is eroded and blurred in
// tens of milliseconds.
#pragma once

#include <vector>

namespace corridorkey::hint {

/// Minimum (erode) / maximum (dilate) over a (2r+1) x (2r+1) square; samples outside the
/// image do not take part (the border is neither eroded nor grown from outside).
void min_filter(std::vector<float>& a, int w, int h, int r);
void max_filter(std::vector<float>& a, int w, int h, int r);

/// Three box passes of radius r (edges clamped): a Gaussian of sigma ~ sqrt(r (r + 1)).
void box_blur3(std::vector<float>& a, int w, int h, int r);

}  // namespace corridorkey::hint
