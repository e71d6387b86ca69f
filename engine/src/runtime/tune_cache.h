// The measured plan's cache (tune.h), in one of two layouts:
//  - a single file (a path ending in .json, or an existing file): one JSON object of plans
//    by key, written under an flock on ".corridorkey-engine-tune.lock" in the file's folder,
//    through a temp file of the engine's own name and a rename, so two processes tuning at
//    once leave one valid file holding both plans (the per-user default);
//  - a folder (an existing folder, or a path not ending in .json): one file per plan,
//    plan-<hash of the key>.json holding the key and the plan, each written to a temp name
//    in the folder and renamed, with no lock: for a farm's shared filesystem, where flock
//    fails silently under NFS `nolock`. A tune.json in the folder (an old single-file
//    cache copied there) is read too, never written. Only a file in this engine's format is ever replaced: a
// foreign, corrupt or read-only file, a symbolic link or a FIFO at the path is left as it is
// (one warning); there, and where nothing can be written (a read-only or shared home on a
// farm node, no HOME), plans stay in this process's memory.
#pragma once

#include <corridorkey/tune.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace corridorkey::detail {

/// Whether `path` is used as a folder cache (see above).
bool tune_cache_is_folder(const std::string& path);
/// The cache a ModelOptions::tune_cache names: itself, or tune_cache_path() when empty.
std::string tune_cache_resolve(const std::string& configured);

/// The plan cached under plan key `key` in the cache at `path` ("": none, plans live in
/// memory only), if any. `warning` gets a line when the file is corrupt (it is rebuilt on
/// the next store), unreadable, or an older engine's (once per path in a process).
std::optional<TunePlan> tune_cache_load(const std::string& path, const std::string& key, std::string& warning);
/// Stores `plan` under plan.key (replacing an older one). Returns false, with `warning` set
/// the first time in this process, when the cache cannot be written: the plan is then kept
/// in memory, where tune_cache_load finds it.
bool tune_cache_store(const std::string& path, const TunePlan& plan, std::string& warning);
/// Every plan in the cache by key; `error` is set when it is corrupt, unreadable or an
/// older engine's.
std::map<std::string, TunePlan> tune_cache_read_all(const std::string& path, std::string& error);
/// Stores every plan of `plans` at once: a single-file cache is read and written once, under
/// its lock; "" when stored, else why not (nothing stored in a single-file cache, nor in a
/// folder when a plan file would be too large). No write makes a file over the 8 MiB its
/// reader accepts.
std::string tune_cache_store_all(const std::string& path, const std::vector<TunePlan>& plans);

/// A value measured once per machine and cached beside the plans of the cache at `cache`
/// (bench --roofline's GEMM rate): rate-<hash of key>.json in its folder. None when absent,
/// foreign, corrupt or under another key.
std::optional<double> tune_cache_load_rate(const std::string& cache, const std::string& key);
/// Stores it there by a plan file's rules (a temporary name and a rename; never over a file
/// that is not this engine's). "" when stored, else why not.
std::string tune_cache_store_rate(const std::string& cache, const std::string& key, double value);

}  // namespace corridorkey::detail
