// --profile NAME|PATH plus one flag per profile field, shared by every command that runs
// the engine. Flags override the profile; --x and --no-x exclude each other.
#pragma once

#include <corridorkey/options.h>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::cli {

struct ProfileArgs {
  std::string profile;
  std::vector<std::pair<std::string, std::string>> overrides;  // (field, value)
  std::string device = "auto";
  std::string checkpoint;
  int64_t img_size = 0;

  /// load_profile(profile) + overrides + device/checkpoint/img_size; ConfigError on bad
  /// values naming the flag's field.
  EngineOptions resolve() const;
};

/// Registers --profile, every field flag, --device, and (unless model_flags is false)
/// --checkpoint and --img-size on cmd.
std::shared_ptr<ProfileArgs> add_profile_args(CLI::App* cmd, const std::string& default_profile,
                                              bool model_flags = true);

}  // namespace corridorkey::cli
