// `corridorkey-engine review`: a local web page to inspect, compare, tweak and launch keys
// (review/review_server.h, docs/review.md).
#include "commands.h"
#include "option_args.h"
#include "review/review_server.h"
#include "stop_signals.h"

#include <atomic>
#include <climits>
#include <memory>
#include <unistd.h>

namespace corridorkey::cli {
namespace {
std::atomic<bool> g_stop{false};

/// This binary's path, for the command lines the page shows.
std::string self_path() {
  char b[PATH_MAX];
  const auto n = ::readlink("/proc/self/exe", b, sizeof b - 1);
  return n > 0 ? std::string(b, static_cast<size_t>(n)) : "corridorkey-engine";
}
}  // namespace

void add_review(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "review", "A local web page to inspect, compare, tweak and launch keys; prints its URL "
                "(docs/review.md)");
  auto args = add_engine_flags(cmd, "optimized", /*run_fields=*/true);
  auto c = std::make_shared<review::ReviewConfig>();
  auto cache_mb = std::make_shared<int64_t>(1024);
  non_empty_path(cmd->add_option("paths", c->roots, "clip folder(s) or folder(s) of clips, as inference takes them"))->required();
  cmd->add_option("--listen", c->listen, "tcp:127.0.0.1:PORT or tcp:[::1]:PORT (loopback only; port 0 "
                                         "picks a free one)")
      ->capture_default_str();
  non_empty_path(cmd->add_option("--output-root", c->output_root,
                                 "the outputs are in DIR/<clip>/ (inference --output-root), not <clip>/Output/"));
  non_empty_path(cmd->add_option("--compare-root", c->compare_root,
                                 "side B: another output root (DIR/<clip>/), for the wipe, |A - B| and the mattes' MSE"));
  cmd->add_option("--input-colorspace", c->input_colorspace,
                  "plates of clips without run.json: their colour space (as inference; default srgb, or auto)");
  non_empty_path(cmd->add_option("--ocio-config", c->ocio_config, "OCIO config for its displays and views (default $OCIO)"));
  cmd->add_option("--cache-mb", *cache_mb, "decoded frames and previews kept in memory (LRU), MiB")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))->capture_default_str();
  cmd->callback([args, c, cache_mb, &exit_code] {
    c->options = args->options();
    c->engine_for = [args](const std::string& profile) {
      OptionArgs a = *args;
      a.profile = profile;
      return a.options();
    };
    c->cache_mb = *cache_mb;
    c->cli = self_path();
    cancel_on_signal(&g_stop);  // the first signal stops the server cleanly, a second at once
    exit_code = review::run_review(*c, g_stop);
  });
}

}  // namespace corridorkey::cli
