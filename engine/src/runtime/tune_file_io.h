// The plan cache's files on disk (tune_cache.h), read and replaced safely: a file is read
// only when it is a regular file of at most 8 MiB reached without a link, and replaced only
// when it is missing or a writable file in this engine's format, through a locked temporary
// file (tune_cache_files.h) renamed over it, its owner and mode kept. LibTorch-free.
#pragma once

#include <corridorkey/tune.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::detail {

struct FileState {
  bool exists = false;
  bool ours = false;   // a JSON object in this engine's cache format: the only kind replaced
  bool writable = false;  // a regular file with a write permission bit the process may use
  std::string error;  // non-empty: unreadable, foreign or corrupt
  std::vector<std::pair<std::string, std::string>> raw;  // key -> plan JSON text (kept as read)
  std::map<std::string, TunePlan> plans;
  std::vector<std::string> skipped;  // entries dropped as invalid
  bool newer = false;                 // written by a newer engine: read nothing, write nothing
  int64_t older = 0;                  // the version of an older engine's file (its plans not read), else 0
};

/// What is at `path`, links not followed (not_found when nothing).
std::filesystem::file_type type_at(const std::string& path);

/// The file's text: opened non-blocking and without following a final symbolic link, and
/// checked to be a regular file of at most 8 MiB before a byte is read. Missing: empty text
/// and no error. `st` gets what was found (exists, writable, error).
std::string read_text(const std::string& path, FileState& st);

/// Why the file `st` describes may not be replaced ("" when it may): only a missing file, or
/// a regular, writable file in this engine's format, is ever replaced.
std::string refusal(const FileState& st);

/// Why `bytes` may not be written (the reader's limit).
std::string too_large(size_t bytes);

/// Writes `text` to `path` through a fresh locked temporary file in `folder` (dead writers'
/// ones removed first), synced, then renamed over it (the rename replaces a link planted
/// meanwhile, never its target). The file replaced keeps its owner, group and permission
/// bits (base::atomic_write's keep_owner). "" when written, else why not.
std::string replace_file(const std::string& path, const std::filesystem::path& folder, const std::string& text);

}  // namespace corridorkey::detail
