#include "devtools/reference_bench.h"

#include <corridorkey/check.h>
#include <corridorkey/system.h>

#include "config/paths.h"
#include "model/sample_input.h"
#include "model/torch_archive.h"
#include "runtime/model_factory.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace corridorkey::devtools {
namespace fs = std::filesystem;
namespace {

/// The Python that runs the reference: $CORRIDORKEY_PYTHON, else the project venv where
/// docs/build.md puts it ($CK_VENV, or ~/.cache/corridorkey-engine/venv-torch<LibTorch's
/// version>), else python3 from PATH. Never a path fixed at build time: the CLI may run on
/// another machine than the one that built it.
std::string reference_python() {
  auto env = [](const char* n) -> std::string {
    const char* v = std::getenv(n);
    return v ? v : "";
  };
  if (const auto p = env("CORRIDORKEY_PYTHON"); !p.empty()) return p;
  fs::path venv = env("CK_VENV");
  if (venv.empty() && !env("HOME").empty())
    venv = fs::path(env("HOME")) / ".cache" / "corridorkey-engine" / ("venv-torch" + std::string(TORCH_VERSION));
  std::error_code ec;
  if (!venv.empty() && fs::exists(venv / "bin" / "python", ec)) return (venv / "bin" / "python").string();
  return "python3";
}

std::string quote(const std::string& s) {  // for /bin/sh: single quotes, ' as '\''
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void save_dict(const fs::path& path, const std::vector<std::pair<std::string, torch::Tensor>>& t) {
  c10::Dict<std::string, torch::Tensor> d;
  for (const auto& [k, v] : t) d.insert(k, v.contiguous());
  const auto bytes = torch::pickle_save(c10::IValue(d));
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  CK_CHECK(f.good(), IoError, path.string(), ": cannot write");
}

/// Runs `cmd`, returns its stdout; ModelError with its output when it exits non-zero.
std::string run(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  CK_CHECK(p, ModelError, "cannot start: ", cmd);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = ::pclose(p);
  CK_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, ModelError,
           "reference benchmark failed (", cmd, "):\n", out);
  return out;
}

/// "float32" / "bfloat16" / "float16" for the spellings model_precision takes.
std::string precision_name(const std::string& v) {
  return v == "bf16" || v == "bfloat16" ? "bfloat16"
         : v == "fp16" || v == "float16" || v == "half" ? "float16"
                                                         : "float32";
}

}  // namespace

bool is_reference_row(const std::string& p) {
  const auto name = p.substr(0, p.find(':'));
  return name == "reference" || name == "reference-5d" || name == "reference-fast" ||
         name == "reference-upstream" || name == "reference-openvino" ||
         name == "reference-compile";
}

BenchRow run_reference_row(const BenchOptions& b, const std::string& spec,
                           const std::function<std::string()>& plan_precision,
                           std::vector<float>& alpha, std::vector<float>& fg) {
  const std::string variant = spec.substr(0, spec.find(':'));
  std::string asked;  // the spec's own precision=, if any
  if (const auto colon = spec.find(':'); colon != std::string::npos) {
    std::istringstream fields(spec.substr(colon + 1));
    for (std::string f; std::getline(fields, f, ',');) {
      const auto eq = f.find('=');
      const auto key = f.substr(0, eq), value = eq == std::string::npos ? "" : f.substr(eq + 1);
      CK_CHECK((key == "precision" || key == "model_precision") &&
                   (value == "float32" || value == "fp32" || value == "bfloat16" || value == "bf16" ||
                    value == "float16" || value == "fp16" || value == "half"),
               ConfigError, "bench --profile ", spec, ": a reference row takes only precision=",
               "float32|bfloat16|float16, not '", f, "'");
      asked = precision_name(value);
    }
  }
  const std::string python = reference_python();
  const fs::path script = config::tools_dir() / "bench_reference.py";
  std::error_code ec;
  if (variant == "reference-upstream") {
    CK_CHECK(!b.reference_dir.empty(), ConfigError,
             "bench --profile reference-upstream needs --reference-dir DIR (a CorridorKey "
             "checkout, the folder that holds CorridorKeyModule/)");
    const auto mt = fs::path(b.reference_dir) / "CorridorKeyModule" / "core" / "model_transformer.py";
    CK_CHECK(fs::is_regular_file(mt, ec), ConfigError, "--reference-dir ", b.reference_dir, ": ",
             mt.string(), " not found (expected a CorridorKey checkout)");
  }
  CK_CHECK(fs::exists(script, ec), ConfigError, "bench --profile ", variant, ": ",
           script.string(), " not found (reference rows need the bundled tools/; $CORRIDORKEY_DATA_DIR names the folder that holds it)");
  const auto dir = fs::temp_directory_path() / ("ck_bench_ref_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string arch;
  {
    // The engine's own weights and input, as torch.save files the script loads.
    c10::InferenceMode guard;
    auto m = detail::make_model({b.checkpoint, b.img_size, b.random_arch, b.seed});
    arch = m.net->config().arch;
    CK_CHECK(arch == "hiera_base_plus" || arch == "small" || arch == "tiny", ConfigError,
             "bench --profile ", variant,
             ": the reference script knows hiera_base_plus, small and tiny, not ", arch);
    std::vector<std::pair<std::string, torch::Tensor>> w;
    for (const auto& p : m.net->named_parameters(true)) w.emplace_back(p.key(), p.value());
    for (const auto& p : m.net->named_buffers(true)) w.emplace_back(p.key(), p.value());
    save_dict(dir / "weights.pt", w);
    save_dict(dir / "input.pt",
              {{"input", model::seeded_input(1, b.img_size, b.seed, b.hint_band_area)}});
  }
  std::string precision = "float32";
  for (const auto& [k, v] : b.overrides)
    if (k == "model_precision") precision = precision_name(v);
  const bool graph = variant == "reference-openvino" || variant == "reference-compile";
  if (!asked.empty())
    precision = asked;
  else if (graph && precision == "float32" &&
           std::none_of(b.overrides.begin(), b.overrides.end(),
                        [](const auto& o) { return o.first == "model_precision"; }))
    precision = precision_name(plan_precision());
  const std::string device = choose_device(b.device, probe_devices());
  const std::string cmd =
      quote(python) + " " + quote(script.string()) + " --weights " + quote((dir / "weights.pt").string()) +
      " --input " + quote((dir / "input.pt").string()) + " --arch " + arch + " --img-size " +
      std::to_string(b.img_size) + " --variant " + variant + " --precision " + precision +
      " --threads " + std::to_string(at::get_num_threads()) + " --frames " +
      std::to_string(b.frames) + " --warmup " + std::to_string(b.warmup) + " --device " +
      quote(device) + " --output " + quote((dir / "out.pt").string()) +
      (variant == "reference-upstream" ? " --reference-dir " + quote(b.reference_dir) : "");
  const auto out = run(cmd);
  const auto nl = out.find_last_of('{');
  CK_CHECK(nl != std::string::npos, ModelError, "reference benchmark printed no result:\n", out);
  const auto j = nlohmann::json::parse(out.substr(nl));
  BenchRow row;
  row.profile = spec;
  if (j.contains("not_installed")) {
    row.not_installed = j.at("not_installed").get<std::string>();
    row.precision = precision;
    row.info.device = device;
    fs::remove_all(dir, ec);
    return row;
  }
  row.precision = j.at("precision").get<std::string>() +
                  (j.at("channels_last").get<bool>() ? ", channels-last" : "");
  row.info.device = device;
  row.info.img_size = b.img_size;
  row.info.compile_mode_effective =
      j.value("runtime", std::string("eager")) + " (PyTorch, timm " + j.at("timm").get<std::string>() + ")";
  row.setup_ms = j.value("setup_ms", 0.0);
  row.median_ms = j.at("median_ms");
  row.min_ms = j.at("min_ms");
  row.max_ms = j.at("max_ms");
  row.median_stages.encoder_ms = j.at("encoder_ms");
  row.median_stages.decoders_ms = j.at("decoders_ms");
  row.median_stages.refiner_ms = j.at("refiner_ms");
  row.median_stages.infer_ms = row.median_ms;
  row.peak.host_peak_rss_growth =
      static_cast<uint64_t>(j.at("rss_growth_mib").get<double>() * 1024 * 1024);
  row.process_peak_rss = static_cast<uint64_t>(j.at("peak_rss_mib").get<double>() * 1024 * 1024);
  for (const auto& [k, t] : model::load_tensor_dict((dir / "out.pt").string())) {
    auto c = t.to(torch::kFloat).contiguous();
    auto& dst = k == "alpha" ? alpha : fg;
    dst.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  fs::remove_all(dir, ec);
  return row;
}

}  // namespace corridorkey::devtools
