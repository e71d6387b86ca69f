// Strict YAML reading shared by profiles and job files: parse errors and duplicate keys are
// ConfigErrors naming the file and line (yaml-cpp itself keeps the last duplicate silently).
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>

namespace corridorkey::config {

/// Parses text; ConfigError "<source>: not valid YAML: ..." on a syntax error.
YAML::Node load_yaml(const std::string& text, const std::string& source);
/// Reads a file and parses it (ConfigError when it cannot be read).
YAML::Node load_yaml_file(const std::string& path);

/// "<source>:<line>" of a node.
std::string where(const std::string& source, const YAML::Node& node);

/// Calls fn(key, value, "<source>:<line>") for every entry of a mapping, in file order;
/// a key that appears twice is a ConfigError naming both lines.
void for_each_entry(const YAML::Node& map, const std::string& source,
                    const std::function<void(const std::string& key, const YAML::Node& value,
                                             const std::string& where)>& fn);

/// The scalar text of `value`; ConfigError when it is a list or mapping.
std::string scalar(const YAML::Node& value, const std::string& key, const std::string& where);

}  // namespace corridorkey::config
