#include <corridorkey/bench.h>
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include "devtools/op_profile.h"
#include "devtools/reference_bench.h"
#include "devtools/roofline.h"
#include "runtime/memory.h"
#include "model/checkpoint.h"
#include "model/conv.h"
#include "model/sample_input.h"
#include "model/tiled_refiner.h"
#include "runtime/model_factory.h"
#include "runtime/torch_boundary.h"
#include "runtime/tune_cache.h"
#include "timing.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <locale>
#include <sstream>

CORRIDORKEY_NAMESPACE_BEGIN
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

Profile bench_engine_options(const BenchOptions& b, const std::string& spec) {
  const auto colon = spec.find(':');
  auto o = load_profile(spec.substr(0, colon));
  for (const auto& [k, v] : b.overrides) set_option(o, k, v, "command line", OptionScope::Profile);
  if (colon != std::string::npos) {
    std::stringstream ss(spec.substr(colon + 1));
    ss.imbue(std::locale::classic());  // numbers in every locale
    for (std::string kv; std::getline(ss, kv, ',');) {
      const auto eq = kv.find('=');
      CK_CHECK(eq != std::string::npos, ConfigError, "--profile '", spec,
               "': expected NAME:field=value[,field=value]");
      set_option(o, kv.substr(0, eq), kv.substr(eq + 1), "--profile " + spec, OptionScope::Profile);
    }
  }
  validate_profile(o, "bench overrides");
  o.model.checkpoint = b.checkpoint;
  o.model.random_weights_arch = b.checkpoint.empty() ? b.random_arch : "";
  o.model.random_weights_seed = b.seed;
  o.engine.img_size = b.img_size;
  o.model.device = b.device;
  o.model.track_host_memory = true;  // allocator peaks are what bench reports
  return o;
}

namespace {

/// The nominal FLOPs of the bench's model at its size, the encoder where `o` puts it.
model::FrameFlops flops_of(const BenchOptions& b, const Profile& o) {
  detail::ModelSource src;
  src.checkpoint = b.checkpoint;
  src.img_size = b.img_size;
  src.random_arch = b.checkpoint.empty() ? b.random_arch : "";
  src.seed = b.seed;
  src.backbone_size = o.engine.backbone_size;
  src.backbone_percent = o.engine.backbone_percent;
  return model::frame_flops(detail::read_source(src).config);
}

/// bench --roofline for the rows of one run: the FLOPs per backbone setting and the GEMM
/// rate per device and precision, each found once.
class Roofline {
 public:
  explicit Roofline(const BenchOptions& b) : b_(b) {}
  void add(BenchRow& row, const Profile& o, const model::EncoderPartTimes* parts = nullptr,
           double parts_encoder_ms = 0) {
    const auto fk = std::pair{o.engine.backbone_size, o.engine.backbone_percent};
    auto f = flops_.find(fk);
    if (f == flops_.end()) f = flops_.emplace(fk, flops_of(b_, o)).first;
    const std::string device = row.info.device.empty() ? "cpu" : row.info.device;
    const auto rk = device + " " + row.precision;
    auto r = rates_.find(rk);
    if (r == rates_.end()) {
      std::string note;
      r = rates_.emplace(rk, devtools::gemm_rate(device, row.precision, detail::tune_cache_resolve(o.model.tune_cache), note))
              .first;
      row.notes = note;
    }
    row.gemm = r->second;
    r->second.cached = true;  // later rows reuse the number: not timed for them
    r->second.trial_ms = 0;
    row.roofline = devtools::roofline_stages(f->second, row.median_stages, row.median_ms, row.gemm.gflops,
                                             parts, parts_encoder_ms);
    if (parts) {
      char line[200];
      std::snprintf(line, sizeof line,
                    "the encoder's parts are one more frame, timed part by part apart from the "
                    "median: its encoder took %.1f ms",
                    parts_encoder_ms);
      if (!row.notes.empty()) row.notes += '\n';
      row.notes += line;
    }
  }

 private:
  const BenchOptions& b_;
  std::map<std::pair<int64_t, int>, model::FrameFlops> flops_;
  std::map<std::string, GemmRate> rates_;
};

void fill_stats(BenchRow& row, const std::vector<double>& totals,
                const std::vector<StageTimings>& stages) {
  row.median_ms = median(totals);
  row.min_ms = *std::min_element(totals.begin(), totals.end());
  row.max_ms = *std::max_element(totals.begin(), totals.end());
  std::vector<double> e, d, r;
  for (const auto& s : stages) {
    e.push_back(s.encoder_ms);
    d.push_back(s.decoders_ms);
    r.push_back(s.refiner_ms);
  }
  row.median_stages.encoder_ms = median(e);
  row.median_stages.decoders_ms = median(d);
  row.median_stages.refiner_ms = median(r);
  row.median_stages.infer_ms = row.median_ms;
}

void take_peak(MemoryStats& peak, const MemoryStats& m) {
  peak.device_peak_allocated = std::max(peak.device_peak_allocated, m.device_peak_allocated);
  peak.device_peak_reserved = std::max(peak.device_peak_reserved, m.device_peak_reserved);
  peak.host_peak_allocated = std::max(peak.host_peak_allocated, m.host_peak_allocated);
  peak.host_peak_rss_growth = std::max(peak.host_peak_rss_growth, m.host_peak_rss_growth);
  peak.encoder_peak = std::max(peak.encoder_peak, m.encoder_peak);
  peak.decoders_peak = std::max(peak.decoders_peak, m.decoders_peak);
  peak.refiner_peak = std::max(peak.refiner_peak, m.refiner_peak);
}

/// The refiner stage alone, in the first profile's precision and layout: the reference
/// sequence (conv, GroupNorm, add, ReLU), the fused whole-image refiner, and the exact tiled
/// refiner at tile_size, on a seeded 7-channel input. The drift column is the delta logits'
/// max abs difference from the first row.
std::vector<BenchRow> refiner_bench(const BenchOptions& b,
                                    const std::function<void(const BenchRow&)>& on_row) {
  return detail::rethrow_torch("refiner benchmark", [&] {
    auto o = bench_engine_options(b, b.profiles.front());
    detail::ModelSource src;
    src.checkpoint = b.checkpoint;
    src.img_size = b.img_size;
    src.random_arch = b.random_arch;
    src.seed = b.seed;
    auto net = detail::make_model(src).net;
    const std::string device = choose_device(b.device, probe_devices());
    const torch::Device dev(device);
    const auto prec = resolve_precision(o.model.model_precision, device);
    const auto dtype = prec == Precision::BFloat16 ? torch::kBFloat16
                       : prec == Precision::Float16 ? torch::kHalf
                                                    : torch::kFloat;
    net->to(dev, dtype);
    if (o.model.channels_last) net->to_channels_last();
    detail::install_cpu_memory_tracker();
    c10::InferenceMode guard;
    auto x = model::seeded_input(1, b.img_size, b.seed);
    auto in = torch::cat({x.slice(1, 0, 3), torch::sigmoid(x.slice(1, 3, 4).repeat({1, 4, 1, 1}) * 4 - 2)}, 1)
                  .to(dev, dtype)
                  .contiguous(o.model.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
    std::vector<BenchRow> rows;
    torch::Tensor first;
    // No plan runs here: an explicit winograd_conv true applies, auto stays direct.
    model::functional::WinogradConvScope winograd(o.engine.winograd_conv == AutoSwitch::On && dtype == torch::kFloat);
    const bool wino = o.engine.winograd_conv == AutoSwitch::On && dtype == torch::kFloat &&
                      !model::functional::winograd_refiner_unavailable(o.model.channels_last, net->config().refiner_channels);
    const std::string layout = std::string(o.model.channels_last ? ", channels-last" : "") + (wino ? ", Winograd" : "");
    for (const int mode : {0, 1, 2}) {
      BenchRow row;
      row.profile = mode == 0 ? "refiner whole image, eager"
                    : mode == 1 ? "refiner whole image, fused"
                                : "refiner tiled " + std::to_string(o.engine.tile_size) + ", fused";
      row.precision = std::string(to_string(prec)) + layout;
      row.info.device = device;
      row.info.img_size = b.img_size;
      std::vector<double> t;
      std::vector<StageTimings> st;
      torch::Tensor out;
      for (int i = 0; i < b.warmup + b.frames; ++i) {
        detail::PeakMemoryScope mem(dev);
        const auto t0 = timing::Clock::now();
        out = mode == 0   ? net->refiner->forward_input(in)
              : mode == 1 ? net->refiner->forward_fused(in)
                          : model::tiled_refiner_forward(*net->refiner, in, {o.engine.tile_size});
        if (dev.is_cuda()) out.cpu();
        const double ms = timing::ms_since(t0);
        const auto m = mem.finish();
        if (i < b.warmup) continue;
        t.push_back(ms);
        StageTimings s;
        s.refiner_ms = ms;
        st.push_back(s);
        take_peak(row.peak, m);
      }
      fill_stats(row, t, st);
      if (!first.defined()) first = out;
      row.ratio = rows.empty() ? 1.0 : row.median_ms / rows.front().median_ms;
      row.alpha_max_diff = (out.to(torch::kFloat) - first.to(torch::kFloat)).abs().max().item<double>();
      rows.push_back(row);
      if (on_row) on_row(row);
    }
    return rows;
  });
}

}  // namespace

FlopCounts bench_flop_counts(const BenchOptions& b) {
  CK_CHECK(!b.checkpoint.empty() || !b.random_arch.empty(), ConfigError,
           "bench: give --checkpoint FILE or --random-weights");
  return detail::rethrow_torch("FLOP count", [&] {
    const auto o = bench_engine_options(b, b.profiles.empty() ? std::string("original") : b.profiles.front());
    const auto f = flops_of(b, o);
    FlopCounts c;
    c.encoder_linear = f.encoder_linear();
    c.encoder_attention = f.encoder_attention();
    c.decoders = f.decoders;
    c.refiner = f.refiner;
    c.total = f.total();
    c.global_attention = f.global_attention;
    c.windowed_attention = f.windowed_attention;
    c.global_scores = f.global_scores;
    c.windowed_scores = f.windowed_scores;
    for (size_t i = 0; i < 4; ++i) c.stages[i] = f.stage_linear[i] + f.stage_attention[i];
    return c;
  });
}

std::vector<BenchRow> run_bench(const BenchOptions& b,
                                const std::function<void(const BenchRow&)>& on_row) {
  CK_CHECK(!b.profiles.empty(), ConfigError, "bench: no --profile given");
  CK_CHECK(b.frames >= 1, ConfigError, "bench: --frames must be >= 1, got ", b.frames);
  CK_CHECK(b.warmup >= 0, ConfigError, "bench: --warmup must be >= 0, got ", b.warmup);
  CK_CHECK(b.img_size >= 32 && b.img_size <= 16384 && b.img_size % 32 == 0, ConfigError,
           "bench: --img-size ", b.img_size, " is not a multiple of 32 in 32..16384");
  CK_CHECK(!b.checkpoint.empty() || !b.random_arch.empty(), ConfigError,
           "bench: give --checkpoint FILE or --random-weights");
  if (b.refiner_only) return refiner_bench(b, on_row);

  const auto x = model::seeded_input(1, b.img_size, b.seed, b.hint_band_area).contiguous();
  const std::vector<float> input(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
  std::vector<BenchRow> rows;
  std::vector<float> ref_alpha, ref_fg;
  double base_ms = 0;
  Roofline roofline(b);
  std::string plan_precision;  // the precision an optimized row ran in, once one has
  auto planned = [&] {
    if (plan_precision.empty()) {
      const auto bo = bench_engine_options(b, "optimized");
      plan_precision = create_engine(bo.model, bo.engine)->info().precision;
    }
    return plan_precision;
  };
  for (const auto& p : b.profiles) {
    if (devtools::is_reference_row(p)) {
      std::vector<float> alpha, fg;
      auto row = devtools::run_reference_row(b, p, planned, alpha, fg);
      if (!row.not_installed.empty()) {
        rows.push_back(row);
        if (on_row) on_row(row);
        continue;
      }
      if (ref_alpha.empty()) {
        ref_alpha = alpha;
        ref_fg = fg;
        base_ms = row.median_ms;
      }
      row.alpha_max_diff = max_diff(alpha, ref_alpha);
      row.fg_max_diff = max_diff(fg, ref_fg);
      row.ratio = row.median_ms / base_ms;
      if (b.roofline) roofline.add(row, bench_engine_options(b, "original"));
      rows.push_back(row);
      if (on_row) on_row(row);
      continue;
    }
    const auto bo = bench_engine_options(b, p);
    auto engine = create_engine(bo.model, bo.engine);
    BenchRow row;
    row.profile = p;
    row.info = engine->info();
    row.precision = row.info.precision;
    if (p == "optimized") plan_precision = row.precision;  // the plan's pick, for the graph rows
    std::vector<double> totals;
    std::vector<StageTimings> stages;
    BaseEngine::ModelOutput out;
    for (int i = 0; i < b.warmup + b.frames; ++i) {
      const bool last = i + 1 == b.warmup + b.frames;
      std::optional<devtools::OpProfile> ops;
      if (last && b.top_ops > 0) ops.emplace();
      out = engine->run_model(input);
      if (ops) row.top_ops = ops->stop(static_cast<size_t>(b.top_ops));
      if (i < b.warmup) continue;
      totals.push_back(out.timings.infer_ms);
      stages.push_back(out.timings);
      take_peak(row.peak, out.memory);
    }
    fill_stats(row, totals, stages);
    // --roofline: one frame more, its encoder timed part by part (CPU only: see
    // model/encoder_parts.h), so the clock's reads never touch the timed median.
    model::EncoderPartTimes parts;
    double parts_encoder_ms = 0;
    if (b.roofline) {
      model::EncoderPartClock clock(parts);
      parts_encoder_ms = engine->run_model(input).timings.encoder_ms;
    }
    if (ref_alpha.empty()) {
      ref_alpha = out.alpha;
      ref_fg = out.fg;
      base_ms = row.median_ms;
    }
    row.ratio = row.median_ms / base_ms;
    row.routed_stage2 = out.routed_stage2;
    row.routed_stage3 = out.routed_stage3;
    row.alpha_max_diff = max_diff(out.alpha, ref_alpha);
    row.fg_max_diff = max_diff(out.fg, ref_fg);
    if (b.roofline) roofline.add(row, bo, parts.calls ? &parts : nullptr, parts_encoder_ms);
    rows.push_back(row);
    if (on_row) on_row(row);
  }
  return rows;
}

CORRIDORKEY_NAMESPACE_END
