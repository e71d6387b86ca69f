// The public view of the option tables (corridorkey/option_fields.h).
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>

#include <filesystem>

#include "config/engine_fields.h"
#include "config/inference_fields.h"

#include <tuple>

CORRIDORKEY_NAMESPACE_BEGIN

using config::engine_table;

const char* to_string(OptionOwner o) {
  switch (o) {
    case OptionOwner::Model: return "model";
    case OptionOwner::Engine: return "engine";
    case OptionOwner::Inference: return "inference";
  }
  return "?";
}

ModelOptions default_model_options() { return ModelOptions{}; }
EngineSettings default_engine_settings() { return EngineSettings{}; }

std::vector<OptionInfo> engine_option_fields() { return engine_table().info(); }
std::vector<OptionInfo> inference_option_fields() { return config::inference_table().info(); }

namespace {
/// The row of `key` in the Profile table, for a caller holding one half: a key of the other
/// half is refused, naming the half it belongs to.
const config::Field<Profile>& row_of(const std::string& key, OptionOwner half, const std::string& source) {
  const auto* f = engine_table().find(key);
  CK_CHECK(f, ConfigError, source, ": unknown key '", key, "' (known keys: ", engine_table().known_keys(), ")");
  CK_CHECK(f->info.owner == half, ConfigError, source, ": key '", f->info.key, "' is ",
           f->info.owner == OptionOwner::Model ? "a model option (ModelOptions: it is baked into the Model's weights)"
                                               : "an engine setting (EngineSettings: each engine's own)",
           ", not ", half == OptionOwner::Model ? "a model option" : "an engine setting");
  return *f;
}
}  // namespace

void set_option(Profile& o, const std::string& key, const std::string& value, const std::string& source,
                OptionScope widest) {
  if (widest == OptionScope::Profile) {
    const auto* f = engine_table().find(key);
    CK_CHECK(f && f->info.scope == OptionScope::Profile, ConfigError, source, ": unknown key '", key,
             "' (known keys: ", config::profile_keys(), ")");
  }
  engine_table().set(o, key, value, source);
}

void set_option(ModelOptions& o, const std::string& key, const std::string& value, const std::string& source) {
  Profile p;  // a row sets only the half that declares its field (config::part)
  p.model = o;
  row_of(key, OptionOwner::Model, source);
  engine_table().set(p, key, value, source);
  o = std::move(p.model);
}

void set_option(EngineSettings& o, const std::string& key, const std::string& value, const std::string& source) {
  Profile p;
  p.engine = o;
  row_of(key, OptionOwner::Engine, source);
  engine_table().set(p, key, value, source);
  o = std::move(p.engine);
}

void set_inference_option(InferenceOptions& o, const std::string& key, const std::string& value,
                          const std::string& source) {
  config::inference_table().set(o, key, value, source);
}

std::string option_value(const Profile& o, const std::string& key) { return engine_table().get(o, key); }

std::string option_value(const ModelOptions& o, const std::string& key) {
  Profile p;
  p.model = o;
  return row_of(key, OptionOwner::Model, "option_value").format(p);
}

std::string option_value(const EngineSettings& o, const std::string& key) {
  Profile p;
  p.engine = o;
  return row_of(key, OptionOwner::Engine, "option_value").format(p);
}

std::string inference_option_value(const InferenceOptions& o, const std::string& key) {
  return config::inference_table().get(o, key);
}

void validate_inference_options(const InferenceOptions& o, const std::string& source) {
  CK_CHECK(o.fg || o.matte || o.comp || o.processed || o.layered, ConfigError, source,
           ": key 'outputs': select at least one of fg, matte, comp, processed, layered");
  CK_CHECK(o.read_workers >= 1 && o.write_workers >= 1, ConfigError, source,
           ": read_workers / write_workers must be >= 1");
  // A video is encoded from its image sequence, so the sequence must be among the outputs.
  for (auto [want, have, name] : {std::tuple{o.video_out.comp, o.comp, "comp"},
                                  {o.video_out.matte, o.matte, "matte"},
                                  {o.video_out.fg, o.fg, "fg"}})
    CK_CHECK(!want || have, ConfigError, source, ": key 'video_out': ", name,
             " is encoded from the ", name, " sequence, which 'outputs' does not select");
  // A file where the outputs' folder should be fails when the first clip is planned, after
  // the model loaded (inference) or on the farm (a job that `job plan` accepted).
  std::error_code ec;
  CK_CHECK(o.output_root.empty() || !std::filesystem::exists(o.output_root, ec) ||
               std::filesystem::is_directory(o.output_root, ec),
           ConfigError, source, ": key 'output_root': ", o.output_root, " exists and is not a folder");
  CK_CHECK(!(o.video_codec == VideoCodec::ProRes && o.video_out.fg && !o.matte), ConfigError,
           source, ": key 'video_codec': ProRes FG carries the matte as alpha; add matte to "
           "'outputs'");
}

CORRIDORKEY_NAMESPACE_END
