// Temporary files: every output is written under a short temporary name in its folder and
// renamed when complete, so a reader never sees half a file. A run killed mid-write
// (SIGKILL, power loss) leaves its temporary file behind; a later run removes it.
//
// Names: .ck-tmp-l.<host>.<pid>.<counter>[.<ext>]  (host: [A-Za-z0-9-]{1,24}; pid, counter:
// decimal; ext: [A-Za-z0-9]{1,8}, the video container or "log"). The writer holds an
// exclusive flock on the file from its creation to its rename, and only a file whose lock
// can be taken is a dead writer's: process ids say nothing across PID namespaces
// (containers on one host over one shared folder). Earlier versions wrote
// .ck-tmp.<host>.<pid>.<counter>[.<ext>] without a lock; those still parse and are judged
// by their pid, as those versions were. Recognition is strict: a name that starts with
// .ck-tmp but does not parse (a user's file, a sync tool's copy) is never deleted, only
// reported. Torch-free.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace corridorkey::base {
class TempFile;
}

namespace corridorkey::io {

struct TempName {
  std::string host;
  long pid = 0;
  bool locked = false;  // written with a lock held (.ck-tmp-l.); else an earlier version's
};

/// The fields of a temporary file's name (file name only, no folder), or nullopt when the
/// name is not exactly one the engine writes or wrote.
std::optional<TempName> parse_temp_name(const std::string& filename);

/// This host's name as temporary file names carry it.
const std::string& temp_host_tag();

/// A fresh temporary file for a write to `path` (in its folder; `suffix` appended, e.g. the
/// container's extension), created and locked for as long as this object lives. Whatever
/// then opens path() and writes it (OpenEXR, ffmpeg) writes the locked file.
struct PinnedFolder;

class TempFile {
 public:
  explicit TempFile(const std::string& path, const std::string& suffix = "");
  ~TempFile();  // removes the file unless committed, and releases the lock
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  /// The file itself as its descriptor names it (/proc/PID/fd/N): what to give a writer that
  /// needs no extension in the name (ffmpeg with -f), so that even a suffixed temporary file
  /// in a pinned folder is never reopened by a name someone could swap for a link.
  std::string own_path() const;
  /// True when the file lies in a pinned folder (confined writes).
  bool confined() const { return pinned_ != nullptr; }
  /// Renames the finished file to `final_path` (IoError naming it on failure, and when
  /// something other than a regular file or a link is there: a FIFO is never replaced).
  void commit(const std::string& final_path);

 private:
  std::shared_ptr<const PinnedFolder> pinned_;  // set when the folder is pinned (below)
  std::unique_ptr<base::TempFile> file_;        // the file, made and locked (atomic_write.h)
  std::string path_;
};

/// Confined writing (InferenceOptions::confine_writes): output folders opened once, without
/// following links below the confining folder, and registered for the life of this object.
/// While a folder is pinned, a TempFile (and so atomic_write) into it creates its file with
/// openat(O_NOFOLLOW | O_EXCL) from the folder's descriptor, gives writers that file's own
/// /proc/PID/fd path (a name swapped for a link is not followed), checks that the folder
/// still lies under a confining folder before the rename, and renames with renameat: a link
/// made or swapped in by someone who can write under a root is never followed out of it.
/// Folders are matched by their absolute, lexically normal path as the pipeline names them.
class PinnedFolders {
 public:
  /// `roots`: the folders writes are confined to (made absolute and real here).
  explicit PinnedFolders(const std::vector<std::string>& roots);
  ~PinnedFolders();  // unregisters this object's folders
  PinnedFolders(const PinnedFolders&) = delete;
  PinnedFolders& operator=(const PinnedFolders&) = delete;
  /// Opens `dir` (making missing folders when `create`) from the confining folder that holds
  /// its real path, each component with O_NOFOLLOW, and registers it. IoError naming `dir`
  /// when its real path lies outside every confining folder, or a component is a link
  /// swapped in after its real path was resolved. Returns "/proc/self/fd/N", the folder as
  /// its descriptor names it (a sweep of temporary files uses it, never the path).
  std::string pin(const std::string& dir, bool create);

 private:
  std::vector<std::string> roots_;
  std::vector<std::shared_ptr<const PinnedFolder>> mine_;
};

struct TempCleanup {
  int removed = 0;                        // left by dead writers of this host
  std::vector<std::string> unrecognised;  // named like temporary files but not ours: kept
  bool locks_refused = false;             // the filesystem refuses flock: nothing deleted
};

/// Removes temporary files in `dir` left by dead writers of this host: a lock that can be
/// taken (earlier versions' names: a dead pid). Files of live writers and of other hosts (a
/// shared farm folder) are left alone, and so are names that do not parse. Where the
/// filesystem refuses locks (ENOLCK, EOPNOTSUPP: some CIFS, FUSE and Lustre mounts) nothing
/// of this version is deleted: locks_refused says so.
TempCleanup remove_stale_temp_files(const std::string& dir);

/// Writes `path` atomically: `write_to(tmp_path)` into a TempFile, then a rename; the
/// temporary file is removed on failure.
void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write_to);

}  // namespace corridorkey::io
