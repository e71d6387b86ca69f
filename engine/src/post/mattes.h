// Garbage and holdout mattes on plain float images (docs/clips.md, "Garbage and holdout
// mattes"): a matte file reduced to one channel, and the two rules that apply them. Torch-free.
#pragma once

#include <corridorkey/image.h>

#include <string>

namespace corridorkey::post {

/// One channel of a matte file, by the hint's rule (hint_to_tensor): 1-2 channels: the first;
/// grey saved as RGB: R; RGBA with black colour: A; else max(R, G, B), said in *note. NaN and
/// Inf become 0 and values are clamped to 0..1 (a float EXR painted past white still marks
/// exactly the region).
Image matte_plane(const Image& im, std::string* note = nullptr);

/// alpha = max(alpha x (1 - garbage), holdout), per pixel; a null or empty matte is none. The
/// final matte: exactly 0 where garbage is 1, exactly 1 where holdout is 1, the mattes' own
/// grey values the soft edge.
void apply_mattes(Image& alpha, const Image* garbage, const Image* holdout);

/// alpha = max(min(alpha, 1 - garbage), holdout): the mattes' bounds put back on an alpha
/// derived from an already matted one (despeckled). It leaves a matted alpha unchanged
/// (idempotent on apply_mattes' result), unlike applying the mattes a second time, which
/// would square the garbage matte's soft edge.
void clamp_to_mattes(Image& alpha, const Image* garbage, const Image* holdout);

/// hint x (1 - garbage) for a one-channel hint of the same size.
void apply_garbage(Image& hint, const Image& garbage);

}  // namespace corridorkey::post
