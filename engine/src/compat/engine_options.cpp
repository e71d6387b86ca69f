// Adapters of the API deprecated for one release: 0.1's combined EngineOptions (now an alias
// of Profile, options.h) and the two text setters set_option replaced. Each is a call of the
// current API; none is used inside the engine.
#include <corridorkey/check.h>
#include <corridorkey/engine.h>
#include <corridorkey/model.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

CORRIDORKEY_NAMESPACE_BEGIN

void set_profile_field(Profile& options, const std::string& key, const std::string& value,
                       const std::string& source) {
  set_option(options, key, value, source, OptionScope::Profile);
}

void set_engine_option(Profile& options, const std::string& key, const std::string& value,
                       const std::string& source) {
  set_option(options, key, value, source);
}

std::string engine_option_value(const Profile& options, const std::string& key) {
  return option_value(options, key);
}

std::unique_ptr<BaseEngine> create_engine(std::shared_ptr<const Model> model, const Profile& profile) {
  // 0.1 refused a Model half of another key (one copy of the weights per key): so does this.
  CK_CHECK(model, ConfigError, "an engine needs a Model (Model::load)");
  const std::string key = model_key(profile.model);
  CK_CHECK(key == model->key(), ConfigError, "this Model holds weights for {", model->key(),
           "}; the engine's options ask for {", key, "}: Model::load() those options (a second copy of the weights)");
  return create_engine(std::move(model), profile.engine);
}

CORRIDORKEY_NAMESPACE_END
