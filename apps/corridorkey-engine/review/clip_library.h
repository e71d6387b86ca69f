// The clips under the review's roots, found by the same discovery as `inference`
// (corridorkey/clips.h), with what the page shows of each: frames, which outputs exist,
// generated hints, the backing colour, and the last run's summary (run.json). Every file the
// server opens goes through checked(): its real path must lie under a root, the output root
// or the compare root, so a symbolic link that leads out is refused. Thread-safe.
#pragma once

#include "review/review_server.h"

#include <corridorkey/clips.h>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace corridorkey::review {

using json = nlohmann::json;

/// An answer other than 200, with a message for the page (never file content).
struct HttpError : std::runtime_error {
  int status;
  HttpError(int s, const std::string& what) : std::runtime_error(what), status(s) {}
};

struct ClipEntry {
  std::string id;  // stable across listings: a hash of the clip folder
  ClipListing clip;
  std::string compare_output;  // side B's folder (<compare_root>/<name>); "" without one
};

/// The output kinds, with their folder and extension ("comp" is .png or .exr).
enum class Output { Matte, Fg, Processed, Comp };
Output parse_output(const std::string& name);  // HttpError 400 for another name

class ClipLibrary {
 public:
  explicit ClipLibrary(const ReviewConfig& config);

  /// Lists the clips again (the roots may have changed) and answers the list JSON.
  json list();
  /// HttpError 404 for an id of no listed clip.
  std::shared_ptr<const ClipEntry> find(const std::string& id) const;
  /// Frames, per-frame outputs and failures, hints, colour, screen and run summary.
  json details(const ClipEntry& clip);

  /// The real path of `path` when it lies under a root, the output root or the compare
  /// root; HttpError 403 otherwise (also a symlink whose target lies outside), 404 when it
  /// does not exist or is not a regular file.
  std::string checked(const std::string& path) const;
  /// A file given as ROOT-INDEX and a relative path (/raw/...): '..', absolute paths, empty
  /// components, NUL and backslashes are refused before any lookup, then checked().
  std::string raw_file(const std::string& root_index, const std::string& relative) const;
  /// A folder to write into (made when missing), by its real path: HttpError 403 when that
  /// lies outside the roots and output folders.
  std::string writable_folder(const std::string& dir) const;
  /// writable_folder(), then the folder opened and its opened path (/proc/self/fd) checked
  /// again: write through the descriptor (openat, renameat) and a link swapped in for the
  /// folder after the check is not written through (403). The caller closes it.
  int open_writable_folder(const std::string& dir) const;
  /// Opens a path that checked() (or raw_file()) returned, then checks the opened file's
  /// own path (/proc/self/fd) again: a link swapped in between the check and the open is
  /// refused too (403). The caller closes the descriptor.
  int open_checked(const std::string& real) const;
  /// Every file a key or write job of the clip would read (its plates or video, its hints,
  /// its garbage and holdout mattes) must lie under the roots (checked()): a plate that is a link out of them is refused
  /// (403) before the job starts, as its preview is.
  void check_inputs(const ClipEntry& c) const;
  /// Every output folder and file a key or write job of the clip writes (FG, Matte,
  /// Processed, Comp, AlphaHint, run.json) must resolve under the roots or the output root
  /// when it exists: a link out is refused (403, naming it) before the job starts.
  void check_outputs(const ClipEntry& c) const;
  /// Where jobs may write (real paths of the roots and the output root): the pipeline's
  /// confinement (InferenceOptions::confine_writes).
  const std::vector<std::string>& write_roots() const { return write_roots_; }
  /// The /raw/ link of an existing file under a root ("" when it lies under none).
  std::string raw_link(const std::string& path) const;

  /// A frame's files; "" when there is none (a frame past the end is HttpError 404).
  std::string plate_file(const ClipEntry& c, int frame) const;  // "" for a video clip
  std::string hint_file(const ClipEntry& c, int frame) const;   // AlphaHint/, else generated
  /// A frame's garbage or holdout matte (GarbageMatte/, HoldoutMatte/), paired as a key pairs
  /// it: the one file for every frame, else the frame's by position, or the video (`video`:
  /// read its frame). The path is checked() (403, 404); empty for none. HttpError 422 naming
  /// the folder when its frames are neither one file nor the clip's count: a key refuses it.
  struct Matte {
    std::string path;
    bool video = false;
  };
  Matte matte(const ClipEntry& c, int frame, bool holdout) const;
  std::string output_file(const ClipEntry& c, int frame, Output kind, bool side_b) const;
  /// The clip's last run summary (run.json beside its outputs), null without one.
  json run_record(const ClipEntry& c, bool side_b = false) const;
  /// How the clip's plates are taken: as the last run took them, else --input-colorspace.
  std::string plate_colorspace(const ClipEntry& c) const;
  const ReviewConfig& config() const { return config_; }

 private:
  /// Whether a real path lies under a root, the output root or the compare root.
  bool allowed(const std::string& real) const;

  const ReviewConfig& config_;
  std::vector<std::string> allowed_;  // real paths of the roots, output root, compare root
  std::vector<std::string> roots_;    // real paths of the roots, for /raw/<index>/
  std::vector<std::string> write_roots_;  // real paths of the roots and the output root
  mutable std::mutex m_;
  std::map<std::string, std::shared_ptr<const ClipEntry>> clips_;
  std::map<std::string, json> screens_;  // estimated backing of clips without run.json
};

/// Frame index from a request parameter (HttpError 400 when not a number in range).
int frame_index(const ClipEntry& c, const std::string& text);

}  // namespace corridorkey::review
