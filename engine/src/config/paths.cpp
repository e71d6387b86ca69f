// Where bundled data lives (config/paths.h): relative to the binary's own location.
#include <corridorkey/engine.h>
#include <corridorkey/profile.h>

#include "config/paths.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace corridorkey::config {

namespace fs = std::filesystem;

namespace {
// Trained on procedural green-screen data by tools/train_tiny.py (checkpoints/README.md).
constexpr const char* kDefaultCheckpoint = "greenformer_small_synthetic384.ts";
constexpr const char* kBuildTreeMarker = "corridorkey-build-tree";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

fs::path module_path() {
  Dl_info info{};
  link_map* map = nullptr;
  std::error_code ec;
  // The link map names the object that holds this function. The main program's name is
  // empty there (dladdr would give argv[0], which may be relative or a bare name from
  // PATH): it is /proc/self/exe.
  if (::dladdr1(reinterpret_cast<void*>(&module_path), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) != 0 &&
      map && map->l_name && *map->l_name) {
    auto p = fs::canonical(map->l_name, ec);
    if (!ec) return p;
  }
  auto exe = fs::canonical("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

fs::path data_dir() {
  if (const auto d = env("CORRIDORKEY_DATA_DIR"); !d.empty()) return d;
  const fs::path here = module_path().parent_path();
  std::ifstream marker(here / kBuildTreeMarker);
  std::string source;
  if (marker && std::getline(marker, source) && !source.empty()) return source;
  return (here / ".." / "share" / "corridorkey").lexically_normal();
}

fs::path tools_dir() { return data_dir() / "tools"; }

}  // namespace corridorkey::config

CORRIDORKEY_NAMESPACE_BEGIN

std::string data_dir() { return config::data_dir().string(); }

std::string default_checkpoint() {
  if (const char* env = std::getenv("CORRIDORKEY_CHECKPOINT"); env && *env) return env;
  return (config::data_dir() / "checkpoints" / config::kDefaultCheckpoint).string();
}

CORRIDORKEY_NAMESPACE_END
