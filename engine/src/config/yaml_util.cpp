#include "config/input_file.h"
#include "config/yaml_util.h"

#include <corridorkey/check.h>

#include <fstream>
#include <map>
#include <locale>
#include <sstream>

namespace corridorkey::config {

YAML::Node load_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ": not valid YAML: " + e.what());
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  check_input_file(path, "YAML file");
  std::ifstream f(path, std::ios::binary);
  CK_CHECK(f.good(), ConfigError, path, ": cannot be read");
  std::stringstream ss;
  ss.imbue(std::locale::classic());  // numbers in every locale
  ss << f.rdbuf();
  return load_yaml(ss.str(), path);
}

std::string where(const std::string& source, const YAML::Node& n) {
  // A key the file does not have (root["profile"] of a job without one) has no line; its
  // Mark() would throw yaml-cpp's own InvalidNode, past every ConfigError handler.
  if (!n.IsDefined()) return source;
  return source + ":" + std::to_string(n.Mark().line + 1);
}

void for_each_entry(const YAML::Node& map, const std::string& source,
                    const std::function<void(const std::string&, const YAML::Node&,
                                             const std::string&)>& fn) {
  std::map<std::string, int> seen;  // key -> line
  for (const auto& kv : map) {
    const auto w = where(source, kv.first);
    CK_CHECK(kv.first.IsScalar(), ConfigError, w, ": keys must be plain names");
    const auto key = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    const auto [it, fresh] = seen.emplace(key, line);
    CK_CHECK(fresh, ConfigError, w, ": key '", key, "' appears twice (first on line ",
             it->second, ")");
    fn(key, kv.second, w);
  }
}

std::string scalar(const YAML::Node& value, const std::string& key, const std::string& w) {
  CK_CHECK(value.IsScalar() || value.IsNull(), ConfigError, w, ": key '", key,
           "': expected a single value, not a list or mapping");
  return value.IsNull() ? std::string() : value.Scalar();
}

}  // namespace corridorkey::config
