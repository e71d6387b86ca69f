// Checkpoint verification: run the native GreenFormer on a seeded input and, for TorchScript
// archives, compare its outputs with the archive's own forward. That forward is the
// archive's TorchScript code: verify EXECUTES it (only use verify on archives you trust);
// everything else in the engine reads checkpoints as data.
//
// Thread-safety: verify_checkpoint loads its own model; any thread, concurrently.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <cstdint>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct VerifyOptions {
  std::string checkpoint;
  int64_t img_size = 0;          // 0 = the checkpoint's own size
  std::string device = "auto";
  uint64_t seed = 0;
  double tolerance = 1e-4;       // max abs diff allowed on final alpha / fg (fp32)
  bool flash_attention = false;  // run the native model with 4-D SDPA in global blocks
};

struct OutputDiff {
  std::string name;              // c1..c4, alpha_logits, ..., alpha, fg
  std::vector<int64_t> shape;
  bool compared = false;         // the archive returned this output (alpha / fg always; the
                                 // intermediates only from tools/export_torchscript.py's tuple)
  double max_abs_diff = 0;       // native vs reference
  double max_abs_ref = 0;        // scale of the reference output
};

struct VerifyReport {
  std::string checkpoint, format, arch, device;
  int64_t img_size = 0;
  int64_t parameters = 0;
  bool has_reference = false;    // TorchScript archive: its forward was run too
  std::vector<OutputDiff> diffs; // every output; diffs only where `compared`
  double alpha_mean = 0, fg_mean = 0;
  double native_ms = 0, reference_ms = 0;
  bool passed = false;           // final alpha/fg within tolerance (or no reference)
};

/// Throws IoError / ModelError / ConfigError / DeviceError with the file and problem named.
CORRIDORKEY_API VerifyReport verify_checkpoint(const VerifyOptions& options);

CORRIDORKEY_NAMESPACE_END
