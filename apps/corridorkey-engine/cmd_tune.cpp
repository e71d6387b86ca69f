// `corridorkey-engine tune`: fill the measured plan's cache ahead of time (once per node
// type on a farm), or print what a profile resolves to on this machine and on which times.
#include "commands.h"
#include "option_args.h"

#include <corridorkey/engine.h>
#include <corridorkey/check.h>
#include <corridorkey/tune.h>

#include <cstdio>
#include <memory>

namespace corridorkey::cli {

void print_tune_plans(const char* prefix) {
  // Keys and reasons come from files (`tune --import`): printed through printable_text, so
  // that none sets the terminal's title or starts a line of its own.
  for (const auto& [key, summary] : tune_cache_entries()) {
    std::printf("%s%s\n", prefix, printable_text(key).c_str());
    size_t start = 0;
    for (size_t nl; (nl = summary.find('\n', start)) != std::string::npos; start = nl + 1)
      std::printf("%s  %s\n", prefix, printable_text(summary.substr(start, nl - start)).c_str());
    if (start < summary.size())  // an entry saying the cache is not usable has no newline
      std::printf("%s  %s\n", prefix, printable_text(summary.substr(start)).c_str());
  }
}

void add_tune(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "tune", "Time precision, attention kernel and refiner tiling on this machine for a profile "
              "and model size, and cache the plan (CORRIDORKEY_TUNE_CACHE or ~/.cache)");
  auto args = add_engine_flags(cmd, "optimized", /*run_fields=*/true);
  auto refresh = std::make_shared<bool>(false);
  cmd->add_flag("--refresh", *refresh, "time again even when the plan is cached (same as --tune refresh)");
  auto export_to = std::make_shared<std::string>(), import_from = std::make_shared<std::string>();
  non_empty_path(cmd->add_option("--export", *export_to,
                                 "copy every cached plan into FILE (a .json file or a folder) and time nothing: "
                                 "plans move between caches keyed by CPU identity, threads and configuration"));
  non_empty_path(cmd->add_option("--import", *import_from,
                                 "copy every plan of FILE (a cache file or folder) into this cache and time nothing"));
  cmd->callback([args, refresh, export_to, import_from, &exit_code] {
    auto o = args->options();
    if (!export_to->empty() || !import_from->empty()) {
      CK_CHECK(export_to->empty() || import_from->empty(), ConfigError,
               "tune: --export and --import are one at a time");
      const std::string cache = o.model.tune_cache.empty() ? tune_cache_path() : o.model.tune_cache;
      const bool out = !export_to->empty();
      const int n = out ? copy_tune_plans(cache, *export_to) : copy_tune_plans(*import_from, cache);
      std::printf("%d plan(s) copied from %s to %s\n", n, (out ? cache : *import_from).c_str(),
                  (out ? *export_to : cache).c_str());
      exit_code = kOk;
      return;
    }
    if (*refresh) o.model.tune = TuneMode::Refresh;
    if (o.model.tune == TuneMode::Off) o.model.tune = TuneMode::Auto;  // `tune` means: use the plan
    auto engine = create_engine(o.model, o.engine);
    const auto& i = engine->info();
    const auto& p = i.tune;
    std::printf("profile %s, %s, img_size %lld%s, %s\n", i.profile.c_str(), i.arch.c_str(),
                static_cast<long long>(i.img_size),
                i.backbone_size != i.img_size
                    ? (" (backbone " + std::to_string(i.backbone_size) + ")").c_str()
                    : "",
                i.device.c_str());
    const char* origin = p.origin == PlanOrigin::Cache    ? "read from the cache"
                         : p.origin == PlanOrigin::Trials ? "timed now"
                         : p.origin == PlanOrigin::Memory ? "timed now, kept in memory (cache not writable)"
                                                : "flag rules";
    std::printf("plan: %s", origin);
    if (p.trial_ms > 0) std::printf(" (trials took %.0f ms)", p.trial_ms);
    std::printf("\n");
    std::printf("cache: %s\nkey: %s\n", p.cache_path.empty() ? "none (no cache folder)" : p.cache_path.c_str(),
                printable_text(p.key).c_str());
    std::printf("%s", p.summary().c_str());
    const auto* lin = p.find(TuneOption::OnednnLinear);  // float32 CPU runs only
    const auto* wc = p.find(TuneOption::WinogradConv);  // float32 CPU runs only
    std::printf("runs: precision %s, attention %s%s, refiner %s%s\n", i.precision.c_str(),
                i.attention.c_str(),
                lin ? (lin->value == TuneChoice::True ? ", Linear layers through oneDNN" : ", Linear layers through MKL") : "",
                i.refiner.c_str(),
                // The refiner string already ends in ", Winograd convolutions" where they run.
                wc && wc->value != TuneChoice::True ? ", convolutions direct (oneDNN)" : "");
    exit_code = kOk;
  });
}

}  // namespace corridorkey::cli
