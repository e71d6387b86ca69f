#include "commands.h"
#include "option_args.h"

#include <corridorkey/verify.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

namespace corridorkey::cli {
namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}
}  // namespace

void add_verify(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "verify", "Run the native model on a seeded input; for TorchScript archives compare it "
                "with the archive's own forward (fails if alpha/fg differ by > tolerance). The "
                "archive may return our 13-tuple, a dict with alpha/fg or an (alpha, fg) pair; "
                "intermediates are compared when it returns them. verify EXECUTES the archive's "
                "TorchScript code: only use it on archives you trust (inference, job, bench and "
                "info read checkpoints as data and run nothing from them)");
  auto opt = std::make_shared<VerifyOptions>();
  auto json = std::make_shared<bool>(false);
  non_empty_path(cmd->add_option("--checkpoint", opt->checkpoint, "TorchScript archive or CorridorKey .pth"))
      ->required();
  cmd->add_option("--img-size", opt->img_size, "model resolution (multiple of 32; 0 = checkpoint's)");
  cmd->add_option("--device", opt->device, "auto|cpu|cuda|cuda:N|mps")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "seed of the synthetic input")->capture_default_str();
  cmd->add_option("--tolerance", opt->tolerance, "max abs diff allowed on alpha/fg")
      ->capture_default_str();
  cmd->add_flag("--flash-attention,!--no-flash-attention", opt->flash_attention,
                "4-D SDPA in global-attention blocks for the native model");
  cmd->add_flag("--json", *json, "machine-readable report");
  cmd->callback([opt, json, &exit_code] {
    const auto r = verify_checkpoint(*opt);
    if (*json) {
      nlohmann::json j{{"checkpoint", r.checkpoint}, {"format", r.format}, {"arch", r.arch},
                       {"img_size", r.img_size},     {"device", r.device},
                       {"parameters", r.parameters}, {"has_reference", r.has_reference},
                       {"native_ms", r.native_ms},   {"reference_ms", r.reference_ms},
                       {"alpha_mean", r.alpha_mean}, {"fg_mean", r.fg_mean},
                       {"tolerance", opt->tolerance}, {"passed", r.passed},
                       {"outputs", nlohmann::json::array()}};
      for (const auto& d : r.diffs)
        j["outputs"].push_back({{"name", d.name}, {"shape", d.shape}, {"compared", d.compared},
                                {"max_abs_diff", d.max_abs_diff}, {"max_abs_ref", d.max_abs_ref}});
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::printf("checkpoint  %s (%s)\n", r.checkpoint.c_str(), r.format.c_str());
      std::printf("model       %s, img_size %lld, %lld parameters, device %s\n", r.arch.c_str(),
                  static_cast<long long>(r.img_size), static_cast<long long>(r.parameters),
                  r.device.c_str());
      std::printf("native      %.1f ms   alpha mean %.6f   fg mean %.6f\n", r.native_ms,
                  r.alpha_mean, r.fg_mean);
      if (r.has_reference) {
        std::printf("reference   %.1f ms (TorchScript forward of the same file)\n", r.reference_ms);
        std::printf("%-16s %-20s %14s %14s\n", "output", "shape", "max|diff|", "max|ref|");
        for (const auto& d : r.diffs) {
          if (d.compared)
            std::printf("%-16s %-20s %14.3e %14.3e\n", d.name.c_str(), shape_str(d.shape).c_str(),
                        d.max_abs_diff, d.max_abs_ref);
          else
            std::printf("%-16s %-20s %14s %14s\n", d.name.c_str(), shape_str(d.shape).c_str(),
                        "-", "(not returned)");
        }
        std::printf("%s: alpha/fg max abs diff %s %.1e\n", r.passed ? "PASS" : "FAIL",
                    r.passed ? "<=" : ">", opt->tolerance);
      } else {
        std::printf("no reference forward (not a TorchScript archive at this img_size): "
                    "native run only\n");
      }
    }
    exit_code = r.passed ? kOk : kFailure;
  });
}

}  // namespace corridorkey::cli
