// Input files named by a flag or a job key (an OCIO config, a profile or job YAML, a
// checkpoint) are checked to be regular files before anything opens them: open() on a FIFO
// blocks until a writer comes, and a device or a folder where a file is expected reads
// forever or fails with a message that names nothing. Torch-free.
#pragma once

#include <string>

namespace corridorkey::config {

/// "" when `path` is a regular file (links followed) or does not exist (the caller's own
/// error says so); else what it is: "is a FIFO (named pipe), not a file", "is a folder, not
/// a file", "is a device, not a file", "is a socket, not a file".
std::string not_a_regular_file(const std::string& path);

/// ConfigError "<what> <path>: is a FIFO (named pipe), not a file" (exit 2) when the path
/// exists and is not a regular file.
void check_input_file(const std::string& path, const std::string& what);

}  // namespace corridorkey::config
