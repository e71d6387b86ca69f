// Clips as `inference` finds them, and their frame files read as the clip pipeline reads
// them: for tools that look at clips and their outputs (`corridorkey-engine review`).
// Torch-free.
//
//   for (const auto& c : corridorkey::list_clips({"/shots"}))
//     corridorkey::Image plate = corridorkey::read_frame_file(c.input.files.front());
//
// Thread-safety: every function here reads files and returns new values; any thread,
// concurrently.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/image.h>
#include <corridorkey/version.h>

#include <cstdint>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// A clip's plates or hints: an image sequence or one video.
struct ClipFrames {
  std::string video;               // the video file; empty for an image sequence
  std::vector<std::string> files;  // the sequence, natural-sorted (empty for a video)
  int count = 0;                   // frames (a video's as its container reports them)
  double fps = 0;                  // a video's frame rate; 0 when unknown or a sequence
};

struct ClipListing {
  std::string name, root;  // root: the clip folder
  ClipFrames input;
  ClipFrames hint;  // count 0: no AlphaHint (inference generates hints)
  /// GarbageMatte/ and HoldoutMatte/ (count 0: none; one file: for every frame).
  ClipFrames garbage, holdout;
  /// Where `inference` writes the clip's outputs: <root>/Output, or <output_root>/<name>.
  std::string output;
  /// Each input frame's output file name without extension, as `inference` names it
  /// (the plate's stem; a video's 0-based index padded to 5 digits).
  std::vector<std::string> stems;
  std::vector<std::string> warnings;  // found while listing it (files that are not frames)
};

/// The clips under each path, found exactly as `inference` finds them (a clip folder, a
/// clips root, or several; docs/clips.md "Layout"). IoError naming the path when it holds no
/// clip; an unreadable clip of a clips root is skipped and named in `skipped` when given.
CORRIDORKEY_API std::vector<ClipListing> list_clips(const std::vector<std::string>& paths,
                                                    const std::string& output_root = "",
                                                    std::vector<std::string>* skipped = nullptr);

/// Reads a frame file as the clip pipeline reads it: float32 HWC, 8-bit /255, 16-bit
/// /65535, float as stored; channels as stored (1 for a grey or single-channel EXR). A
/// header over `max_pixels`, or whose decoding would hold more than half of the memory this
/// process may still use, is refused before decoding. IoError naming the file.
CORRIDORKEY_API Image read_frame_file(const std::string& path,
                                      int64_t max_pixels = int64_t{16384} * 16384);

/// Frame `index` (0-based) of a video as the pipeline decodes it (RGB 0..1). Decodes from
/// the start: the cost grows with the index. IoError naming the file past its end.
CORRIDORKEY_API Image read_video_frame(const std::string& path, int index);

CORRIDORKEY_NAMESPACE_END
