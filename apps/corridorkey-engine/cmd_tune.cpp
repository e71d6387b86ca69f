// `corridorkey-engine tune`: fill the measured plan's cache ahead of time (once per node
// type on a farm), or print what a profile resolves to on this machine and on which times.
#include "commands.h"
#include "option_args.h"

#include <corridorkey/engine.h>
#include <corridorkey/tune.h>

#include <cstdio>
#include <memory>

namespace corridorkey::cli {

void add_tune(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "tune", "Time precision, attention kernel and refiner tiling on this machine for a profile "
              "and model size, and cache the plan (CORRIDORKEY_TUNE_CACHE or ~/.cache)");
  auto args = add_engine_flags(cmd, "optimized", /*run_fields=*/true);
  auto refresh = std::make_shared<bool>(false);
  cmd->add_flag("--refresh", *refresh, "time again even when the plan is cached (same as --tune refresh)");
  cmd->callback([args, refresh, &exit_code] {
    auto o = args->engine();
    if (*refresh) o.tune = TuneMode::Refresh;
    if (o.tune == TuneMode::Off) o.tune = TuneMode::Auto;  // `tune` means: use the plan
    auto engine = create_engine(o);
    const auto& i = engine->info();
    const auto& p = i.tune;
    std::printf("profile %s, %s, img_size %lld, %s\n", i.profile.c_str(), i.arch.c_str(),
                static_cast<long long>(i.img_size), i.device.c_str());
    std::printf("plan: %s%s\n", p.origin == "cache" ? "read from the cache" : p.origin == "trials" ? "timed now" : p.origin == "memory" ? "timed now, kept in memory (cache not writable)" : "flag rules",
                p.trial_ms > 0 ? (" (trials took " + std::to_string(static_cast<long long>(p.trial_ms + 0.5)) + " ms)").c_str() : "");
    std::printf("cache: %s\nkey: %s\n", p.cache_path.c_str(), p.key.c_str());
    std::printf("%s", p.summary().c_str());
    std::printf("runs: precision %s, attention %s, refiner %s\n", i.precision.c_str(),
                i.attention.c_str(), i.refiner.c_str());
    exit_code = kOk;
  });
}

}  // namespace corridorkey::cli
