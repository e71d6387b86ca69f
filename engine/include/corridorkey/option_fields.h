// The option tables, as the public API sees them: every user-settable field of a Profile
// (ModelOptions and EngineSettings) and of InferenceOptions, with its YAML key, flag, help, allowed values and
// default. One table per struct (engine/src/config/*_fields.cpp) is the only place that
// parses or prints a field; profiles, job files, the CLI's flags and to_yaml use it, so a
// field added there is a YAML key and a flag everywhere. Defaults are the structs' own.
//
// Thread-safety: the tables are built once, thread-safely; every function may be called
// from any thread (one Profile changed by two threads at once is the caller's race).
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/options.h>
#include <corridorkey/version.h>

#include <string>
#include <utility>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// Where a field may be set: Profile = profiles/*.yaml, job `overrides:` and flags;
/// Run = job files and flags of commands that run the engine (checkpoint, device, knobs);
/// Inference = job files and `inference` flags (outputs, codecs, workers).
enum class OptionScope { Profile, Run, Inference };

/// What a field's value is, for hosts that pass typed values (serve's JSON): Switch true /
/// false; Integer; Real (any finite number); Choice one of named values (tri-state choices
/// also take true / false); Text; Size an integer or a percentage as text ("50%").
enum class OptionKind { Text, Switch, Integer, Real, Choice, Size };
/// Which struct a field belongs to: ModelOptions (baked into a Model's weights, or
/// process-wide), EngineSettings (each engine's own) or InferenceOptions (the clip pipeline).
enum class OptionOwner { Model, Engine, Inference };
CORRIDORKEY_API const char* to_string(OptionOwner o);  // "model" | "engine" | "inference"

struct OptionInfo {
  std::string key;            // YAML key; the flag is "--" + key with '_' -> '-'
  OptionScope scope = OptionScope::Profile;
  std::string help;
  std::string allowed;        // what a valid value looks like ("an integer in 2..8")
  std::string default_value;  // the struct's default, as text
  bool is_switch = false;     // true/false: flags --key and --no-key
  std::vector<std::string> aliases;                            // more value flags
  std::vector<std::pair<std::string, std::string>> shortcuts;  // flag -> fixed value
  OptionKind kind = OptionKind::Text;
  OptionOwner owner = OptionOwner::Engine;
  /// A ModelOptions field applied to the whole process by the first Model loaded (threads,
  /// tf32, disable_cudnn_benchmark, host_block_cache): not part of a Model's key.
  bool process_wide = false;
  /// Part of model_key(): two Models differing in it hold different weights (every
  /// ModelOptions field but the process-wide ones, mmap and checkpoint_blue).
  bool in_model_key = false;
  /// A file or folder path: an empty value given to its flag is a usage error naming the
  /// flag (`--tune-cache "$UNSET"` wrote into the default cache). In a profile or job file
  /// an empty value keeps its meaning (the default).
  bool is_path = false;
};

/// The Profile's fields, both halves (Profile and Run scope), in table order; each row's
/// `owner` says which half it sets.
CORRIDORKEY_API std::vector<OptionInfo> engine_option_fields();
/// InferenceOptions fields (Inference scope), in table order.
CORRIDORKEY_API std::vector<OptionInfo> inference_option_fields();

/// The one text setter of the Profile table: sets one field from text in the half its row
/// belongs to (OptionInfo::owner). Keys are snake_case ('-' accepted for '_'). ConfigError
/// names `source`, the key, the value and what is allowed; NaN and Inf are never accepted.
/// `widest`: the widest scope taken; OptionScope::Profile refuses run fields (checkpoint,
/// device ...), as a profile file or a job's `overrides:` do.
CORRIDORKEY_API void set_option(Profile& options, const std::string& key, const std::string& value,
                                const std::string& source = "command line",
                                OptionScope widest = OptionScope::Run);
/// The same for one half alone: a key of the other half is a ConfigError saying which half
/// it belongs to (a host that holds a Model's options apart from its engines' settings).
CORRIDORKEY_API void set_option(ModelOptions& options, const std::string& key,
                                const std::string& value, const std::string& source = "command line");
CORRIDORKEY_API void set_option(EngineSettings& options, const std::string& key,
                                const std::string& value, const std::string& source = "command line");
CORRIDORKEY_API void set_inference_option(InferenceOptions& options, const std::string& key,
                                          const std::string& value,
                                          const std::string& source = "command line");
/// A field's value as text (what to_yaml prints), from the half its row belongs to.
CORRIDORKEY_API std::string option_value(const Profile& options, const std::string& key);
CORRIDORKEY_API std::string option_value(const ModelOptions& options, const std::string& key);
CORRIDORKEY_API std::string option_value(const EngineSettings& options, const std::string& key);
CORRIDORKEY_API std::string inference_option_value(const InferenceOptions& options,
                                                   const std::string& key);

/// Deprecated (one release): set_option and option_value.
[[deprecated("set_option(profile, key, value, source)")]] CORRIDORKEY_API void set_engine_option(
    Profile& options, const std::string& key, const std::string& value, const std::string& source = "command line");
[[deprecated("option_value(profile, key)")]] CORRIDORKEY_API std::string engine_option_value(
    const Profile& options, const std::string& key);

/// Cross-field checks of InferenceOptions (at least one output ...).
CORRIDORKEY_API void validate_inference_options(const InferenceOptions& options,
                                                const std::string& source);

/// The resolved InferenceOptions as YAML (every field of the table).
CORRIDORKEY_API std::string to_yaml(const InferenceOptions& options);

CORRIDORKEY_NAMESPACE_END
