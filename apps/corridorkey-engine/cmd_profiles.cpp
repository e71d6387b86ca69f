#include "commands.h"
#include "option_args.h"

#include <corridorkey/profile.h>
#include <corridorkey/system.h>
#include <corridorkey/tune.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <set>

namespace corridorkey::cli {

void add_profiles(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("profiles", "List the optimization profiles or show one resolved");
  cmd->require_subcommand(1);
  auto* list = cmd->add_subcommand("list", "bundled profiles and the folder they are read from");
  list->callback([&exit_code] {
    std::printf("profiles in %s:\n", profile_dir().c_str());
    for (const auto& p : builtin_profiles())
      std::printf("  %-13s %s\n", p.c_str(), profile_description(p).c_str());
    std::printf("fields:\n");
    for (const auto& [k, h] : profile_schema()) std::printf("  %-24s %s\n", k.c_str(), h.c_str());
    exit_code = kOk;
  });
  auto* show = cmd->add_subcommand("show", "print the options a profile resolves to after overrides");
  auto name = std::make_shared<std::string>();
  non_empty_path(show->add_option("name", *name, "profile name or path"))->required();
  auto args = add_engine_flags(show, "original", /*run_fields=*/false);
  show->callback([name, args, &exit_code] {
    args->profile = *name;
    const auto o = args->options();
    // A loadable profile: `profiles show optimized > mine.yaml` is where a profile of one's
    // own starts. The run settings (checkpoint, device, threads, ...) are not profile
    // fields, and a profile file refuses them: they follow as comments.
    std::set<std::string> keys;
    for (const auto& [k, v] : profile_fields(o)) keys.insert(k);
    std::istringstream all(to_yaml(o));
    std::string body, run;
    for (std::string line; std::getline(all, line);) {
      const auto key = line.substr(0, line.find(':'));
      if (keys.count(key)) body += line + "\n";
      else if (key != "profile") run += "#   " + line + "\n";
    }
    std::cout << "# profile " << o.engine.profile << ", resolved (save it as a .yaml file to start a profile of your own)\n"
              << body << "# run settings, not profile fields (flags, job files):\n" << run;
    if (o.model.model_precision == Precision::Auto)
      std::cout << "# model_precision auto resolves on this machine to: cpu "
                << to_string(resolve_precision(Precision::Auto, "cpu")) << ", cuda/mps "
                << to_string(resolve_precision(Precision::Auto, "cuda")) << " by the flag rule"
                << (o.model.tune != TuneMode::Off ? "; with tune on, the measured plan decides on a CPU "
                                              "(`corridorkey-engine tune --profile NAME` times it)"
                                            : "")
                << "\n";
    if (o.model.tune != TuneMode::Off) {
      std::cout << "# measured plans cached in " << tune_cache_path() << ":\n";
      std::cout << std::flush;
      print_tune_plans("#   ");
    }
    exit_code = kOk;
  });
}

}  // namespace corridorkey::cli
