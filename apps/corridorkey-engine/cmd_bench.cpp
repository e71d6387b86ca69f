#include "commands.h"
#include "option_args.h"

#include <corridorkey/bench.h>
#include <corridorkey/check.h>
#include <corridorkey/checkpoint.h>
#include <corridorkey/errors.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace corridorkey::cli {
namespace {
double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

/// --roofline under a row: each stage's nominal GFLOP, time, rate and share of the GEMM rate.
void print_roofline(const BenchRow& r) {
  if (r.roofline.empty()) return;
  std::printf("%-30s roofline against a %s GEMM of 2048: %.1f GFLOP/s (%s)\n", "", r.gemm.precision.c_str(),
              r.gemm.gflops, r.gemm.cached ? "cached, or timed for an earlier row" : "timed now");
  std::printf("%-30s   %-22s %10s %10s %10s %8s\n", "", "stage", "GFLOP", "ms", "GFLOP/s", "of GEMM");
  for (const auto& s : r.roofline) {
    // The encoder's parts sit under it, indented; attention's exponentials beside them.
    const std::string name = (s.part_of.empty() ? "" : "  ") + s.stage;
    std::printf("%-30s   %-22s %10.1f %10.1f %10.1f %7.0f%%", "", name.c_str(), s.gflop, s.ms, s.gflops,
                100 * s.of_gemm);
    if (s.exp_g > 0) std::printf("   %.3f G exp", s.exp_g);
    std::printf("\n");
  }
  if (!r.notes.empty()) std::printf("%-30s %s\n", "", r.notes.c_str());
}

void print_flop_counts(const FlopCounts& c, int64_t img_size, bool json) {
  if (json) {
    std::cout << nlohmann::json{{"img_size", img_size}, {"encoder_linear", c.encoder_linear},
                                {"encoder_attention", c.encoder_attention},
                                {"global_attention", c.global_attention},
                                {"windowed_attention", c.windowed_attention},
                                {"exp_g", (c.global_scores + c.windowed_scores) / 1e9},
                                {"encoder_stages", {c.stages[0], c.stages[1], c.stages[2], c.stages[3]}},
                                {"decoders", c.decoders}, {"refiner", c.refiner}, {"total", c.total}}
                     .dump()
              << std::endl;
    return;
  }
  std::printf("nominal GFLOP of one frame at %lld: encoder %.2f (linear %.2f, attention %.2f: global %.2f, "
              "windowed %.2f; stages %.2f / %.2f / %.2f / %.2f), decoders %.2f, refiner %.2f, total %.2f\n",
              static_cast<long long>(img_size), (c.encoder_linear + c.encoder_attention) / 1e9, c.encoder_linear / 1e9,
              c.encoder_attention / 1e9, c.global_attention / 1e9, c.windowed_attention / 1e9, c.stages[0] / 1e9, c.stages[1] / 1e9, c.stages[2] / 1e9, c.stages[3] / 1e9,
              c.decoders / 1e9, c.refiner / 1e9, c.total / 1e9);
}

/// bench --load: each checkpoint's parse and engine times and memory, as a table or NDJSON.
void run_load(const BenchOptions& b, const std::vector<std::string>& files, bool mmap,
              const std::vector<std::string>& profiles, bool json) {
  LoadBenchOptions lo;
  lo.checkpoints = files;
  lo.repeats = b.frames;
  lo.mmap = mmap;
  if (!profiles.empty()) lo.profile = profiles.front();
  const auto rows = run_load_bench(lo);
  if (!json)
    std::printf("%-50s %-12s %10s %10s %11s %14s\n", "checkpoint", "format", "file_MiB",
                "parse_ms", "engine_ms", "engine_rss_MiB");
  for (const auto& r : rows) {
    if (json)
      std::cout << nlohmann::json{{"checkpoint", r.checkpoint}, {"format", r.format},
                                  {"file_bytes", r.file_bytes}, {"parse_ms", r.parse_ms},
                                  {"engine_ms", r.engine_ms}, {"engine_rss_growth", r.engine_rss_growth},
                                  {"profile", lo.profile}, {"mmap", lo.mmap}, {"repeats", lo.repeats}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << std::endl;
    else
      std::printf("%-50s %-12s %10.1f %10.1f %11.1f %14.1f\n", r.checkpoint.c_str(), r.format.c_str(),
                  mib(r.file_bytes), r.parse_ms, r.engine_ms, mib(r.engine_rss_growth));
  }
}

/// bench --pipeline's result: one JSON object, or the wall time, rate and stages in words.
void print_pipeline(const BenchOptions& b, const std::string& clip_size, bool json) {
  const auto r = run_pipeline_bench(b);
  if (json) {
    const auto& t = r.stage_sums;
    std::cout << nlohmann::json{{"frames", r.frames}, {"wall_ms", r.wall_ms}, {"fps", r.fps},
                                {"read_ms", t.read_ms}, {"preprocess_ms", t.preprocess_ms},
                                {"infer_ms", t.infer_ms}, {"postprocess_ms", t.postprocess_ms},
                                {"write_ms", t.write_ms}, {"wall_over_infer", r.wall_over_infer},
                                {"infer_wait_ms", r.infer_wait_ms}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
  } else {
    const double n = std::max(1, r.frames);
    std::printf("pipeline: %d frames %s, profile %s, img_size %lld\n", r.frames, clip_size.c_str(),
                b.profiles.front().c_str(), static_cast<long long>(b.img_size));
    std::printf("wall %.1f s, %.3f frames/s; wall / summed inference = %.3f; inference idle "
                "(waiting on readers or writers) %.0f%% of the wall time\n",
                r.wall_ms / 1000, r.fps, r.wall_over_infer, 100.0 * r.infer_wait_ms / std::max(r.wall_ms, 1e-9));
    std::printf("per frame (stages overlap): read %.0f ms, preprocess %.0f ms, infer %.0f ms, "
                "postprocess %.0f ms, write %.0f ms\n",
                r.stage_sums.read_ms / n, r.stage_sums.preprocess_ms / n, r.stage_sums.infer_ms / n,
                r.stage_sums.postprocess_ms / n, r.stage_sums.write_ms / n);
  }
}

/// One bench row as NDJSON: the times, memory, drift, what ran and, with --roofline, the rates.
nlohmann::json row_json(const BenchRow& r) {
  if (!r.not_installed.empty())
    return {{"profile", r.profile}, {"precision", r.precision}, {"device", r.info.device},
            {"not_installed", r.not_installed}};
  nlohmann::json j{{"profile", r.profile}, {"precision", r.precision},
                   {"device", r.info.device}, {"img_size", r.info.img_size},
                   {"backbone_size", r.info.backbone_size ? r.info.backbone_size : r.info.img_size},
                   {"compile", r.info.compile_mode_effective},
                   {"median_ms", r.median_ms}, {"min_ms", r.min_ms}, {"max_ms", r.max_ms},
                   {"encoder_ms", r.median_stages.encoder_ms},
                   {"decoders_ms", r.median_stages.decoders_ms},
                   {"refiner_ms", r.median_stages.refiner_ms},
                   {"host_peak_allocated", r.peak.host_peak_allocated},
                   {"host_peak_rss_growth", r.peak.host_peak_rss_growth},
                   {"encoder_peak", r.peak.encoder_peak},
                   {"decoders_peak", r.peak.decoders_peak},
                   {"refiner_peak", r.peak.refiner_peak},
                   {"device_peak_allocated", r.peak.device_peak_allocated},
                   {"device_peak_reserved", r.peak.device_peak_reserved},
                   {"alpha_max_diff", r.alpha_max_diff}, {"fg_max_diff", r.fg_max_diff},
                   {"ratio", r.ratio}, {"process_peak_rss", r.process_peak_rss},
                   {"setup_ms", r.setup_ms},
                   {"routed_stage2", r.routed_stage2}, {"routed_stage3", r.routed_stage3},
                   {"attention", r.info.attention}, {"refiner", r.info.refiner},
                   {"tune_origin", to_string(r.info.tune.origin)}};
  for (const auto& d : r.info.tune.decisions)
    j["tune"][to_string(d.option)] = {{"value", to_string(d.value)}, {"source", to_string(d.source)}, {"why", d.why}};
  for (const auto& op : r.top_ops)
    j["top_ops"].push_back({{"name", op.name}, {"self_ms", op.self_ms}, {"calls", op.calls}});
  if (!r.roofline.empty()) {
    j["gemm"] = {{"gflops", r.gemm.gflops}, {"precision", r.gemm.precision}, {"cached", r.gemm.cached},
                 {"trial_ms", r.gemm.trial_ms}};
    j["notes"] = r.notes;
    for (const auto& st : r.roofline)
      j["roofline"].push_back({{"stage", st.stage}, {"part_of", st.part_of}, {"gflop", st.gflop},
                               {"ms", st.ms}, {"gflops", st.gflops}, {"of_gemm", st.of_gemm},
                               {"exp_g", st.exp_g}});
  }
  return j;
}

/// One bench row in words: the table's line, then what ran and its peaks.
void print_row(const BenchRow& r) {
  if (!r.not_installed.empty()) {
    std::printf("%-30s not installed: Python package '%s' (scripts/setup.sh installs it into the venv)\n",
                r.profile.c_str(), r.not_installed.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("%-30s %-10s %-9s %10.1f %6.3f %9.1f %9.1f %9.1f %9.1f %9.1f %11.1f %11.1f %10.2e %10.2e\n",
              r.profile.c_str(), r.precision.c_str(), r.info.device.c_str(), r.median_ms,
              r.ratio, r.min_ms, r.max_ms, r.median_stages.encoder_ms, r.median_stages.decoders_ms,
              r.median_stages.refiner_ms, mib(r.peak.host_peak_allocated),
              mib(r.peak.host_peak_rss_growth), r.alpha_max_diff, r.fg_max_diff);
  const bool decoupled = r.info.backbone_size && r.info.backbone_size != r.info.img_size;
  if (!r.info.tune.decisions.empty()) {
    const auto* d = r.info.tune.find(TuneOption::ModelPrecision);
    const auto* lin = r.info.tune.find(TuneOption::OnednnLinear);  // float32 CPU runs only
    const auto* wc = r.info.tune.find(TuneOption::WinogradConv);  // float32 CPU runs only
    const std::string linear =
        (lin ? std::string(", linear ") + (lin->value == TuneChoice::True ? "oneDNN" : "MKL") + " (" + to_string(lin->source) + ")"
             : std::string()) +
        (wc ? std::string(", refiner convs ") + (wc->value == TuneChoice::True ? "Winograd" : "direct") + " (" +
                  to_string(wc->source) + ")"
            : std::string());
    // "refiner convs Winograd (plan)" above says it with its source: the refiner string's
    // own ", Winograd convolutions" would repeat it.
    std::string refiner = r.info.refiner;
    const std::string wino = ", Winograd convolutions";
    if (wc && refiner.size() > wino.size() && refiner.ends_with(wino)) refiner.resize(refiner.size() - wino.size());
    std::printf("%-30s ran: precision %s (%s), attention %s%s, refiner %s%s\n", "",
                r.precision.c_str(), d ? to_string(d->source) : "flag", r.info.attention.c_str(),
                linear.c_str(), refiner.c_str(),
                decoupled ? (", backbone " + std::to_string(r.info.backbone_size) + " (refiner " +
                             std::to_string(r.info.img_size) + ")").c_str()
                          : "");
  } else if (decoupled) {
    std::printf("%-30s ran: backbone %lld, refiner and outputs at %lld\n", "",
                static_cast<long long>(r.info.backbone_size), static_cast<long long>(r.info.img_size));
  }
  if (r.process_peak_rss)
    std::printf("%-30s PyTorch process peak RSS %.1f MiB, %s\n", "", mib(r.process_peak_rss),
                r.info.compile_mode_effective.c_str());
  if (r.setup_ms > 0)
    std::printf("%-30s converting / compiling once: %.1f ms, not in the frame times\n", "", r.setup_ms);
  if (r.peak.encoder_peak + r.peak.refiner_peak)
    std::printf("%-30s stage peaks: encoder %.1f MiB, decoders %.1f MiB, refiner %.1f MiB\n", "",
                mib(r.peak.encoder_peak), mib(r.peak.decoders_peak), mib(r.peak.refiner_peak));
  if (r.routed_stage2 < 1.0 || r.routed_stage3 < 1.0)
    std::printf("%-30s token routing: %.1f%% of stage-2 and %.1f%% of stage-3 tokens attended\n", "",
                100 * r.routed_stage2, 100 * r.routed_stage3);
  for (const auto& op : r.top_ops)
    std::printf("%-30s   %-44s %9.1f ms %5d calls\n", "", op.name.c_str(), op.self_ms, op.calls);
  if (r.peak.device_peak_reserved)
    std::printf("%-30s device peak allocated %.1f MiB, reserved %.1f MiB\n", "",
                mib(r.peak.device_peak_allocated), mib(r.peak.device_peak_reserved));
  print_roofline(r);
  std::fflush(stdout);
}

/// bench's flags, each held where the callback reads it.
struct BenchArgs {
  std::shared_ptr<BenchOptions> b = std::make_shared<BenchOptions>();
  std::shared_ptr<bool> random = std::make_shared<bool>(false), json = std::make_shared<bool>(false);
  std::shared_ptr<std::vector<std::string>> profiles = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::string> clip_size = std::make_shared<std::string>("3840x2160");
  std::shared_ptr<std::vector<std::string>> load = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::string> mmap = std::make_shared<std::string>("on");
  std::shared_ptr<bool> count_only = std::make_shared<bool>(false);
};

BenchArgs add_bench_flags(CLI::App* cmd) {
  BenchArgs a;
  auto& [b, random, json, profiles, clip_size, load, mmap, count_only] = a;
  non_empty_path(cmd->add_option("--checkpoint", b->checkpoint, ".safetensors, .pth or TorchScript file, or a folder"));
  cmd->add_flag("--random-weights", *random, "seeded random weights instead of a checkpoint");
  cmd->add_option("--arch", b->random_arch, "architecture for --random-weights (hiera_base_plus | small | tiny)")
      ->capture_default_str();
  b->random_arch = "hiera_base_plus";
  cmd->add_option("--img-size", b->img_size, "model resolution (multiple of 32)")->capture_default_str();
  non_empty_path(cmd->add_option("--profile", *profiles, "profile to run, NAME or NAME:field=value[,...], or a PyTorch eager row: reference, reference-5d, reference-fast, reference-upstream (needs --reference-dir), reference-openvino, reference-compile (these two in the plan's precision unless :precision=P) (repeat; the first row is the base of ratio and drift)"))
      ->take_all();
  non_empty_path(cmd->add_option("--reference-dir", b->reference_dir,
                                 "a CorridorKey checkout: adds the row reference-upstream (its own GreenFormer "
                                 "and forward, same weights and input) unless --profile lists it"));
  cmd->add_option("--frames", b->frames, "timed frames per profile")->capture_default_str();
  cmd->add_option("--warmup", b->warmup, "untimed frames first")->capture_default_str();
  cmd->add_option("--seed", b->seed, "input / weight seed")->capture_default_str();
  cmd->add_option("--device", b->device, "auto | cpu | cuda | cuda:N | mps")->capture_default_str();
  cmd->add_option_function<std::string>(
      "--precision", [b](const std::string& v) { b->overrides.emplace_back("model_precision", v); },
      "override model_precision in every profile");
  cmd->add_option_function<std::vector<std::string>>(
         "--set", [b](const std::vector<std::string>& kv) {
           for (const auto& s : kv) {
             const auto eq = s.find('=');
             b->overrides.emplace_back(s.substr(0, eq), eq == std::string::npos ? "" : s.substr(eq + 1));
           }
         },
         "field=value override for every profile (repeatable), e.g. --set tiled_refiner=false");
  cmd->add_option("--hint-band-area", b->hint_band_area,
                  "fraction of the frame the seeded hint's uncertain band covers (0 = ~15%)");
  cmd->add_flag("--refiner-only", b->refiner_only,
                "time the refiner stage alone: untiled vs exact tiled (tile_size of the first profile)");
  cmd->add_flag("--pipeline", b->pipeline,
                "end to end: generate an EXR clip (--clip-frames of --clip-size) and key it with the first profile");
  cmd->add_option("--clip-frames", b->pipeline_frames, "frames of the --pipeline clip")->capture_default_str();
  cmd->add_option("--clip-size", *clip_size, "WxH of the --pipeline clip")->capture_default_str();
  cmd->add_option("--read-workers", b->read_workers, "--pipeline reader threads")->capture_default_str();
  cmd->add_option("--write-workers", b->write_workers, "--pipeline writer threads")->capture_default_str();
  cmd->add_option("--ops", b->top_ops,
                  "profile the last frame of each profile: its N slowest LibTorch operators "
                  "(self time; shows e.g. that convolutions run through oneDNN)");
  non_empty_path(cmd->add_option("--load", *load,
                                 "time checkpoint loading instead: each file (or folder), interleaved --frames "
                                 "times: parse to tensors, then a whole engine of the first --profile (default "
                                 "original) with its peak RSS growth"))
      ->take_all();
  cmd->add_option("--mmap", *mmap, "--load: safetensors mapped (on) or read (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--roofline", b->roofline,
                "each row's encoder, decoders, refiner and frame: nominal GFLOP (from the shapes), time, "
                "GFLOP/s and its share of this machine's GEMM rate in the row's precision (timed once, cached)");
  cmd->add_flag("--count-only", *count_only,
                "with --roofline: print the nominal FLOPs of one frame of the model at --img-size and time nothing");
  cmd->add_flag("--json", *json, "one JSON object per profile (NDJSON)");
  return a;
}

/// One bench run as the flags ask: --load, --roofline --count-only, --pipeline, or the
/// profiles' rows. Returns the exit code.
int run_bench_command(const BenchArgs& a) {
  const auto& [b, random, json, profiles, clip_size, load, mmap, count_only] = a;
  if (!load->empty()) {
    run_load(*b, *load, *mmap == "on", *profiles, *json);
    return kOk;
  }
  if (!*random) b->random_arch.clear();
  if (!profiles->empty()) b->profiles = *profiles;
  if (*count_only) {
    CK_CHECK(b->roofline, ConfigError, "bench: --count-only goes with --roofline");
    print_flop_counts(bench_flop_counts(*b), b->img_size, *json);
    return kOk;
  }
  if (!b->reference_dir.empty() &&
      std::find(b->profiles.begin(), b->profiles.end(), "reference-upstream") == b->profiles.end())
    b->profiles.push_back("reference-upstream");
  if (b->pipeline) {
    if (std::sscanf(clip_size->c_str(), "%dx%d", &b->pipeline_width, &b->pipeline_height) != 2)
      throw ConfigError("--clip-size: invalid value '" + *clip_size + "' (expected WxH, e.g. 3840x2160)");
    print_pipeline(*b, *clip_size, *json);
    return kOk;
  }
  if (!*json)
    std::printf("%-30s %-10s %-9s %10s %6s %9s %9s %9s %9s %9s %11s %11s %10s %10s\n", "profile",
                "precision", "device", "median_ms", "ratio", "min_ms", "max_ms", "enc_ms", "dec_ms",
                "ref_ms", "host_MiB", "rss_MiB", "alpha_diff", "fg_diff");
  run_bench(*b, [&](const BenchRow& r) {
    if (*json) {
      std::cout << row_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      print_row(r);
    }
  });
  return kOk;
}

}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "bench", "Time profiles side by side on one seeded input: latency, peak memory, drift");
  const BenchArgs args = add_bench_flags(cmd);
  cmd->callback([args, &exit_code] { exit_code = run_bench_command(args); });
}

}  // namespace corridorkey::cli
