// `corridorkey-engine serve`: the keyer as a process that host applications talk to
// (JSON-RPC 2.0 over stdin/stdout, a Unix socket or loopback TCP; serve/server.h).
#include "commands.h"
#include "option_args.h"
#include "serve/server.h"
#include "stop_signals.h"

#include <atomic>
#include <csignal>
#include <memory>

namespace corridorkey::cli {
namespace {
std::atomic<bool> g_stop{false};
}  // namespace

void add_serve(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "serve", "Serve host applications: JSON-RPC 2.0, one object per line, on stdin/stdout "
               "(--stdio), a Unix socket or loopback TCP (docs/embedding.md, \"corridorkey-engine serve\")");
  auto args = add_engine_flags(cmd, "optimized", /*run_fields=*/true);
  struct Flags {
    bool stdio = false;
    std::string listen, token_file;
    int max_request_mb = 16, queue_limit = 16;
    int64_t cache_mb = 1024;
  };
  auto f = std::make_shared<Flags>();
  auto* stdio = cmd->add_flag("--stdio", f->stdio, "requests on stdin, replies on stdout (the default)");
  non_empty_path(cmd->add_option("--listen", f->listen, "unix:PATH (a socket, mode 0600) or tcp:127.0.0.1:PORT "
                                                        "(loopback only, needs --token-file)"))
      ->excludes(stdio);
  non_empty_path(cmd->add_option("--token-file", f->token_file,
                                 "tcp: the token clients must send in server.auth is written here (mode 0600)"));
  cmd->add_option("--max-request-mb", f->max_request_mb, "longest request line, MiB")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_option("--cache-mb", f->cache_mb, "raw model outputs kept for frame.repost (LRU), MiB")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--queue-limit", f->queue_limit, "requests waiting per model; more get a busy error")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->callback([args, f, &exit_code] {
    serve::ServeConfig c;
    c.listen = f->listen.empty() ? "stdio" : f->listen;
    c.token_file = f->token_file;
    c.max_request_bytes = static_cast<std::size_t>(f->max_request_mb) << 20;
    c.cache_mb = f->cache_mb;
    c.queue_limit = f->queue_limit;
    c.base = args->options();
    cancel_on_signal(&g_stop);  // the first signal stops the server cleanly, a second at once
    exit_code = serve::run_server(c, g_stop);
  });
}

}  // namespace corridorkey::cli
