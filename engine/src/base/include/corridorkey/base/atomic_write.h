// Whole files or none: every file the engine, serve and review replace is written under a
// temporary name in its own folder and renamed over the final name once complete, so a
// reader never sees half a file and a crash leaves the old one. Written once here; each
// caller keeps its own guarantee through the options (the token file's 0600 and refusal of
// links, review's read-back before the rename, the plan cache's owner and mode kept, the
// clip writer's and the plan cache's locked names that a later run may clean up).
// Linux (openat, renameat, flock); torch-free.
#pragma once

#include <fcntl.h>

#include <functional>
#include <string>
#include <string_view>

namespace corridorkey::base {

/// `n` random characters of [A-Za-z0-9], as mkstemp fills its XXXXXX.
std::string random_name_part(size_t n = 6);

/// Filesystems that refuse advisory locks (ENOLCK, EOPNOTSUPP: some CIFS, FUSE and Lustre
/// mounts): a cleaner there cannot tell a live writer from a dead one.
bool locks_unsupported(int err);

/// What is at `rel` (relative to `dir_fd`, links not followed) that a rename must not replace:
/// "" when nothing, a regular file, or (unless `links_too`) a symbolic link (the rename
/// replaces the link, never its target); else "a FIFO", "a folder", "a socket", "a device"
/// or "a symbolic link".
std::string not_replaceable(int dir_fd, const std::string& rel, bool links_too);

/// A fresh file in a folder under a name no one else has: made with O_CREAT | O_EXCL |
/// O_NOFOLLOW, so never an existing file nor a link planted at the name. With `lock`, an
/// exclusive flock is held from its creation until it is renamed or removed: a cleaner that
/// can take the lock knows its writer is dead (process ids say nothing across PID
/// namespaces), and one that took it first (the file already unlinked) makes this take
/// another name. On a filesystem that refuses locks the file is made unlocked.
class TempFile {
 public:
  struct Options {
    int dir_fd = AT_FDCWD;    // names are relative to this folder (a descriptor the caller holds)
    std::string dir = ".";    // the folder's path: where the file is with AT_FDCWD, else for messages
    std::function<std::string()> next_name;  // one name per attempt; default ".tmp.<6 random>"
    unsigned mode = 0644;     // creation mode (the umask applies)
    bool lock = false;
  };
  explicit TempFile(Options o);
  ~TempFile();  // removes the file unless renamed, then closes it (releasing the lock)
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  /// The file's name in its folder.
  const std::string& name() const { return name_; }
  /// The name as openat was given it: relative to the folder descriptor, or with AT_FDCWD
  /// the folder's path joined to the name (what to open it by).
  const std::string& at_path() const { return rel_; }
  /// Non-empty when no file could be made (the last error).
  const std::string& error() const { return error_; }
  /// Renames it over `final_rel` (relative to the same folder descriptor; with AT_FDCWD a
  /// path in the same folder). A link there is replaced, never its target. "" or why not.
  std::string rename_to(const std::string& final_rel);

 private:
  Options o_;
  std::string name_, rel_, error_;
  int fd_ = -1;
  bool renamed_ = false;
};

struct AtomicWriteOptions {
  int dir_fd = AT_FDCWD;  // `path` is relative to this folder descriptor (else a path)
  unsigned mode = 0644;   // the new file's permission bits
  bool exact_mode = true;  // set with fchmod, whatever the umask; false: created under the umask
  /// A regular file replaced keeps its owner, group and permission bits (set-ID bits
  /// dropped); where its owner cannot be kept, it is left as it is and the write refused.
  bool keep_owner = false;
  /// A symbolic link at `path` is refused (otherwise the rename replaces it). A FIFO, folder,
  /// socket or device there is always refused.
  bool refuse_links = false;
  bool lock = false;                          // TempFile's lock
  std::function<std::string()> temp_name;     // default ".<file name>.<6 random>"
  /// Checks the written temporary file before the rename (e.g. reads it back); a throw stops
  /// the write, and its what() is the reason returned. Nothing is renamed then.
  std::function<void(const TempFile&)> validate;
};

/// Writes `bytes` to `path` through a TempFile in its folder: written, synced, checked,
/// renamed. The temporary file is removed on any failure. "" when written, else why not.
std::string atomic_write(const std::string& path, std::string_view bytes, const AtomicWriteOptions& o = {});

}  // namespace corridorkey::base
