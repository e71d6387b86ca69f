// Typed exceptions thrown by every layer of CorridorKey Engine.
//
// All derive from corridorkey::Error (itself a std::runtime_error), so a host can catch
// one type. Messages name the file, key or value at fault and what was expected.
// The library never aborts the host process: LibTorch's c10::Error is caught at the
// engine boundary and rethrown as one of these with context.
//
// Thread-safety: exceptions are thrown on the thread that made the failing call (the clip
// pipeline reports its threads' failures as events and from run_inference's thread).
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/version.h>

#include <stdexcept>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

class CORRIDORKEY_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Invalid options, profile or job files: unknown key, wrong type, out-of-range value.
class CORRIDORKEY_API ConfigError : public Error {
 public:
  using Error::Error;
};

/// Files that cannot be found, read, decoded or written.
class CORRIDORKEY_API IoError : public Error {
 public:
  using Error::Error;
};

/// Checkpoints that are not checkpoints, are truncated, or do not match the architecture;
/// failures inside the network.
class CORRIDORKEY_API ModelError : public Error {
 public:
  using Error::Error;
};

/// A requested device that does not exist or cannot run the model.
class CORRIDORKEY_API DeviceError : public Error {
 public:
  using Error::Error;
};

CORRIDORKEY_NAMESPACE_END
