// The one synthetic clip generator, shared by `bench --pipeline`, the C++ tests and (through
// tests/support/make_clip.cpp) the CLI test scripts: a foreground disc drifting over a
// green screen, written the way users' tools write plates and hints.
#pragma once

#include <corridorkey/image.h>

#include <filesystem>
#include <string>

namespace corridorkey::devtools {

struct SyntheticClip {
  int frames = 4;
  int width = 320, height = 180;
  /// Plates: "exr" (scene-linear half float, RGB), "png" (8-bit), "png16", "tif" (16-bit).
  std::string plate_format = "exr";
  /// Hints: "png16" (16-bit grey), "png" (8-bit grey), "exr" (one Y channel).
  std::string hint_format = "png16";
  std::string plate_prefix = "plate_", hint_prefix = "hint_";  // <prefix>0001.<ext>
  int digits = 4;
  double soft_edge_px = 0;  // 0: a hard-edged disc; > 0: a linear ramp that wide
  double noise = 0;         // amplitude of a deterministic per-pixel pattern added to the plate
  /// "green"; "blue" (the same subject over a blue backing); "swapped" (the green plate with
  /// green and blue exchanged: the exact blue twin of the green clip).
  std::string screen = "green";
  bool hints = true;        // false: no AlphaHint/ (hints to be generated)
};

/// Frame f (0-based): the plate [H,W,3] and the true alpha / hint [H,W,1].
Image synthetic_plate(const SyntheticClip& clip, int frame);
Image synthetic_hint(const SyntheticClip& clip, int frame);

/// Writes <dir>/Input/ and <dir>/AlphaHint/ (creating them); returns dir.
std::filesystem::path write_synthetic_clip(const std::filesystem::path& dir,
                                           const SyntheticClip& clip);

/// Writes one hint image in the clip's hint format (tests replace single frames with it).
void write_synthetic_hint(const std::string& path, const SyntheticClip& clip, int frame);

}  // namespace corridorkey::devtools
