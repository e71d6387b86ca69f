#include "post/mattes.h"

#include <corridorkey/check.h>

#include <algorithm>
#include <cmath>

namespace corridorkey::post {
namespace {

bool usable(const Image* m, const Image& alpha, const char* what) {
  if (!m || m->empty()) return false;
  CK_CHECK(m->channels == 1 && m->width == alpha.width && m->height == alpha.height, ConfigError,
           what, " matte is ", m->width, "x", m->height, "x", m->channels, "; the frame needs ",
           alpha.width, "x", alpha.height, "x1");
  return true;
}

float clean(float v) { return std::isfinite(v) ? std::clamp(v, 0.f, 1.f) : 0.f; }

/// Appends to a note ("; " between parts); none when `note` is null.
void add(std::string* note, const std::string& text) {
  if (!note) return;
  if (!note->empty()) *note += "; ";
  *note += text;
}

}  // namespace

Image matte_plane(const Image& im, std::string* note) {
  Image out;
  out.width = im.width;
  out.height = im.height;
  out.channels = 1;
  const size_t n = static_cast<size_t>(im.width) * im.height;
  out.pixels.resize(n);
  const int c = im.channels;
  CK_CHECK(c >= 1, IoError, "matte has no channels");
  const float* p = im.pixels.data();
  // NaN or Inf reads as 0 (no region), said as a hint's NaNs are.
  if (note) note->clear();
  if (std::any_of(im.pixels.begin(), im.pixels.end(), [](float v) { return !std::isfinite(v); }))
    add(note, "NaN or infinite samples read as 0");
  if (c <= 2) {
    for (size_t i = 0; i < n; ++i) out.pixels[i] = clean(p[i * c]);
    return out;
  }
  bool grey = true, black = true, opaque = true;
  for (size_t i = 0; i < n && (grey || black); ++i) {
    const float r = p[i * c], g = p[i * c + 1], b = p[i * c + 2];
    grey = grey && r == g && r == b;
    black = black && r == 0.f && g == 0.f && b == 0.f;
  }
  for (size_t i = 0; i < n && c >= 4 && opaque; ++i) opaque = p[i * c + 3] == 1.f;
  // A shape saved with straight colour over transparency (white everywhere, the shape in
  // alpha) would read as a full-frame matte: said, since the colour rule cannot tell.
  const std::string alpha_note =
      c >= 4 && !opaque ? "; its alpha channel is not opaque and is not used (save the matte in "
                          "its colour channels, or with black colour and the matte in alpha)"
                        : "";
  // Black colour with an alpha that says something: the matte a paint tool saved as alpha
  // (black is grey too, so this comes first). Opaque black is an empty matte, not a full one.
  if (black && c == 4 && !opaque) {
    add(note, "colour channels are black: using its alpha channel");
    for (size_t i = 0; i < n; ++i) out.pixels[i] = clean(p[i * c + 3]);
  } else if (grey) {
    if (!alpha_note.empty()) add(note, "colour channels are grey: using R" + alpha_note);
    for (size_t i = 0; i < n; ++i) out.pixels[i] = clean(p[i * c]);
  } else {
    add(note, "colour channels differ: using max(R, G, B) per pixel" + alpha_note);
    for (size_t i = 0; i < n; ++i)
      out.pixels[i] = clean(std::max({p[i * c], p[i * c + 1], p[i * c + 2]}));
  }
  return out;
}

void apply_mattes(Image& alpha, const Image* garbage, const Image* holdout) {
  const bool g = usable(garbage, alpha, "garbage"), h = usable(holdout, alpha, "holdout");
  float* a = alpha.pixels.data();
  const size_t n = alpha.pixels.size();
  if (g)
    for (size_t i = 0; i < n; ++i) a[i] *= 1.f - garbage->pixels[i];
  if (h)
    for (size_t i = 0; i < n; ++i) a[i] = std::max(a[i], holdout->pixels[i]);
}

void clamp_to_mattes(Image& alpha, const Image* garbage, const Image* holdout) {
  const bool g = usable(garbage, alpha, "garbage"), h = usable(holdout, alpha, "holdout");
  float* a = alpha.pixels.data();
  const size_t n = alpha.pixels.size();
  if (g)
    for (size_t i = 0; i < n; ++i) a[i] = std::min(a[i], 1.f - garbage->pixels[i]);
  if (h)
    for (size_t i = 0; i < n; ++i) a[i] = std::max(a[i], holdout->pixels[i]);
}

void apply_garbage(Image& hint, const Image& garbage) {
  CK_CHECK(hint.channels == 1 && hint.width == garbage.width && hint.height == garbage.height,
           ConfigError, "garbage matte ", garbage.width, "x", garbage.height, " on a ", hint.width,
           "x", hint.height, "x", hint.channels, " hint");
  for (size_t i = 0; i < hint.pixels.size(); ++i) hint.pixels[i] *= 1.f - garbage.pixels[i];
}

}  // namespace corridorkey::post
