// Writing a scheduler export (`job export -o FILE`): nothing half-written, nothing
// overwritten by mistake.
#pragma once

#include <string>

namespace corridorkey::cli {

/// Writes `text` to `out`, or to stdout when `out` is empty.
///  - A regular file (or a new one) is written to a temporary file in its folder, every
///    write and the close checked, then renamed over it: a full disk leaves the old file
///    (or none), never a short one.
///  - A device or pipe (/dev/stdout, a FIFO) is written in place, every write checked
///    (/dev/full fails with ENOSPC instead of reporting success).
///  - `out` naming the job file itself (`protect`, by inode) is refused: ConfigError.
/// Write failures are IoErrors naming the file and the reason. `executable`: mode +x.
void write_export(const std::string& out, const std::string& text, bool executable,
                  const std::string& protect);

}  // namespace corridorkey::cli
