#include "commands.h"
#include "option_args.h"

#include <corridorkey/colour.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

namespace corridorkey::cli {

void add_colorspaces(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "colorspaces", "List the colour space names --input-colorspace, --output-colorspace and "
                     "--fg-colorspace take: built in, and from the OCIO config");
  auto config = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  non_empty_path(cmd->add_option("--ocio-config", *config, "OCIO config whose colour spaces to list too (default: $OCIO)"));
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->callback([config, json, &exit_code] {
    const auto spaces = list_colour_spaces(*config);  // ConfigError: exit 2, naming the file
    if (*json) {
      auto j = nlohmann::json::array();
      for (const auto& s : spaces)
        j.push_back({{"name", s.name}, {"source", s.source}, {"transforms", s.transforms},
                     {"linear", s.linear}});
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::string source;
      for (const auto& s : spaces) {
        if (s.source != source) {
          source = s.source;
          std::printf(source == "built-in" ? "built-in (no config read; $OCIO never changes them):\n"
                                           : "from OCIO config %s:\n", source.c_str());
        }
        if (s.transforms.empty()) std::printf("  %s\n", s.name.c_str());
        else std::printf("  %-24s %s; linear form: %s\n", s.name.c_str(), s.transforms.c_str(), s.linear.c_str());
      }
    }
    exit_code = kOk;
  });
}

}  // namespace corridorkey::cli
