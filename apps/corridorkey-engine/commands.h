// Subcommands of corridorkey-engine. Each registers its CLI11 options and a callback.
#pragma once

#include <CLI/CLI.hpp>

namespace corridorkey::cli {

/// Process exit codes (documented in docs/cli.md "Exit codes").
enum Exit : int {
  kOk = 0,
  kFailure = 1,      // a check failed (e.g. verify parity out of tolerance)
  kUsage = 2,        // bad command line / options / profile
  kInput = 3,        // unreadable or invalid input files
  kModel = 4,        // checkpoint or device problem
  kPartial = 5,      // some frames failed (--on-error skip)
  kInterrupted = 130, // SIGINT / SIGTERM: frames in flight finished, nothing partial left
};

void add_info(CLI::App& app, int& exit_code);
void add_verify(CLI::App& app, int& exit_code);
void add_profiles(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_inference(CLI::App& app, int& exit_code);
void add_job(CLI::App& app, int& exit_code);
void add_convert(CLI::App& app, int& exit_code);
void add_tune(CLI::App& app, int& exit_code);
void add_serve(CLI::App& app, int& exit_code);
void add_colorspaces(CLI::App& app, int& exit_code);
void add_review(CLI::App& app, int& exit_code);
/// The cached measured plans, one key line then one line per decision, for `info` and
/// `profiles show`; `prefix` starts every line.
void print_tune_plans(const char* prefix);

}  // namespace corridorkey::cli
