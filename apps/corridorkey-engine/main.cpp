// corridorkey-engine: command-line front end of CorridorKey Engine.
#include "commands.h"

#include <corridorkey/checkpoint.h>
#include <corridorkey/errors.h>
#include <corridorkey/version.h>

#include <csignal>
#include <iostream>

int main(int argc, char** argv) {
  using namespace corridorkey;
  CLI::App app{"CorridorKey Engine: native neural green-screen keying (GreenFormer on LibTorch)",
               "corridorkey-engine"};
  app.set_version_flag("--version", std::string("corridorkey-engine ") + version_string());
  app.require_subcommand(1);
  // A file-size limit (ulimit -f) must fail the write with EFBIG, which names the file and
  // exits 3 with the partial file removed, not kill the process silently (SIGXFSZ, rc 153).
  std::signal(SIGXFSZ, SIG_IGN);
  // A closed stdout (`--json | head -1`) must stop the events, not kill the keying with 141:
  // the write fails with EPIPE instead, and event_stream.cpp reports it once.
  std::signal(SIGPIPE, SIG_IGN);
  // A mapped checkpoint truncated under the run: a message naming it and exit 4, not SIGBUS.
  install_mapped_checkpoint_guard();
  int exit_code = cli::kOk;
  cli::add_info(app, exit_code);
  cli::add_verify(app, exit_code);
  cli::add_profiles(app, exit_code);
  cli::add_bench(app, exit_code);
  cli::add_inference(app, exit_code);
  cli::add_job(app, exit_code);
  cli::add_convert(app, exit_code);
  cli::add_tune(app, exit_code);
  cli::add_serve(app, exit_code);
  cli::add_colorspaces(app, exit_code);
  cli::add_review(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : cli::kUsage;
  } catch (const ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kUsage;
  } catch (const IoError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kInput;
  } catch (const ModelError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kModel;
  } catch (const DeviceError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kModel;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return cli::kFailure;
  }
  return exit_code;
}
