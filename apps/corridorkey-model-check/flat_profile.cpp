#include "flat_profile.h"

#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>

#include <fstream>

namespace corridorkey::modelcheck {
namespace {
std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}
}  // namespace

Profile load_flat_profile(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name + ".yaml";
  std::ifstream f(path);
  CK_CHECK(f.good(), ConfigError, path, ": profile file cannot be read");
  Profile o;
  o.engine.profile = name;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    const auto hash = line.find('#');
    line = trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (line.empty()) continue;
    const auto colon = line.find(':');
    CK_CHECK(colon != std::string::npos, ConfigError, path, ":", n, ": expected 'key: value'");
    const auto key = trim(line.substr(0, colon));
    if (key == "tile_overlap") continue;  // retired (docs/profiles.md)
    set_option(o, key, trim(line.substr(colon + 1)), path + ":" + std::to_string(n));
  }
  return o;
}

}  // namespace corridorkey::modelcheck
