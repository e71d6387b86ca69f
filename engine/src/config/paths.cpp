// Where bundled data lives: the source tree (build tree runs) or the install prefix.
#include <corridorkey/engine.h>

#include <cstdlib>
#include <filesystem>

#ifndef CK_SOURCE_CHECKPOINT_DIR
#define CK_SOURCE_CHECKPOINT_DIR ""
#endif
#ifndef CK_INSTALL_CHECKPOINT_DIR
#define CK_INSTALL_CHECKPOINT_DIR ""
#endif

CORRIDORKEY_NAMESPACE_BEGIN

namespace {
// Trained on procedural green-screen data by tools/train_tiny.py (checkpoints/README.md).
constexpr const char* kDefaultCheckpoint = "greenformer_small_synthetic384.ts";
}  // namespace

std::string default_checkpoint() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("CORRIDORKEY_CHECKPOINT"); env && *env) return env;
  for (const char* d : {CK_SOURCE_CHECKPOINT_DIR, CK_INSTALL_CHECKPOINT_DIR})
    if (*d && fs::exists(fs::path(d) / kDefaultCheckpoint))
      return (fs::path(d) / kDefaultCheckpoint).string();
  return (fs::path(CK_SOURCE_CHECKPOINT_DIR) / kDefaultCheckpoint).string();
}

CORRIDORKEY_NAMESPACE_END
