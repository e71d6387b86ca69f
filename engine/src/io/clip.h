// Clip discovery: the folder conventions users know from the reference.
//   <clip>/Input/ (image sequence or one video) or <clip>/Input.<ext>
//   <clip>/AlphaHint/ (image sequence or one video) or <clip>/AlphaHint.<ext>; optional
//     (a clip without one is keyed from generated hints, InferenceOptions::hint)
//   <clip>/GarbageMatte/ and <clip>/HoldoutMatte/ (a sequence, one video, or one file for
//     every frame); optional
//   <clip>/Output/{FG,Matte,Processed,Comp}/ written by the engine
// A clips root holds clips/<name>/ or direct subfolders (natural-sorted, names starting
// with '.' or '_' skipped). Torch-free.
#pragma once

#include <string>
#include <vector>

namespace corridorkey::io {

struct FrameSource {
  std::string video;                 // set for a video source
  std::vector<std::string> frames;   // image sequence, natural-sorted
  int video_frames = 0;              // reported frame count of the video
  double video_fps = 0;              // its frame rate (0 when unknown)
  bool is_video() const { return !video.empty(); }
  bool empty() const { return video.empty() && frames.empty(); }
  int count() const { return is_video() ? video_frames : static_cast<int>(frames.size()); }
};

struct Clip {
  std::string name, root;
  FrameSource input, hint;
  FrameSource garbage, holdout;  // GarbageMatte/, HoldoutMatte/: empty when none
  std::vector<std::string> warnings;  // found while listing it (ignored files), for the run
};

/// Natural ("human") order: frame2 < frame10; case-insensitive on the non-digit parts.
bool natural_less(const std::string& a, const std::string& b);

/// Clips under each path (a clip folder, a clips root, or several). IoError naming the
/// path when it holds no clip, or a clip lacks Input. The hint source is empty when the
/// clip has no AlphaHint. A path that cannot be listed or followed (a symbolic link loop,
/// no read permission, a dangling link) is an IoError naming it; in a clips root, the clip
/// it belongs to is skipped instead, and named in `skipped` ("<path>: <why>: clip
/// skipped"), when the caller passes it (and reports it).
std::vector<Clip> discover_clips(const std::vector<std::string>& paths,
                                 std::vector<std::string>* skipped = nullptr);

/// A garbage or holdout matte named by the user (--garbage-matte PATH): a folder as a clip's
/// GarbageMatte/ (a sequence or one video), an image file (for every frame) or a video file.
/// IoError naming `path` (`what`: "garbage_matte") when it is none of these.
FrameSource matte_source(const std::string& path, const std::string& what);

/// Where a run writes the clip's outputs: <root>/Output, or <output_root>/<name>.
std::string output_folder(const Clip& clip, const std::string& output_root);
/// The output file name (no extension) of input frame `index`: the plate's stem, or a
/// video's 0-based index padded to 5 digits.
std::string output_stem(const Clip& clip, int index);

/// Parses "A-B[,C-D]" / "N" (1-based, inclusive) into a sorted list of 0-based indices
/// below `count`. ConfigError for malformed or empty ranges. `requested_max`: the largest
/// position asked for, which may lie past `count`.
std::vector<int> parse_frame_ranges(const std::string& spec, int count, int* requested_max = nullptr);

}  // namespace corridorkey::io
