// Checkpoint files as files: converting any loadable checkpoint to safetensors. Reading
// checkpoints for keying is the engine's job (engine.h); nothing here runs code from a file.
//
// Thread-safety: convert_checkpoint may run from any thread; two converts writing the same
// output path at once leave one of the two complete files.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <cstdint>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct ConvertReport {
  std::string input;         // the file read (the one chosen when the input is a folder)
  std::string input_format;  // "torch.save" | "torchscript" | "safetensors"
  std::string output, arch;
  int64_t img_size = 0;      // the checkpoint's own model size (pos_embed grid)
  int64_t tensors = 0;
  uint64_t bytes = 0;        // tensor data written
  std::vector<std::string> ignored;  // entries of the input that are not weights (optimizer, ...)
};

/// Reads `input` (.pth zip or legacy, TorchScript archive as data, safetensors; a file or a
/// folder as --checkpoint takes), checks that it loads into its GreenFormer, and writes it
/// to `output` as safetensors: every weight in its stored dtype under its key ("_orig_mod."
/// removed, num_batches_tracked dropped), the architecture as JSON under the __metadata__
/// key "corridorkey_config". The file is written to a temporary name and renamed, then
/// read back and compared tensor by tensor (bit-identical, or IoError). ConfigError when
/// `output` is the input itself or a folder; IoError / ModelError naming the file otherwise.
CORRIDORKEY_API ConvertReport convert_checkpoint(const std::string& input, const std::string& output);

/// Opt-in, for processes that key with mapped safetensors checkpoints (mmap: true, the
/// default): installs a SIGBUS handler that turns a fault inside a mapped checkpoint (the
/// file truncated or rewritten in place while in use) into a line on stderr naming the file
/// and exit status 4 (_exit: outputs already renamed into place stay whole; a later run
/// removes the temporary files of frames in flight). A SIGBUS anywhere else goes to the
/// handler installed before this one, or takes the default action. The library never
/// installs it by itself; `corridorkey-engine` does at start-up. A host that cannot have the
/// process end this way should read checkpoints instead (mmap: false). Call once, from any
/// thread; later calls do nothing.
CORRIDORKEY_API void install_mapped_checkpoint_guard();

CORRIDORKEY_NAMESPACE_END
