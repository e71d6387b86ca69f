// A frame's garbage and holdout mattes (docs/clips.md, "Garbage and holdout mattes"): where
// a clip's come from, which file is which frame's, and the images read made into planes the
// size of the keyed frame. The rules that apply them are post/mattes.h; prepare_frame
// multiplies the hint with the garbage matte, to_plate applies both to the alpha.
#pragma once

#include <corridorkey/frame.h>
#include <corridorkey/options.h>

#include "io/clip.h"
#include "io/plate_metadata.h"

#include <memory>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

/// A clip's matte sources: the run's (InferenceOptions::garbage_matte / holdout_matte) when
/// given, else the clip's GarbageMatte/ and HoldoutMatte/.
struct MatteSources {
  io::FrameSource garbage, holdout;
  bool any() const { return !garbage.empty() || !holdout.empty(); }
  bool has_video() const { return garbage.is_video() || holdout.is_video(); }
};

/// A matte as read: its pixels and, for an EXR, its windows (read as a plate is: the union of
/// its data and display windows, so a matte rendered with the plate's overscan covers it).
struct MatteRead {
  Image image;
  std::shared_ptr<const io::PlateMetadata> windows;
};

/// Reads a matte file (IoError naming it); see MatteRead.
MatteRead read_matte(const std::string& file, const io::DecodeLimits& limits);

/// The sources for `clip` keying `n` frames: one image is every frame's, otherwise they pair
/// with the plates by position. IoError naming the matte's folder when it has fewer frames
/// than the clip keys, or more without allow_mismatch (then a warning in `warnings`).
MatteSources resolve_mattes(const io::Clip& clip, const InferenceOptions& job, int n,
                            std::vector<std::string>& warnings);

/// Where a source's mattes come from, as run.json and the plan's note say it: its video, its
/// one file, or its folder; "" for none.
std::string matte_origin(const io::FrameSource& src);

/// The file of frame `index` (0-based): the one file of a single-image source, else the
/// index-th; "" for none or a video.
std::string matte_file(const io::FrameSource& src, int index);

/// The mattes read for one frame made into planes of the keyed frame's size (width x height):
/// each reduced to one channel (post::matte_plane: NaN to 0, clamped to 0..1). An EXR matte
/// whose display window is the plate's is placed by its windows' coordinates (what it lacks
/// of the keyed frame: none). Otherwise a plate-sized one as it is, and one the size of an
/// overscan plate's display window placed on it, the overscan getting none. Any other size is
/// an IoError naming the file (`*_file`). Null when both are empty. Notes (a coloured matte's
/// channel rule) go to `warnings`.
std::shared_ptr<const FrameMattes> frame_mattes(MatteRead garbage, const std::string& garbage_file,
                                                MatteRead holdout, const std::string& holdout_file,
                                                int width, int height, const io::PlateMetadata* meta,
                                                std::vector<std::string>& warnings);

}  // namespace corridorkey::pipeline
