// What the two translation units of the Python module share: the objects Python holds and
// how option values and errors cross the boundary. Only the engine's public API (no
// LibTorch): the module links libcorridorkey_engine.so as any other host does.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/model.h>
#include <corridorkey/options.h>

#include <nanobind/nanobind.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace corridorkey::python {

namespace nb = nanobind;

/// corridorkey.Model: the loaded weights, and the profile with the overrides they were
/// loaded with: its `engine` half is what Model.engine() starts from.
struct PyModel {
  std::shared_ptr<const Model> model;
  Profile options;
};

/// corridorkey.Engine: an engine on a Model. Calls on one engine are serialised (the engine
/// is not re-entrant); engines of one Model key concurrently.
struct PyEngine {
  std::unique_ptr<BaseEngine> engine;
  std::mutex busy;
};

/// A Python value as the CLI writes it: True/False as true/false, a path (str, bytes,
/// os.PathLike) as os.fsencode's bytes (a str too: the text of output_root= is a path), a
/// list or tuple of those joined by commas (outputs=("matte", "comp")), anything else as
/// str(). ConfigError naming `key` for nested lists and dicts.
std::string option_text(nb::handle value, const std::string& key);

/// A path argument (str, bytes or os.PathLike) as the bytes os.fsencode gives (a str is
/// encoded with the filesystem encoding and surrogateescape, so os.fsdecode's str of a
/// non-UTF-8 name reaches the filesystem as the same bytes); ConfigError naming `what` for
/// anything else, a str that cannot be encoded or a path with a NUL in it.
std::string path_text(nb::handle value, const std::string& what);

/// A str argument (a keyword's name, an option's text) as os.fsencode encodes it, so a str
/// that os.fsdecode made from a name's bytes gives those bytes back; ConfigError naming
/// `what` when it cannot be encoded (a lone surrogate outside surrogateescape's range).
std::string str_text(nb::handle str, const std::string& what);

/// A path the library gives back (a checkpoint, a clip, a file) as Python shows file
/// names: os.fsdecode of its bytes, so os.fsencode of the str gives the same bytes back.
nb::str path_str(const std::string& path);

/// Text the library gives back (messages, warnings, notes, log lines) as UTF-8, bytes that
/// are not UTF-8 (a non-UTF-8 file name inside a message) shown as \xNN: the str always
/// prints, where a lone surrogate would make print() raise.
nb::str text_str(const std::string& text);
nb::list text_list(const std::vector<std::string>& texts);
/// json.loads(text) for JSON text from report_json.h: names keep their bytes as os.fsdecode's
/// surrogate escapes.
nb::object json_value(const std::string& text);

/// Sets `key` of `options` from a keyword argument (the CLI's keys and units: despill 0-10),
/// ConfigError naming `source` and the key when it is not an option or the value is refused.
void set_option(Profile& options, const std::string& key, nb::handle value, const std::string& source);
void set_option(EngineSettings& options, const std::string& key, nb::handle value, const std::string& source);

/// The interpreter is shutting down (a thread must not take the GIL any more).
bool finalizing();

/// Log lines the library queued (module.cpp), to the Python handler; with the GIL held.
void deliver_log_lines() noexcept;

/// Engine work in flight, for the exit hook (module.cpp) to wait for. Throws when the
/// interpreter is shutting down (no new work then).
class Busy {
 public:
  Busy();
  ~Busy();
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
  /// Counted off now (a job's worker, when it ends); the destructor then does nothing.
  void done();

 private:
  bool done_ = false;  // under the count's mutex
};

/// A running job's cancel flag, set by the exit hook.
class JobCancel {
 public:
  explicit JobCancel(std::atomic<bool>* flag);
  ~JobCancel();
  JobCancel(const JobCancel&) = delete;
  JobCancel& operator=(const JobCancel&) = delete;

 private:
  std::atomic<bool>* flag_;
};

/// The exit hook has run: no new work, and no thread takes the GIL back.
bool closing();

/// The GIL released for a scope of engine work. Taken back at its end, unless the
/// interpreter is shutting down, in which case the thread waits for the process to end (a
/// daemon thread taking the GIL then is ended by CPython in a way C++ frames do not survive).
class Unlocked {
 public:
  Unlocked();
  ~Unlocked();
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

 private:
  PyThreadState* state_;
};

/// Registers process_frame on corridorkey.Engine (frames.cpp).
void bind_frames(nb::class_<PyEngine>& engine);

}  // namespace corridorkey::python
