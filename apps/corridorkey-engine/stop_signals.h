// SIGINT and SIGTERM for the CLI (never in libcorridorkey_engine.so: hosts and the Python
// module keep their own handlers).
//
// A command starts with the default action: Ctrl-C or a scheduler's SIGTERM ends it at once,
// while it loads a model, times the plan or waits on a slow file (a FIFO given as
// --ocio-config once ignored both until SIGKILL). Nothing is being written then. Once a run
// writes frames, a command hands over its cancel flag: the first signal sets it (frames in
// flight finish and are written, nothing partial is left, exit 130); a second one ends the
// process at once (finished files stay whole; a later run removes its temporary files).
#pragma once

#include <atomic>

namespace corridorkey::cli {

/// From now on SIGINT / SIGTERM set `*flag` (which must outlive the process's use of it); a
/// second signal takes the default action.
void cancel_on_signal(std::atomic<bool>* flag);

/// Back to the default action (the run that polled the flag has ended).
void default_stop_signals();

}  // namespace corridorkey::cli
