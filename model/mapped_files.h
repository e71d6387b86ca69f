// The files mapped into memory (safetensors checkpoints with mmap: true), and an opt-in
// SIGBUS guard that names them. A mapped file that is truncated or replaced in place while
// in use makes the next read of a vanished page raise SIGBUS: a crash signal (exit 135)
// where a user needs "this file changed under the run". The guard turns a fault inside a
// registered mapping into that message on stderr and exit status 4, and passes every other
// SIGBUS to the handler installed before it. It is never installed by the library itself:
// the CLI installs it, a host may (corridorkey/checkpoint.h).
#pragma once

#include <cstddef>
#include <string>

namespace corridorkey::model {

/// Records [data, data + size) as a mapping of `path` until unregister_mapped_file(slot),
/// with the file's identity and state (device, inode, size, modification time)
/// from `fd`, the descriptor it was mapped from. Returns the slot, or -1 when the fixed table
/// (64 mappings) is full: that mapping is then not named on a fault nor checked by
/// changed_mapped_file(). Thread-safe.
int register_mapped_file(const void* data, std::size_t size, const std::string& path, int fd);
void unregister_mapped_file(int slot);

/// The path of the registered mapping holding `addr`, or nullptr. Async-signal-safe.
const char* mapped_file_at(const void* addr);

/// The path of a registered mapping whose file was written in place since it was mapped (the
/// same inode with another size or modification time), or "" when none was. Written
/// in place, a file's new bytes show through a mapping's pages not yet copied, so the
/// weights may have changed under the run without any fault; a file replaced by rename (a
/// new inode) is not a change to the mapping, which keeps the old one. One stat() per
/// mapping: cheap enough to call once a frame. Thread-safe.
std::string changed_mapped_file();

/// Installs the SIGBUS guard once per process (later calls do nothing). Thread-safe.
void install_mapped_file_guard();

}  // namespace corridorkey::model
