// Optimization profiles: YAML files (profiles/*.yaml) that set the Profile-scope fields of a
// Profile (both halves: ModelOptions and EngineSettings), plus per-field overrides from the
// command line (set_option, option_fields.h). Every field is parsed and
// printed by one table row (option_fields.h); this header is the profile-level view of it.
//
// Thread-safety: every function here reads files and fills the caller's structs; any thread,
// concurrently (two calls changing one Profile at once is the caller's race).
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/options.h>

#include <string>
#include <utility>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

/// Names of the bundled profiles: original, optimized, performance, experimental, draft.
CORRIDORKEY_API std::vector<std::string> builtin_profiles();

/// One sentence on a bundled profile: the first sentence of its file's leading comment
/// ("# draft: optimized with ..."); empty when the file cannot be read.
CORRIDORKEY_API std::string profile_description(const std::string& name);

/// The folder of the bundled data (profiles/, checkpoints/, tools/), found from the
/// library's own location: $CORRIDORKEY_DATA_DIR, else (a build tree) the source tree,
/// else <the library's folder>/../share/corridorkey, so a moved install or a Python wheel
/// finds its own files. An installed library never reads the build machine's source tree.
CORRIDORKEY_API std::string data_dir();

/// Folder the bundled profiles are read from: $CORRIDORKEY_PROFILE_DIR, else
/// data_dir()/profiles.
CORRIDORKEY_API std::string profile_dir();

/// Loads a profile by name (a bundled one) or by path (anything containing '/' or ending in
/// .yaml/.yml). Starts from Profile{} defaults; the YAML sets profile fields only.
/// ConfigError names the file, line, key, bad value and the allowed values for: unknown or
/// duplicate keys, wrong types, out-of-range values (tile_size not a multiple of 8,
/// dma_buffers outside 2..8, thresholds outside 0..1 or low >= high, NaN / Inf anywhere).
/// The retired key tile_overlap is accepted with a deprecation warning and ignored.
CORRIDORKEY_API Profile load_profile(const std::string& name_or_path);

/// Parses YAML text (source names it in errors) into `options`.
CORRIDORKEY_API void apply_profile_yaml(Profile& options, const std::string& yaml_text,
                        const std::string& source);

/// Deprecated (one release): set_option(options, key, value, source, OptionScope::Profile).
[[deprecated("set_option(profile, key, value, source, OptionScope::Profile)")]] CORRIDORKEY_API void
set_profile_field(Profile& options, const std::string& key, const std::string& value,
                  const std::string& source = "command line");

/// Cross-field validation (edge thresholds low < high, token routing needs engine: optimized):
/// the one check that spans both halves. Model::load checks its half's own rules.
CORRIDORKEY_API void validate_profile(const Profile& options, const std::string& source);

/// Every profile field as (key, text value), in schema order.
CORRIDORKEY_API std::vector<std::pair<std::string, std::string>> profile_fields(const Profile& options);

/// Profile field names in schema order, with one-line help each.
CORRIDORKEY_API std::vector<std::pair<std::string, std::string>> profile_schema();

/// The resolved options as a YAML document: profile name, then every field of the Profile
/// table (profile fields, then run fields), readable back by the same table.
CORRIDORKEY_API std::string to_yaml(const Profile& options);

CORRIDORKEY_NAMESPACE_END
