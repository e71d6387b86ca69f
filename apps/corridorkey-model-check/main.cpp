// corridorkey-model-check: the model alone on one device, against LibTorch only (it builds
// in the model-only tree, -DCK_MODEL_ONLY=ON, on a GPU machine without -dev packages).
//  1. every optimization's numerical bound against the unoptimized path, on that device;
//  2. latency medians and peak memory per stage for each profile and precision.
// Exit status: 0 all bounds hold, 1 a bound failed, 2 usage, 4 model / device problem.
//
//   corridorkey-model-check --device cuda --img-size 1024 --json out.json
//   corridorkey-model-check --device cpu --arch tiny --img-size 128 --precisions bfloat16
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/system.h>

#include "flat_profile.h"
#include "group_norm_apply.h"
#include "attention_cpu.h"
#include "group_norm_cpu.h"
#include "model/conv.h"
#include "model/functional.h"
#include "model/sample_input.h"
#include "runtime/memory.h"
#include "runtime/model_factory.h"
#include "runtime/model_runner.h"
#include "timing.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#ifndef CK_SOURCE_PROFILE_DIR
#define CK_SOURCE_PROFILE_DIR "profiles"
#endif

using namespace corridorkey;

namespace {

struct Args {
  std::string device = "auto", checkpoint, arch = "hiera_base_plus", json, profile_dir = CK_SOURCE_PROFILE_DIR;
  int64_t img_size = 512;
  uint64_t seed = 0;
  int frames = 3, warmup = 1;
  std::vector<std::string> profiles{"original", "optimized", "performance", "experimental", "draft"};
  std::vector<std::string> precisions;  // empty: float16 + bfloat16 on CUDA, bfloat16 elsewhere
  bool bounds = true, rows = true;
  std::string save_inputs;  // DIR: weights.pt + input.pt for tools/bench_reference.py
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) v.push_back(x);
  return v;
}

const char* kUsage =
    "usage: corridorkey-model-check [--device auto|cpu|cuda|cuda:N|mps] [--img-size N]\n"
    "         [--checkpoint FILE | --arch hiera_base_plus|tiny] [--seed N] [--frames K]\n"
    "         [--warmup W] [--profiles a,b,...] [--precisions float16,bfloat16,float32]\n"
    "         [--profile-dir DIR] [--no-bounds] [--no-profiles] [--json FILE]\n"
    "         [--save-inputs DIR]   (the weights and input, for tools/bench_reference.py)\n";

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      CK_CHECK(i + 1 < argc, ConfigError, k, " needs a value");
      return argv[++i];
    };
    auto num = [&](const std::string& v) {
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      CK_CHECK(!v.empty() && *end == '\0', ConfigError, k, ": '", v, "' is not an integer");
      return x;
    };
    if (k == "--device") a.device = val();
    else if (k == "--img-size") a.img_size = num(val());
    else if (k == "--checkpoint") a.checkpoint = val();
    else if (k == "--arch") a.arch = val();
    else if (k == "--seed") a.seed = static_cast<uint64_t>(num(val()));
    else if (k == "--frames") a.frames = static_cast<int>(num(val()));
    else if (k == "--warmup") a.warmup = static_cast<int>(num(val()));
    else if (k == "--profiles") a.profiles = split(val());
    else if (k == "--precisions") a.precisions = split(val());
    else if (k == "--profile-dir") a.profile_dir = val();
    else if (k == "--json") a.json = val();
    else if (k == "--save-inputs") a.save_inputs = val();
    else if (k == "--no-bounds") a.bounds = false;
    else if (k == "--no-profiles") a.rows = false;
    else if (k == "--help" || k == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      throw ConfigError("unknown argument '" + k + "'\n" + kUsage);
    }
  }
  CK_CHECK(a.img_size >= 32 && a.img_size % 32 == 0, ConfigError, "--img-size ", a.img_size,
           " is not a positive multiple of 32");
  CK_CHECK(a.frames >= 1 && a.warmup >= 0, ConfigError, "--frames must be >= 1, --warmup >= 0");
  return a;
}

void save_dict(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& t) {
  c10::Dict<std::string, torch::Tensor> d;
  for (const auto& [k, v] : t) d.insert(k, v.detach().cpu().contiguous());
  const auto bytes = torch::pickle_save(c10::IValue(d));
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  CK_CHECK(f.good(), IoError, path, ": cannot write");
}

/// The model's float32 weights and the seeded input as torch.save files of plain dicts:
/// tools/bench_reference.py runs the PyTorch reference on exactly these.
void save_inputs(const Args& a) {
  std::filesystem::create_directories(a.save_inputs);
  auto m = corridorkey::detail::make_model({a.checkpoint, a.img_size, a.checkpoint.empty() ? a.arch : "", a.seed});
  std::vector<std::pair<std::string, torch::Tensor>> w;
  for (const auto& p : m.net->named_parameters(true)) w.emplace_back(p.key(), p.value());
  for (const auto& p : m.net->named_buffers(true)) w.emplace_back(p.key(), p.value());
  save_dict(a.save_inputs + "/weights.pt", w);
  save_dict(a.save_inputs + "/input.pt", {{"input", model::seeded_input(1, a.img_size, a.seed)}});
  std::cout << "saved " << a.save_inputs << "/weights.pt and input.pt (" << m.net->config().arch
            << ", img_size " << a.img_size << ")\n";
}

struct Check {
  std::string name;
  double value = 0, bound = 0;
  bool pass = false;
  std::string note;
};

struct Row {
  std::string profile, precision, exec, attention, refiner;
  double median_ms = 0, encoder_ms = 0, decoders_ms = 0, refiner_ms = 0;
  uint64_t encoder_peak = 0, decoders_peak = 0, refiner_peak = 0, peak_allocated = 0, peak_reserved = 0;
  double alpha_drift = 0, fg_drift = 0;
};

class Checker {
 public:
  Checker(const Args& a) : a_(a), device_(choose_device(a.device, probe_devices())), dev_(device_) {
    x_ = model::seeded_input(1, a.img_size, a.seed).to(dev_);
    if (dev_.is_cpu()) corridorkey::detail::install_cpu_memory_tracker();  // host stage peaks
  }

  Profile base() const {
    Profile o;  // every optimization off, float32: the unoptimized path
    o.model.checkpoint = a_.checkpoint;
    o.model.random_weights_arch = a_.checkpoint.empty() ? a_.arch : "";
    o.model.random_weights_seed = a_.seed;
    o.engine.img_size = a_.img_size;
    o.model.device = device_;
    o.engine.engine_kind = EngineKind::Optimized;
    o.model.disable_cudnn_benchmark = true;  // reproducible algorithm choice for the bounds
    return o;
  }

  /// alpha and fg of one forward under `o`.
  std::pair<torch::Tensor, torch::Tensor> forward(const Profile& o, corridorkey::detail::ModelRun* keep = nullptr) {
    std::string notes;
    auto b = corridorkey::detail::build_runner(o.model, o.engine, dev_, notes);
    auto r = b.runner->run(x_);
    auto out = std::make_pair(r.alpha.cpu(), r.fg.cpu());
    if (keep) *keep = std::move(r);
    return out;
  }

  static double diff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>();
  }

  void bound(const std::string& name, const Profile& a, const Profile& b, double limit,
             const std::string& note = "") {
    const auto [a1, f1] = forward(a);
    const auto [a2, f2] = forward(b);
    const double d = std::max(diff(a1, a2), diff(f1, f2));
    checks_.push_back({name, d, limit, d <= limit, note});
  }

  void run_bounds() {
    const auto o = base();
    auto with = [&](auto&& edit) {
      auto v = o;
      edit(v);
      return v;
    };
    bound("flash_attention (4-D SDPA vs 5-D), fp32", o, with([](auto& v) { v.model.flash_attention = true; }), 1e-5);
    bound("fused_decoder, fp32", o, with([](auto& v) { v.model.fused_decoder = true; }), 1e-5);
    bound("channels_last, fp32", o, with([](auto& v) { v.model.channels_last = true; }), 1e-5);
    bound("fused_refiner, fp32", o, with([](auto& v) { v.engine.fused_refiner = true; }), 1e-5);
    const int64_t tile = std::max<int64_t>(64, (a_.img_size / 2) / 8 * 8);
    bound("tiled_refiner (exact, " + std::to_string(tile) + " px tiles), fp32", o, with([&](auto& v) {
            v.engine.tiled_refiner = RefinerTiling::On;
            v.engine.tile_size = tile;
          }),
          1e-4);
    for (const auto& p : precisions()) {
      if (p == "float32") continue;
      bound("precision " + p + " drift vs float32", o, with([&](auto& v) {
              set_option(v, "model_precision", p);
            }),
            0.1, "reported; bf16 / fp16 round activations");
    }
    if (dev_.is_cpu() && kernels::native_attention_available()) {
      auto bf = with([](auto& v) {
        v.model.model_precision = Precision::BFloat16;
        v.model.flash_attention = true;
      });
      auto nat = bf;
      nat.model.native_attention = corridorkey::AutoSwitch::On;
      bound("native bf16 attention vs LibTorch bf16 SDPA", bf, nat, 3e-2);
    }
    if (dev_.is_cpu() && model::functional::winograd_conv_available()) {
      auto cl = with([](auto& v) { v.model.channels_last = v.engine.fused_refiner = true; });
      auto wino = cl;
      wino.engine.winograd_conv = corridorkey::AutoSwitch::On;
      bound("winograd_conv (refiner convolutions by Winograd F(2x2,3x3)), fp32", cl, wino, 1e-4);
    }
    if (dev_.is_cpu() && model::functional::onednn_linear_available())
      bound("onednn_linear (Linear layers through oneDNN's matmul), fp32", o,
            with([](auto& v) { v.engine.onednn_linear = corridorkey::AutoSwitch::On; }), 1e-4);
    if (dev_.is_cuda()) {
      auto eager = with([](auto& v) {
        v.model.flash_attention = v.model.fused_decoder = true;
        v.model.model_precision = Precision::Float16;
      });
      auto graph = eager;
      graph.engine.compile_mode = CompileMode::ReduceOverhead;
      // Replay runs the captured kernels on the same input: identical results expected.
      std::string notes;
      auto b = corridorkey::detail::build_runner(graph.model, graph.engine, dev_, notes);
      (void)b.runner->run(x_);  // captures the graph
      const auto replay = b.runner->run(x_);
      const auto [ea, ef] = forward(eager);
      const double d = std::max(diff(replay.alpha, ea), diff(replay.fg, ef));
      checks_.push_back({"CUDA graph replay vs eager, fp16", d, 1e-6, d <= 1e-6,
                         b.runner->effective_compile_mode()});
    }
    group_norm_check();
  }

  void group_norm_check() {
    // The fused GroupNorm on this device against a float64 reference.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(a_.seed + 7);
    auto x = (at::randn({1, 64, 97, 131}, gen) * 0.5 + 1).to(dev_);
    auto r = at::randn({1, 64, 97, 131}, gen).to(dev_);
    auto g = (at::rand({64}, gen) + 0.5).to(dev_), bt = at::randn({64}, gen).to(dev_);
    const auto want = torch::relu(torch::group_norm(x.to(torch::kDouble), 8, g.to(torch::kDouble),
                                                    bt.to(torch::kDouble), 1e-5) + r.to(torch::kDouble));
    std::string impl = "plain torch";
    torch::Tensor got;
    if (dev_.is_cuda() && kernels::cuda_kernels_enabled()) {
      auto v = x.view({1, 8, -1});
      auto mean = v.mean(-1), rstd = (v.var(-1, false) + 1e-5).rsqrt();
      got = kernels::group_norm_apply(x, mean, rstd, g, bt, 8, r, true);
      impl = "CUDA kernel";
    } else {
      got = kernels::group_norm_fused(x.clone(), 8, g, bt, 1e-5, r, true, true);
      if (dev_.is_cpu() && kernels::cpu_kernels_enabled()) impl = "CPU kernels";
    }
    const double d = diff(got.to(torch::kDouble), want);
    checks_.push_back({"GroupNorm + residual + ReLU (" + impl + ") vs float64", d, 1e-5, d <= 1e-5, ""});
  }

  std::vector<std::string> precisions() const {
    if (!a_.precisions.empty()) return a_.precisions;
    if (dev_.is_cuda()) return {"float16", "bfloat16"};
    return {"bfloat16"};
  }

  void run_rows() {
    torch::Tensor ref_a, ref_f;
    {
      const auto [a, f] = forward(base());
      ref_a = a;
      ref_f = f;
    }
    for (const auto& prof : a_.profiles)
      for (const auto& prec : precisions()) {
        auto o = modelcheck::load_flat_profile(a_.profile_dir, prof);
        set_option(o, "model_precision", prec);
        o.model.checkpoint = a_.checkpoint;
        o.model.random_weights_arch = a_.checkpoint.empty() ? a_.arch : "";
        o.model.random_weights_seed = a_.seed;
        o.engine.img_size = a_.img_size;
        o.model.device = device_;
        rows_.push_back(row(o, prof, prec, ref_a, ref_f));
        print_row(rows_.back());
      }
  }

  Row row(const Profile& o, const std::string& prof, const std::string& prec,
          const torch::Tensor& ref_a, const torch::Tensor& ref_f) {
    std::string notes;
    auto b = corridorkey::detail::build_runner(o.model, o.engine, dev_, notes);
    Row r;
    r.profile = prof;
    r.precision = b.runner->precision();
    r.exec = b.runner->effective_compile_mode();
    r.attention = b.runner->attention_kind();
    r.refiner = b.runner->refiner_kind();
    std::vector<double> t, enc, dec, ref;
    corridorkey::detail::ModelRun last;
    for (int i = 0; i < a_.warmup + a_.frames; ++i) {
      corridorkey::detail::PeakMemoryScope mem(dev_);
      const auto t0 = timing::Clock::now();
      auto run = b.runner->run(x_);
      if (dev_.is_cuda()) torch::cuda::synchronize();
      const double ms = timing::ms_since(t0);
      const auto m = mem.finish();
      if (i < a_.warmup) continue;
      t.push_back(ms);
      enc.push_back(run.timings.encoder_ms);
      dec.push_back(run.timings.decoders_ms);
      ref.push_back(run.timings.refiner_ms);
      r.encoder_peak = std::max(r.encoder_peak, run.encoder_peak);
      r.decoders_peak = std::max(r.decoders_peak, run.decoders_peak);
      r.refiner_peak = std::max(r.refiner_peak, run.refiner_peak);
      r.peak_allocated = std::max(r.peak_allocated, m.device_peak_allocated ? m.device_peak_allocated : m.host_peak_rss_growth);
      r.peak_reserved = std::max(r.peak_reserved, m.device_peak_reserved);
      last = std::move(run);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    r.median_ms = median(t);
    r.encoder_ms = median(enc);
    r.decoders_ms = median(dec);
    r.refiner_ms = median(ref);
    r.alpha_drift = diff(last.alpha.cpu(), ref_a);
    r.fg_drift = diff(last.fg.cpu(), ref_f);
    return r;
  }

  static double mib(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

  void print_row(const Row& r) const {
    if (rows_.size() == 1)
      std::printf("%-13s %-10s %-10s %10s %9s %9s %9s %10s %10s %10s %10s %9s\n", "profile",
                  "precision", "exec", "median_ms", "enc_ms", "dec_ms", "ref_ms", "enc_MiB",
                  "ref_MiB", "alloc_MiB", "resv_MiB", "alpha_d");
    std::printf("%-13s %-10s %-10s %10.1f %9.1f %9.1f %9.1f %10.1f %10.1f %10.1f %10.1f %9.2e\n",
                r.profile.c_str(), r.precision.c_str(), r.exec.c_str(), r.median_ms, r.encoder_ms,
                r.decoders_ms, r.refiner_ms, mib(r.encoder_peak), mib(r.refiner_peak),
                mib(r.peak_allocated), mib(r.peak_reserved), r.alpha_drift);
    std::fflush(stdout);
  }

  bool report() const {
    bool ok = true;
    std::printf("\nbounds on %s, img_size %lld:\n", device_.c_str(), static_cast<long long>(a_.img_size));
    for (const auto& c : checks_) {
      std::printf("  %-4s %-55s %10.3e <= %.0e %s\n", c.pass ? "ok" : "FAIL", c.name.c_str(),
                  c.value, c.bound, c.note.c_str());
      ok = ok && c.pass;
    }
    if (!a_.json.empty()) write_json(ok);
    return ok;
  }

  void write_json(bool ok) const {
    auto q = [](const std::string& s) {
      std::string o = "\"";
      for (char c : s) o += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      return o + "\"";
    };
    std::ostringstream j;
    j.precision(9);
    j << "{\"device\": " << q(device_) << ", \"img_size\": " << a_.img_size
      << ", \"torch\": " << q(system_info().torch_version) << ", \"passed\": " << (ok ? "true" : "false")
      << ", \"checks\": [";
    for (size_t i = 0; i < checks_.size(); ++i) {
      const auto& c = checks_[i];
      j << (i ? ", " : "") << "{\"name\": " << q(c.name) << ", \"value\": " << c.value
        << ", \"bound\": " << c.bound << ", \"pass\": " << (c.pass ? "true" : "false") << "}";
    }
    j << "], \"profiles\": [";
    for (size_t i = 0; i < rows_.size(); ++i) {
      const auto& r = rows_[i];
      j << (i ? ", " : "") << "{\"profile\": " << q(r.profile) << ", \"precision\": " << q(r.precision)
        << ", \"exec\": " << q(r.exec) << ", \"attention\": " << q(r.attention)
        << ", \"refiner\": " << q(r.refiner) << ", \"median_ms\": " << r.median_ms
        << ", \"encoder_ms\": " << r.encoder_ms << ", \"decoders_ms\": " << r.decoders_ms
        << ", \"refiner_ms\": " << r.refiner_ms << ", \"encoder_peak\": " << r.encoder_peak
        << ", \"decoders_peak\": " << r.decoders_peak << ", \"refiner_peak\": " << r.refiner_peak
        << ", \"peak_allocated\": " << r.peak_allocated << ", \"peak_reserved\": " << r.peak_reserved
        << ", \"alpha_drift\": " << r.alpha_drift << ", \"fg_drift\": " << r.fg_drift << "}";
    }
    j << "]}\n";
    std::ofstream f(a_.json);
    f << j.str();
    CK_CHECK(f.good(), IoError, a_.json, ": cannot write");
  }

 private:
  const Args& a_;
  std::string device_;
  torch::Device dev_;
  torch::Tensor x_;
  std::vector<Check> checks_;
  std::vector<Row> rows_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto args = parse(argc, argv);
    c10::InferenceMode guard;
    if (!args.save_inputs.empty()) save_inputs(args);
    Checker c(args);
    if (args.rows) c.run_rows();
    if (args.bounds) c.run_bounds();
    return c.report() ? 0 : 1;
  } catch (const ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const IoError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 4;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 4;
  }
}
