#include "option_args.h"

#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include <algorithm>

namespace corridorkey::cli {
namespace {

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

const char* group_of(OptionScope s) {
  switch (s) {
    case OptionScope::Profile: return "Profile overrides";
    case OptionScope::Run: return "Model and post-processing";
    case OptionScope::Inference: return "Clips and outputs";
  }
  return "";
}

/// Registers every flag of one table row (--x and --no-x for switches, aliases, shortcuts).
void add_field(CLI::App* cmd, const OptionInfo& f, std::vector<OptionArgs::Set>& sets) {
  auto* target = &sets;
  const std::string key = f.key;
  const std::string dflt = f.scope == OptionScope::Profile ? "from the profile" : f.default_value;
  auto set = [target, key](const std::string& flag, const std::string& v, bool valued) {
    target->push_back({key, v, flag, valued ? flag + " " + v : flag});
  };
  std::vector<CLI::Option*> opts;
  if (f.is_switch) {
    const auto on = flag_of(key), off = "--no-" + flag_of(key).substr(2);
    opts.push_back(cmd->add_flag_callback(on, [set, on] { set(on, "true", false); },
                                          f.help + " [default: " + dflt + "]"));
    opts.push_back(cmd->add_flag_callback(off, [set, off] { set(off, "false", false); },
                                          "turn " + on.substr(2) + " off"));
  } else {
    // A shortcut may own the field's own flag name (--tiled-refiner = tiled_refiner true);
    // the value then goes through the aliases (--refiner-tiling auto).
    bool flag_taken = false;
    for (const auto& sc : f.shortcuts) flag_taken |= sc.first == flag_of(key);
    std::string names = flag_taken ? "" : flag_of(key);
    for (const auto& a : f.aliases) names += (names.empty() ? "" : ",") + a;
    const auto flag = flag_taken && !f.aliases.empty() ? f.aliases.front() : flag_of(key);
    opts.push_back(cmd->add_option_function<std::string>(
                           names, [set, flag](const std::string& v) { set(flag, v, true); },
                           f.help + " (" + f.allowed + ") [default: " +
                               (dflt.empty() ? "none" : dflt) + "]")
                       ->type_name("VALUE"));
    if (f.is_path) non_empty_path(opts.back());
  }
  for (const auto& [flag, value] : f.shortcuts) {
    const std::string fl = flag, v = value;
    opts.push_back(cmd->add_flag_callback(fl, [set, fl, v] { set(fl, v, false); },
                                          "= " + flag_of(key) + " " + v));
  }
  for (auto* o : opts) o->group(group_of(f.scope));
}

/// Two flags that set one field to different values contradict each other.
void check_conflicts(const std::vector<OptionArgs::Set>& sets) {
  for (size_t i = 0; i < sets.size(); ++i)
    for (size_t j = i + 1; j < sets.size(); ++j)
      CK_CHECK(sets[i].key != sets[j].key || sets[i].value == sets[j].value, ConfigError,
               sets[i].shown, " and ", sets[j].shown, " contradict each other (both set '", sets[i].key, "')");
}

}  // namespace

CLI::Option* non_empty_path(CLI::Option* o) {
  // A validator runs on every value given, "" included (CLI11 skips it only for flags).
  return o->check(CLI::Validator(
      [](std::string& v) {
        return v.empty() ? std::string("an empty path; give a file or folder (an unset variable in \"$VAR\"?)")
                         : std::string();
      },
      "", "non-empty path"));
}

Profile OptionArgs::options() const {
  check_conflicts(engine_sets);
  auto o = load_profile(profile);
  for (const auto& s : engine_sets) set_option(o, s.key, s.value, s.flag);
  validate_profile(o, "command line");
  return o;
}

InferenceOptions OptionArgs::inference(const std::vector<std::string>& paths) const {
  InferenceOptions o;
  o.paths = paths;
  check_conflicts(inference_sets);
  for (const auto& s : inference_sets) set_inference_option(o, s.key, s.value, s.flag);
  validate_inference_options(o, "command line");
  return o;
}

std::shared_ptr<OptionArgs> add_engine_flags(CLI::App* cmd, const std::string& default_profile,
                                             bool run_fields) {
  auto a = std::make_shared<OptionArgs>();
  a->profile = default_profile;
  non_empty_path(cmd->add_option("--profile", a->profile,
                                 "original | optimized | performance | experimental | draft | path/to/profile.yaml"))
      ->capture_default_str()
      ->group("Profile");
  for (const auto& f : engine_option_fields())
    if (f.scope == OptionScope::Profile || run_fields) add_field(cmd, f, a->engine_sets);
  return a;
}

void add_inference_flags(CLI::App* cmd, const std::shared_ptr<OptionArgs>& args) {
  for (const auto& f : inference_option_fields()) add_field(cmd, f, args->inference_sets);
}

}  // namespace corridorkey::cli
