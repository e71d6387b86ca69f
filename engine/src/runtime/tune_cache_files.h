// The plan cache's helper files in the cache's folder, under names the engine owns (never
// derived from the cache file's, which could be any file the user named):
//  - .corridorkey-engine-tune.lock: the flock around a single-file cache's read-merge-write;
//  - .corridorkey-engine-tune.<host>.<pid>.XXXXXX: a new cache or plan file being written,
//    renamed over its final name when whole.
// A writer killed mid-write (SIGKILL, power loss) leaves its temporary file behind; later
// writers remove it under the clip writer's rules (io/temp_files.h): the writer holds an
// flock on the file from its creation to its rename, and only a file of this host whose lock
// can be taken is a dead writer's (pids say nothing across PID namespaces; another host's
// file on a shared folder is not ours to judge). Earlier versions wrote
// .corridorkey-engine-tune.XXXXXX with no lock, no host and no pid: such a file is removed
// once it is an hour old (those writers held it for well under a second). Where the
// filesystem refuses locks nothing of this version is removed. LibTorch-free; the files are
// made and locked by ck_base's TempFile, as the clip writer's are (io/temp_files.h).
#pragma once

#include <string>

namespace corridorkey::detail {

/// The lock file's path in `dir`.
std::string tune_lock_path(const std::string& dir);

/// An exclusive flock on the folder's lock file while it lives. A filesystem that refuses
/// locks (ENOLCK / EOPNOTSUPP on some network mounts) gets no lock: the caller's atomic
/// rename still leaves a whole file. A lock path that is not a regular file (a link, a FIFO)
/// is not used.
class TuneFolderLock {
 public:
  explicit TuneFolderLock(const std::string& dir);
  ~TuneFolderLock();
  TuneFolderLock(const TuneFolderLock&) = delete;
  TuneFolderLock& operator=(const TuneFolderLock&) = delete;

 private:
  int fd_ = -1;
};

/// A new temporary file's name (no folder): .corridorkey-engine-tune.<host>.<pid>. and six
/// random characters. base::TempFile makes it (O_EXCL, locked until it is renamed or
/// removed: corridorkey/base/atomic_write.h).
std::string tune_temp_name();

/// Removes the dead writers' temporary files in `dir` by the rules above; how many.
int remove_dead_tune_temps(const std::string& dir);
/// The same, at most once per folder in this process (a write calls it before its own).
void remove_dead_tune_temps_once(const std::string& dir);

}  // namespace corridorkey::detail
