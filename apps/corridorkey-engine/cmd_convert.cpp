#include "commands.h"
#include "option_args.h"

#include <corridorkey/checkpoint.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

namespace corridorkey::cli {

void add_convert(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "convert",
      "Write a checkpoint (.pth zip or legacy, TorchScript archive, safetensors; a file or a "
      "folder) as a .safetensors file with the architecture in its metadata, so only pickle-free "
      "files need to be kept. Nothing in the input is executed; the output is read back and "
      "compared bit for bit");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  non_empty_path(cmd->add_option("input", *in, "checkpoint file or folder"))->required();
  non_empty_path(cmd->add_option("output", *out, "the .safetensors file to write"))->required();
  cmd->add_flag("--json", *json, "machine-readable report");
  cmd->callback([in, out, json, &exit_code] {
    const auto r = convert_checkpoint(*in, *out);
    if (*json) {
      std::cout << nlohmann::json{{"input", r.input},     {"input_format", r.input_format},
                                  {"output", r.output},   {"arch", r.arch},
                                  {"img_size", r.img_size}, {"tensors", r.tensors},
                                  {"bytes", r.bytes},     {"ignored", r.ignored}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << std::endl;
    } else {
      std::printf("read    %s (%s): %s, img_size %lld\n", r.input.c_str(), r.input_format.c_str(),
                  r.arch.c_str(), static_cast<long long>(r.img_size));
      if (!r.ignored.empty()) {
        std::string s;
        for (const auto& e : r.ignored) s += (s.empty() ? "" : ", ") + e;
        std::printf("ignored %s (not weights)\n", s.c_str());
      }
      std::printf("wrote   %s: %lld tensors, %.1f MiB, read back bit-identical\n", r.output.c_str(),
                  static_cast<long long>(r.tensors), static_cast<double>(r.bytes) / (1024.0 * 1024.0));
    }
    exit_code = kOk;
  });
}

}  // namespace corridorkey::cli
