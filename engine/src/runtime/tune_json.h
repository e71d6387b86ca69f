// The plan cache's JSON (tune_cache.h): the texts of its three kinds of file, written with
// nlohmann-json (kept private to tune_json.cpp), and a stored plan read back from the
// engine's hardened JSON reader (model/json_reader.h: size and depth limits, keys given twice
// kept visible). LibTorch-free.
#pragma once

#include <corridorkey/tune.h>

#include "model/json_reader.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::detail {

/// The cache format this engine reads and writes ("version" in every file). 2: the CPU
/// identity's flags hash (and so every plan key, plan file and rate file name) is the real
/// FNV-1a; a file of version 1 holds plans keyed by the old hash, measured again.
constexpr int64_t kCacheVersion = 2;
/// Written into every file, so that a file is told to be ours by what it says.
constexpr const char* kFormatName = "corridorkey-engine tune cache";
constexpr const char* kPlanFormatName = "corridorkey-engine tune plan";
constexpr const char* kRateFormatName = "corridorkey-engine measured rate";
/// The most a file of the cache may be, read or written.
constexpr size_t kMaxCacheBytes = size_t{8} << 20;

/// One plan as an object on one line (a Cache origin is written as the trials' it was).
std::string plan_json(const TunePlan& plan);
/// A single-file cache: `plans` (key, plan_json text) one to a line, in order.
std::string cache_file_text(const std::vector<std::pair<std::string, std::string>>& plans);
/// A folder cache's file of one plan, with its whole key.
std::string plan_file_text(const TunePlan& plan);
/// A measured rate's file.
std::string rate_file_text(const std::string& key, double value);

std::string text_of(const model::json::Value* v);
double number_of(const model::json::Value* v);

/// A stored plan; ModelError naming `path` and the key when its shape is wrong, or it says
/// what this engine never writes (the file is then corrupt, or the entry skipped).
TunePlan plan_from(const model::json::Value& v, const std::string& key, const std::string& path);

}  // namespace corridorkey::detail
