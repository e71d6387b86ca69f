// Profiles for the model-only build, which has no YAML library: profiles/*.yaml are flat
// `key: value` maps (comments allowed), read line by line and set through the same option
// table as everywhere else (corridorkey/option_fields.h), so values are checked the same way.
#pragma once

#include <corridorkey/options.h>

#include <string>

namespace corridorkey::modelcheck {

/// Reads <dir>/<name>.yaml into Profile. ConfigError naming file and line.
Profile load_flat_profile(const std::string& dir, const std::string& name);

}  // namespace corridorkey::modelcheck
