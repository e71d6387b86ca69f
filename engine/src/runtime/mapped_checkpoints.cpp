// corridorkey/checkpoint.h's SIGBUS guard: the public face of model/mapped_files.h.
#include <corridorkey/checkpoint.h>

#include "model/mapped_files.h"

CORRIDORKEY_NAMESPACE_BEGIN

void install_mapped_checkpoint_guard() { model::install_mapped_file_guard(); }

CORRIDORKEY_NAMESPACE_END
