// Profiles: YAML files of Profile-scope fields, parsed and printed through the Profile
// table (config/engine_fields.cpp); plus the public option-table API.
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include "config/engine_fields.h"
#include "config/log.h"
#include "config/inference_fields.h"
#include "config/input_file.h"
#include "config/paths.h"
#include "config/yaml_util.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <locale>
#include <sstream>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {

using config::engine_table;

bool looks_like_path(const std::string& s) {
  auto ends = [&](const char* suf) {
    const std::string x(suf);
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  return s.find('/') != std::string::npos || ends(".yaml") || ends(".yml");
}

}  // namespace

std::vector<std::string> builtin_profiles() {
  return {"original", "optimized", "performance", "experimental", "draft"};
}

std::string profile_description(const std::string& name) {
  // The file's leading comment block, "# name: what it is. More...", up to its first sentence.
  std::ifstream f((std::filesystem::path(profile_dir()) / (name + ".yaml")).string());
  std::string text;
  for (std::string line; std::getline(f, line) && line.rfind("#", 0) == 0;) {
    auto body = line.substr(line.find_first_not_of("# ") == std::string::npos ? line.size()
                                                                              : line.find_first_not_of("# "));
    text += (text.empty() ? "" : " ") + body;
  }
  if (text.rfind(name + ":", 0) == 0) text = text.substr(name.size() + 1);
  text.erase(0, std::min(text.find_first_not_of(' '), text.size()));
  for (size_t i = 0; i + 1 < text.size(); ++i)
    if (text[i] == '.' && text[i + 1] == ' ') return text.substr(0, i + 1);
  return text;
}

std::string profile_dir() {
  if (const char* env = std::getenv("CORRIDORKEY_PROFILE_DIR"); env && *env) return env;
  return (config::data_dir() / "profiles").string();
}

void validate_profile(const Profile& o, const std::string& source) {
  config::validate_model_options(o.model, source);
  CK_CHECK(!(o.model.token_routing && o.engine.engine_kind == EngineKind::Original), ConfigError, source,
           ": key 'token_routing': needs 'engine: optimized' (OptimizedEngine owns the routing "
           "modules)");
}

void apply_profile_yaml(Profile& out, const std::string& text, const std::string& source) {
  Profile o = out;  // all or nothing: `out` is untouched when the file has an error
  const YAML::Node root = config::load_yaml(text, source);
  if (root.IsNull()) return;  // an empty file sets nothing
  CK_CHECK(root.IsMap(), ConfigError, source, ": expected a mapping of profile keys, e.g. "
           "'flash_attention: true'");
  config::for_each_entry(root, source, [&](const std::string& key, const YAML::Node& value,
                                           const std::string& where) {
    if (config::normalise_key(key) == "tile_overlap") {
      // Kept readable for the reference fork's profile files: the exact tiler reads the halo
      // each layer needs and blends nothing, so an overlap means nothing here.
      detail::log(LogLevel::Warning, where + ": key 'tile_overlap' is deprecated and ignored (the "
                                     "exact tiled refiner needs no overlap); remove it");
      return;
    }
    set_option(o, key, config::scalar(value, key, where), where, OptionScope::Profile);
  });
  validate_profile(o, source);
  out = o;
}

Profile load_profile(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::string path = name_or_path;
  if (!looks_like_path(name_or_path)) {
    const auto names = builtin_profiles();
    if (std::find(names.begin(), names.end(), name_or_path) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ConfigError("unknown profile '" + name_or_path + "' (expected one of " + list +
                        ", or a path to a .yaml file)");
    }
    path = (fs::path(profile_dir()) / (name_or_path + ".yaml")).string();
  }
  config::check_input_file(path, "profile");
  std::ifstream f(path);
  CK_CHECK(f.good(), ConfigError, path, ": profile file cannot be read");
  std::stringstream ss;
  ss.imbue(std::locale::classic());  // numbers in every locale
  ss << f.rdbuf();
  Profile o;
  const std::string text = ss.str();
  apply_profile_yaml(o, text, path);
  o.engine.profile = looks_like_path(name_or_path) ? fs::path(path).stem().string() : name_or_path;
  if (looks_like_path(name_or_path)) {
    // A user's file that sets some fields gets the struct defaults, the original profile's,
    // for the rest: an empty or truncated copy ran every optimization off without a word.
    const YAML::Node root = config::load_yaml(text, path);
    size_t set = 0;
    if (root.IsMap())
      for (const auto& kv : root) set += config::normalise_key(kv.first.as<std::string>()) != "tile_overlap";
    const size_t all = profile_fields(o).size();
    if (set < all)
      detail::log(LogLevel::Warning,
                  path + ": sets " + std::to_string(set) + " of the " + std::to_string(all) +
                      " profile fields; the others keep the original profile's values (no "
                      "optimization). `corridorkey-engine profiles show optimized > FILE` writes a "
                      "complete profile to start from");
  }
  return o;
}

std::vector<std::pair<std::string, std::string>> profile_fields(const Profile& o) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : engine_table().rows())
    if (r.info.scope == OptionScope::Profile) out.emplace_back(r.info.key, r.format(o));
  return out;
}

std::vector<std::pair<std::string, std::string>> profile_schema() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : engine_table().rows())
    if (r.info.scope == OptionScope::Profile) out.emplace_back(r.info.key, r.info.help);
  return out;
}

namespace {
template <class T>
std::string table_yaml(const config::Table<T>& table, const T& o, const std::string& head) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  if (!head.empty()) e << YAML::Key << "profile" << YAML::Value << head;
  for (const auto& r : table.rows()) e << YAML::Key << r.info.key << YAML::Value << r.format(o);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}
}  // namespace

std::string to_yaml(const Profile& o) { return table_yaml(engine_table(), o, o.engine.profile); }

std::string to_yaml(const InferenceOptions& o) {
  return table_yaml(config::inference_table(), o, "");
}

CORRIDORKEY_NAMESPACE_END
