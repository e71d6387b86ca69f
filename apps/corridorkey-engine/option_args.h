// Command-line flags generated from the option tables (corridorkey/option_fields.h): one
// flag per field (--x / --no-x for switches, plus the reference spellings such as
// --precision, --linear, --cudnn-benchmark), applied through the same table rows as
// profiles and job files, so a flag's checks and messages are the YAML key's.
#pragma once

#include <corridorkey/options.h>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::cli {

struct OptionArgs {
  std::string profile;
  struct Set {
    std::string key, value, flag, shown;  // shown: the flag as typed ("--tile-size 256")
  };
  /// Field values as given on the command line, applied in order over the profile. Two
  /// flags setting one field differently (--x --no-x, --linear --color auto) are a usage
  /// error (ConfigError naming both).
  std::vector<Set> engine_sets, inference_sets;

  /// load_profile(profile), then the engine flags (both halves); validated. ConfigError
  /// names the flag.
  Profile options() const;
  /// InferenceOptions{} with the inference flags; validated.
  InferenceOptions inference(const std::vector<std::string>& paths) const;
};

/// `o` (an option or positional that takes a file or folder path) refusing an empty value:
/// a usage error naming the flag (exit 2). `tune --export "$OUT"` with OUT unset ran a full
/// tune and wrote into the cache instead of failing.
CLI::Option* non_empty_path(CLI::Option* o);

/// --profile plus a flag per Profile-scope field of a Profile and, when `run_fields`,
/// per Run-scope field (checkpoint, device, img_size, despill, ...).
std::shared_ptr<OptionArgs> add_engine_flags(CLI::App* cmd, const std::string& default_profile,
                                             bool run_fields);
/// A flag per InferenceOptions field (outputs, codecs, frames, workers, ...).
void add_inference_flags(CLI::App* cmd, const std::shared_ptr<OptionArgs>& args);

}  // namespace corridorkey::cli
