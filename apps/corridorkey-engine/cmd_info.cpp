#include "commands.h"

#include <corridorkey/system.h>
#include <corridorkey/tune.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

namespace corridorkey::cli {

void add_info(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "LibTorch version, build features and devices");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->callback([json, &exit_code] {
    const auto s = system_info();
    if (*json) {
      nlohmann::json j{{"engine_version", s.engine_version},
                       {"torch_version", s.torch_version},
                       {"cuda_build", s.cuda_build},
                       {"cuda_runtime", s.cuda_runtime},
                       {"mps", s.mps},
                       {"cpu_threads", s.cpu_threads},
                       {"cpu", {{"avx2", s.cpu.avx2}, {"avx512", s.cpu.avx512},
                                {"avx512_bf16", s.cpu.avx512_bf16}, {"amx", s.cpu.amx},
                                {"onednn", s.cpu.onednn}, {"identity", s.cpu.identity()}}},
                       {"auto_precision", {{"cpu", s.auto_precision_cpu},
                                           {"cuda", s.auto_precision_cuda}}},
                       {"tune_cache", tune_cache_path()},
                       {"tune_plans", nlohmann::json::object()},
                       {"cuda_devices", nlohmann::json::array()}};
      for (const auto& [key, summary] : tune_cache_entries()) j["tune_plans"][key] = summary;
      for (const auto& d : s.cuda)
        j["cuda_devices"].push_back({{"index", d.index}, {"name", d.name},
                                     {"total_memory_bytes", d.total_memory_bytes},
                                     {"compute_capability", std::to_string(d.compute_major) +
                                                                "." + std::to_string(d.compute_minor)}});
      // ensure_ascii: plan keys come from files (`tune --import`); every control character
      // (DEL and C1 too) and every non-ASCII one is written as \uXXXX, none raw.
      std::cout << j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::printf("corridorkey-engine %s\n", s.engine_version.c_str());
      std::printf("LibTorch          %s (wheel CUDA %s)\n", s.torch_version.c_str(),
                  s.cuda_runtime.empty() ? "none" : s.cuda_runtime.c_str());
      std::printf("CUDA kernels      %s\n", s.cuda_build ? "compiled in" : "off (CPU-only build)");
      std::printf("CUDA devices      %zu\n", s.cuda.size());
      for (const auto& d : s.cuda)
        std::printf("  cuda:%d  %s  %.1f GiB  sm_%d%d\n", d.index, d.name.c_str(),
                    static_cast<double>(d.total_memory_bytes) / (1 << 30), d.compute_major,
                    d.compute_minor);
      std::printf("MPS               %s\n", s.mps ? "available" : "not available");
      std::printf("CPU               %s\n", s.cpu.identity().c_str());
      std::printf("CPU threads       %d\n", s.cpu_threads);
      std::printf("CPU features      avx2 %s, avx512 %s, avx512_bf16 %s, amx %s\n",
                  s.cpu.avx2 ? "yes" : "no", s.cpu.avx512 ? "yes" : "no",
                  s.cpu.avx512_bf16 ? "yes" : "no", s.cpu.amx ? "yes" : "no");
      std::printf("oneDNN            %s\n", s.cpu.onednn ? "available (convolutions and bf16 "
                  "GEMMs run through it; `bench --ops` shows aten::mkldnn_convolution)" : "not built in");
      std::printf("precision auto    cpu: %s, cuda: %s (flag rule; with tune auto the measured "
                  "plan decides on a CPU)\n", s.auto_precision_cpu.c_str(), s.auto_precision_cuda.c_str());
      std::printf("tune cache        %s\n", tune_cache_path().empty()
                                             ? "none (HOME and XDG_CACHE_HOME unset): plans are kept in memory"
                                             : tune_cache_path().c_str());
      print_tune_plans("  ");
    }
    exit_code = kOk;
  });
}

}  // namespace corridorkey::cli
