#include "profile_args.h"

#include <corridorkey/profile.h>

#include <algorithm>

namespace corridorkey::cli {
namespace {

std::string dashed(std::string k) {
  std::replace(k.begin(), k.end(), '_', '-');
  return k;
}

bool is_bool_field(const std::string& key) {
  const auto f = profile_fields(EngineOptions{});
  for (const auto& [k, v] : f)
    if (k == key) return v == "true" || v == "false";
  return false;
}

}  // namespace

EngineOptions ProfileArgs::resolve() const {
  auto o = load_profile(profile);
  for (const auto& [k, v] : overrides) set_profile_field(o, k, v, "--" + dashed(k));
  validate_profile(o, "command line");
  o.device = device;
  if (!checkpoint.empty()) o.checkpoint = checkpoint;
  o.img_size = img_size;
  return o;
}

std::shared_ptr<ProfileArgs> add_profile_args(CLI::App* cmd, const std::string& default_profile,
                                              bool model_flags) {
  auto a = std::make_shared<ProfileArgs>();
  a->profile = default_profile;
  cmd->add_option("--profile", a->profile,
                  "original | optimized | performance | experimental | path/to/profile.yaml")
      ->capture_default_str()
      ->group("Profile");
  for (const auto& [key, help] : profile_schema()) {
    const std::string flag = "--" + dashed(key);
    if (is_bool_field(key)) {
      const std::string k = key;
      auto* on = cmd->add_flag_callback(flag, [a, k] { a->overrides.emplace_back(k, "true"); },
                                        help)->group("Profile overrides");
      auto* off = cmd->add_flag_callback("--no-" + dashed(key),
                                         [a, k] { a->overrides.emplace_back(k, "false"); },
                                         "turn " + dashed(key) + " off")->group("Profile overrides");
      on->excludes(off);
    } else {
      const std::string k = key;
      cmd->add_option_function<std::string>(
             flag, [a, k](const std::string& v) { a->overrides.emplace_back(k, v); }, help)
          ->group("Profile overrides");
    }
  }
  // Reference spellings users already know.
  cmd->add_option_function<std::string>(
         "--precision", [a](const std::string& v) { a->overrides.emplace_back("model_precision", v); },
         "alias of --model-precision (fp32 | fp16 | bf16 | float32 | float16 | bfloat16)")
      ->group("Profile overrides");
  auto* cb = cmd->add_flag_callback(
      "--cudnn-benchmark", [a] { a->overrides.emplace_back("disable_cudnn_benchmark", "false"); },
      "cudnn.benchmark on (= --no-disable-cudnn-benchmark)")->group("Profile overrides");
  auto* ncb = cmd->add_flag_callback(
      "--no-cudnn-benchmark", [a] { a->overrides.emplace_back("disable_cudnn_benchmark", "true"); },
      "cudnn.benchmark off (= --disable-cudnn-benchmark)")->group("Profile overrides");
  cb->excludes(ncb);
  cmd->add_option("--device", a->device, "auto | cpu | cuda | cuda:N | mps")
      ->capture_default_str();
  if (model_flags) {
    cmd->add_option("--checkpoint", a->checkpoint,
                    "TorchScript archive or CorridorKey .pth (default: the bundled one)");
    cmd->add_option("--img-size", a->img_size, "model resolution, a multiple of 32 (0 = checkpoint's)");
  }
  return a;
}

}  // namespace corridorkey::cli
