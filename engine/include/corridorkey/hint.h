// Alpha hints for plates that have none: the backing colour estimated per clip, then a
// colour-difference key with a morphological clean-up, an erosion and a blur, which gives
// the coarse, slightly eroded and feathered hint the model was trained with. Torch-free.
//
//   auto screen = corridorkey::estimate_screen({plate_first.view(), plate_last.view()});
//   corridorkey::Image hint = corridorkey::chroma_hint(plate.view(), screen);
//
// Plates are sRGB-encoded (convert scene-linear plates first). Blue screens: the estimate
// says so; chroma_hint keys them on their own channel.
//
// Thread-safety: every function here is pure (reads its arguments, allocates its result)
// and may be called from any number of threads at once.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/image.h>
#include <corridorkey/options.h>

#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct ScreenEstimate {
  Screen screen = Screen::Auto;  // Green or Blue once found
  float rgb[3] = {0, 0, 0};      // median colour of the backing (sRGB)
  /// Share of the (border-weighted) samples that are backing: 0.4 for a plate whose screen
  /// fills 40% of the frame. Estimates below 5% are refused.
  double coverage = 0;
};

/// The dominant saturated green or blue hue of the plates, with the frame border weighted
/// 3x (the subject is usually central, the screen reaches the edges). `want` restricts the
/// search to one backing. Throws IoError (naming `what`) when no backing of at least 5%
/// coverage is found.
CORRIDORKEY_API ScreenEstimate estimate_screen(const std::vector<ImageView>& plates,
                                               Screen want = Screen::Auto,
                                               const std::string& what = "plate");

struct ChromaHintOptions {
  double erode = 3.0;  // pixels of a 1080-line frame (scaled with the height)
  double blur = 6.0;   // blur radius, same unit
};

/// Coarse alpha [H,W,1] in 0..1 (1 = foreground) for an sRGB plate and its backing.
CORRIDORKEY_API Image chroma_hint(const ImageView& plate, const ScreenEstimate& screen,
                                  const ChromaHintOptions& options = {});

/// Swaps the green and blue channels of an RGB(A) float image in place: a blue-screen
/// plate becomes the green-screen plate the model knows, and back.
CORRIDORKEY_API void swap_green_blue(Image& image);

CORRIDORKEY_NAMESPACE_END
