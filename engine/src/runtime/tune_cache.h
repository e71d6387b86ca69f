// The measured plan's per-user cache file (tune.h): one JSON object of plans by key.
// Written under an flock on ".corridorkey-engine-tune.lock" in the file's folder, through a
// temp file of the engine's own name and a rename, so two processes tuning at once leave one
// valid file holding both plans. Only a file in this engine's format is ever replaced: a
// foreign, corrupt or read-only file, a symbolic link or a FIFO at the path is left as it is
// (one warning); there, and where nothing can be written (a read-only or shared home on a
// farm node, no HOME), plans stay in this process's memory.
#pragma once

#include <corridorkey/tune.h>

#include <map>
#include <optional>
#include <string>

namespace corridorkey::detail {

/// The plan cached under plan key `key`, if any. `warning` gets a line when the file is
/// corrupt (it is rebuilt on the next store) or unreadable.
std::optional<TunePlan> tune_cache_load(const std::string& key, std::string& warning);

/// Stores `plan` under plan.key (replacing an older one). Returns false, with `warning`
/// set the first time in this process, when the file cannot be written: the plan is then
/// kept in memory, where tune_cache_load finds it.
bool tune_cache_store(const TunePlan& plan, std::string& warning);

/// Every plan in the file by key; `error` is set when it is corrupt or unreadable.
std::map<std::string, TunePlan> tune_cache_read_all(std::string& error);

}  // namespace corridorkey::detail
