// The plan cache's two layouts (tune_cache.h): the single file (tune_store_file.cpp) and the
// folder of one file per plan, with the measured rates beside them (tune_store_folder.cpp).
// tune_cache.cpp chooses between them and keeps the plans that could not be written.
#pragma once

#include <corridorkey/tune.h>

#include "runtime/tune_file_io.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace corridorkey::detail {

/// Whether this process has not yet said that the cache at `path` (a file or a folder) was
/// written by an older engine; true once per path, false after.
bool first_older_note(const std::string& path);
/// That note: the file or folder, its version, and that its plans are measured again.
std::string older_note(const std::string& path, int64_t version, const std::string& what);

// ---- one file ------------------------------------------------------------------------------
/// A single-file cache: its state and plans (an older engine's: none, `older` set).
FileState read_cache_file(const std::string& path);
std::optional<TunePlan> file_load(const std::string& path, const std::string& key, std::string& warning);
/// Stores `plans` with one read and one write under the folder's flock; "" or why not.
std::string file_store(const std::string& path, const std::vector<TunePlan>& plans);

// ---- a folder ------------------------------------------------------------------------------
std::optional<TunePlan> folder_load(const std::string& folder, const std::string& key, std::string& warning);
std::string folder_store(const std::string& folder, const TunePlan& plan);
std::map<std::string, TunePlan> folder_read_all(const std::string& folder, std::string& error);

}  // namespace corridorkey::detail
