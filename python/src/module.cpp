// corridorkey._corridorkey: the engine's public C++ API for Python (nanobind). Models,
// engines, clip jobs, the library's log lines and its typed errors. Frames: frames.cpp.
//
// The GIL is released around everything that runs the engine or touches files, so engines
// of one Model key concurrently from Python threads. Python is called back (log lines,
// job events) with the GIL taken again, from whichever thread the library uses.
#include "binding.h"

#include <corridorkey/errors.h>
#include <corridorkey/log.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/profile.h>
#include <corridorkey/report_json.h>
#include <corridorkey/system.h>
#include <corridorkey/version.h>

#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <system_error>
#include <typeinfo>
#include <set>
#include <stdexcept>
#include <mutex>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

namespace corridorkey::python {

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

namespace {

// The Python classes of the library's errors (module attributes Error, ConfigError, ...).
PyObject* g_error = nullptr;
PyObject* g_config_error = nullptr;
PyObject* g_io_error = nullptr;
PyObject* g_model_error = nullptr;
PyObject* g_device_error = nullptr;

/// Raises `type` with `message` (a C++ message: its bytes may hold a non-UTF-8 file name,
/// which PyErr_SetString would turn into a UnicodeDecodeError in place of the error).
void raise_text(PyObject* type, const std::string& message) noexcept {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (!text) return;  // MemoryError, set by the decoder
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

/// IoError for a failed system call (std::filesystem_error, std::system_error): errno set
/// as OSError's own are, when the code is one, and `filename` the path the call was given.
void raise_os_error(const std::system_error& e, const std::string& message,
                    const std::filesystem::path* path) noexcept {
  const auto& cat = e.code().category();
  const bool is_errno = cat == std::generic_category() || cat == std::system_category();
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (!text) return;
  PyObject* args = is_errno ? Py_BuildValue("(iN)", e.code().value(), text) : PyTuple_Pack(1, text);
  if (!is_errno) Py_DECREF(text);
  if (!args) return;
  PyObject* error = PyObject_Call(g_io_error, args, nullptr);
  Py_DECREF(args);
  if (!error) return;
  if (path && !path->empty()) {
    const std::string& p = path->native();
    PyObject* name = PyUnicode_DecodeFSDefaultAndSize(p.data(), static_cast<Py_ssize_t>(p.size()));
    if (name && PyObject_SetAttrString(error, "filename", name) != 0) PyErr_Clear();
    if (!name) PyErr_Clear();
    Py_XDECREF(name);
  }
  PyErr_SetObject(g_io_error, error);
  Py_DECREF(error);
}

/// The C++ name of the exception being handled ("std::out_of_range"), for messages.
std::string current_exception_type() {
#if defined(__GNUG__)
  if (const std::type_info* t = abi::__cxa_current_exception_type()) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(t->name(), nullptr, nullptr, &status), std::free);
    return status == 0 && name ? name.get() : t->name();
  }
#endif
  return "an unknown C++ exception";
}

/// Every C++ exception that leaves a call of the module, as one of its typed errors (nanobind
/// handles its own python_error and builtin exceptions before it asks translators). The
/// library's own map one to one. Nothing else should escape; when something does (an
/// exception of LibTorch, the standard library or nanobind that no layer wrapped), the host
/// still catches corridorkey.Error, with the C++ type named, rather than RuntimeError or
/// SystemError.
void translate_exception(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ConfigError& e) {
    raise_text(g_config_error, e.what());
  } catch (const IoError& e) {
    raise_text(g_io_error, e.what());
  } catch (const ModelError& e) {
    raise_text(g_model_error, e.what());
  } catch (const DeviceError& e) {
    raise_text(g_device_error, e.what());
  } catch (const Error& e) {
    raise_text(g_error, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    raise_os_error(e, e.what(), &e.path1());  // "filesystem error: cannot ...: <why> [path]"
  } catch (const std::system_error& e) {
    // A thread that could not start (std::thread), std::ios_base::failure, ...: what() is
    // only strerror's text, so the type says what failed.
    raise_os_error(e, current_exception_type() + ": " + e.what(), nullptr);
  } catch (const std::bad_alloc&) {
    // As the engine reports running out of memory while keying (ModelError, what to lower).
    raise_text(g_model_error, "out of host memory (std::bad_alloc): lower img_size, or free memory");
  } catch (const std::bad_cast&) {
    // nanobind's cast_error: a Python value this module could not convert to what it needs.
    raise_text(g_config_error, "a value of a type this call cannot take (" + current_exception_type() + ")");
  } catch (const std::invalid_argument& e) {  // a number the standard library could not parse
    raise_text(g_config_error, current_exception_type() + ": " + e.what());
  } catch (const std::out_of_range& e) {  // ... or that did not fit
    raise_text(g_config_error, current_exception_type() + ": " + e.what());
  } catch (const std::exception& e) {
    raise_text(g_error, current_exception_type() + ": " + e.what());
  } catch (...) {
    raise_text(g_error, current_exception_type() + " (no message)");
  }
}

/// Error(Exception); ConfigError(Error, ValueError), IoError(Error, OSError): a host that
/// catches ValueError or OSError catches them too.
void define_errors(nb::module_& m) {
  auto make = [&](const char* name, PyObject* bases, const char* doc) {
    PyObject* t = PyErr_NewExceptionWithDoc((std::string("corridorkey.") + name).c_str(), doc, bases, nullptr);
    Py_XDECREF(bases);
    if (!t) throw nb::python_error();
    m.attr(name) = nb::handle(t);
    return t;
  };
  g_error = make("Error", nullptr, "Base of every error the engine raises; the message names the file, key or value.");
  g_config_error = make("ConfigError", PyTuple_Pack(2, g_error, PyExc_ValueError),
                        "Invalid options, profile or job files: unknown key, wrong type, value out of range.");
  g_io_error = make("IoError", PyTuple_Pack(2, g_error, PyExc_OSError),
                    "A file that cannot be found, read, decoded or written.");
  g_model_error = make("ModelError", PyTuple_Pack(1, g_error),
                       "A checkpoint that is not one, is truncated or does not match its architecture.");
  g_device_error = make("DeviceError", PyTuple_Pack(1, g_error), "A device that does not exist or cannot run the model.");
  nb::register_exception_translator(&translate_exception);
}

// ---- log lines -------------------------------------------------------------------------
// The library calls its handler under its own lock (log.h: calls are serialised). Python is
// never called in there: taking the GIL under that lock deadlocks against a thread that
// holds the GIL and logs (a profile file's warning while Model.load parses it), and even a
// thread that holds the GIL may give it up inside a logging handler's write. Lines are
// queued and delivered, in the order they were logged, outside every library lock: by the
// interpreter's pending calls (Py_AddPendingCall needs no GIL) and when a call of this
// module returns.

PyObject* g_log_target = nullptr;  // read and replaced with the GIL held
std::mutex g_lines_m;
std::deque<std::pair<int, std::string>> g_lines;
std::atomic<bool> g_drain_scheduled{false};

}  // namespace

void deliver_log_lines() noexcept {
  if (finalizing()) return;
  for (;;) {
    std::pair<int, std::string> line;
    {
      std::lock_guard<std::mutex> l(g_lines_m);
      if (g_lines.empty()) return;
      line = std::move(g_lines.front());
      g_lines.pop_front();
    }
    if (!g_log_target) continue;
    const nb::object fn = nb::borrow(g_log_target);
    try {
      fn(line.first, text_str(line.second));  // a line may name a non-UTF-8 file
    } catch (nb::python_error& e) {
      e.discard_as_unraisable(fn);  // a handler that raises loses its line, not the work
    } catch (...) {
    }
  }
}

// ---- shutting down --------------------------------------------------------------------
// At exit (an atexit hook: non-daemon threads are joined by then) daemon threads may still be
// keying. Letting the process end under them crashed it (LibTorch's static destructors ran
// beside their work, or CPython ended a thread inside C++ frames: rc 134 / 139). So the
// hook refuses new calls, cancels running jobs, and waits for the calls in flight to end;
// a thread that comes back from one after that waits for the process to end.

std::atomic<bool> g_closing{false};
std::mutex g_active_m;
std::condition_variable g_active_cv;
int g_active = 0;                        // engine work in flight, under g_active_m
std::set<std::atomic<bool>*> g_cancels;  // running jobs' cancel flags, under g_active_m

Busy::Busy() {
  std::lock_guard<std::mutex> l(g_active_m);
  if (g_closing) throw std::runtime_error("corridorkey: the interpreter is shutting down");
  ++g_active;
}

Busy::~Busy() { done(); }

void Busy::done() {
  std::lock_guard<std::mutex> l(g_active_m);
  if (done_) return;
  done_ = true;
  --g_active;
  g_active_cv.notify_all();
}

JobCancel::JobCancel(std::atomic<bool>* flag) : flag_(flag) {
  std::lock_guard<std::mutex> l(g_active_m);
  g_cancels.insert(flag);
  if (g_closing) *flag = true;
}

JobCancel::~JobCancel() {
  std::lock_guard<std::mutex> l(g_active_m);
  g_cancels.erase(flag_);
}

bool closing() { return g_closing; }

Unlocked::Unlocked() : state_(PyEval_SaveThread()) {}

Unlocked::~Unlocked() {
  // Back from engine work while the process ends: taking the GIL now would have CPython end
  // this thread inside C++ frames. It waits for the process to end; it has nothing left to do.
  while (g_closing || finalizing()) std::this_thread::sleep_for(std::chrono::seconds(1));
  PyEval_RestoreThread(state_);
  deliver_log_lines();
}

namespace {

/// The atexit hook: no new call, every job cancelled, the calls in flight waited for (frames
/// in flight finish; at most `seconds`).
void close_for_exit(double seconds) {
  {
    std::lock_guard<std::mutex> l(g_active_m);
    g_closing = true;
    for (auto* f : g_cancels) *f = true;
    // A daemon thread caught in a call keeps its engine and arrays to the end: not a leak.
    if (g_active > 0) nb::set_leak_warnings(false);
  }
  reset_log_handler();  // lines logged from here on go to stderr
  nb::gil_scoped_release nogil;
  std::unique_lock<std::mutex> l(g_active_m);
  g_active_cv.wait_for(l, std::chrono::duration<double>(seconds), [] { return g_active == 0; });
}

}  // namespace

namespace {

int delivered_later(void*) {
  g_drain_scheduled = false;
  deliver_log_lines();
  return 0;
}

void set_log_target(nb::object target) {
  if (!target.is_none() && !PyCallable_Check(target.ptr()))
    throw nb::type_error("set_log_handler: the handler must be callable (level, message), or None");
  PyObject* old = g_log_target;
  g_log_target = target.is_none() ? nullptr : target.release().ptr();
  Py_XDECREF(old);
  if (!g_log_target) {
    reset_log_handler();
    return;
  }
  set_log_handler(LogLevel::Debug, [](LogLevel level, const std::string& message) {
    {
      std::lock_guard<std::mutex> l(g_lines_m);
      g_lines.emplace_back(static_cast<int>(level), message);
    }
    if (!Py_IsInitialized() || finalizing()) return;
    if (!g_drain_scheduled.exchange(true) && Py_AddPendingCall(&delivered_later, nullptr) != 0)
      g_drain_scheduled = false;  // the queue is full: the next call of this module delivers them
  });
}

// ---- options -----------------------------------------------------------------------------

bool is_inference_key(const std::string& key) {
  for (const auto& f : inference_option_fields())
    if (f.key == key) return true;
  return false;
}

/// The profile with the keyword overrides applied (`what` names them in messages).
/// A keyword's name (any str: **{name: value} takes names that are not identifiers).
std::string key_text(nb::handle k, const std::string& what) { return str_text(k, what + ": a keyword"); }

/// The profile argument: a profile's name or a YAML file's path (str, bytes, os.PathLike).
std::string profile_text(nb::handle profile) { return path_text(profile, "profile"); }

Profile profile_with(const std::string& profile, const nb::kwargs& overrides, const std::string& what) {
  Profile o = load_profile(profile);
  for (auto [k, v] : overrides) set_option(o, key_text(k, what), v, what);
  return o;
}

PyModel load_model(nb::object checkpoint, nb::object profile, nb::object device, nb::object img_size,
                   const nb::kwargs& overrides) {
  PyModel m;
  m.options = profile_with(profile_text(profile), overrides, "Model.load");
  // None is the bundled demo model; an empty path is a mistake (an unset variable), not a choice.
  if (!checkpoint.is_none()) {
    m.options.model.checkpoint = path_text(checkpoint, "checkpoint");
    if (m.options.model.checkpoint.empty())
      throw ConfigError("checkpoint: an empty path (None loads the bundled demo model)");
  } else {
    m.options.model.checkpoint = default_checkpoint();
  }
  set_option(m.options, "device", device, "Model.load");
  set_option(m.options, "img_size", img_size, "Model.load");
  validate_profile(m.options, "Model.load");
  Unlocked nogil;  // declared first, so the work is counted off before it takes the GIL back
  Busy busy;
  m.model = Model::load(m.options.model, m.options.engine);
  return m;
}

PyEngine* make_engine(const PyModel& m, const nb::kwargs& overrides) {
  EngineSettings o = m.options.engine;  // the Model's options stay the Model's
  for (auto [k, v] : overrides) {
    const auto key = key_text(k, "Model.engine");
    for (const auto& f : engine_option_fields())
      if (f.key == key && f.owner == OptionOwner::Model)
        throw ConfigError("Model.engine: '" + key + "' is a Model option (it changes the weights or the process); "
                          "give it to Model.load");
    set_option(o, key, v, "Model.engine");
  }
  validate_profile(Profile{m.model->options(), o}, "Model.engine");
  auto e = std::make_unique<PyEngine>();
  Unlocked nogil;
  Busy busy;
  e->engine = create_engine(m.model, o);
  return e.release();
}

nb::dict info_dict(const EngineInfo& i) { return nb::cast<nb::dict>(json_value(engine_info_json(i))); }

// ---- clip jobs -------------------------------------------------------------------------

// Events and the summary are json.loads of the text `inference --json` writes
// (report_json.h): the same fields, names and units by construction.

/// The callback's exception, kept to be raised from run_inference on the calling thread.
struct CallbackFailure : std::exception {
  const char* what() const noexcept override { return "the on_event callback raised"; }
};

nb::dict run_job(nb::object clips, nb::object profile, nb::object on_event, const nb::kwargs& overrides) {
  Profile o = load_profile(profile_text(profile));
  InferenceOptions job;
  const bool one = nb::isinstance<nb::str>(clips) || nb::isinstance<nb::bytes>(clips) ||
                   PyObject_HasAttrString(clips.ptr(), "__fspath__");
  if (one) {
    job.paths.push_back(path_text(clips, "clips"));
  } else {
    try {
      for (nb::handle c : clips) job.paths.push_back(path_text(c, "clips"));
    } catch (nb::python_error&) {
      throw ConfigError("clips: a path or an iterable of paths");
    }
  }
  for (auto [k, v] : overrides) {
    const auto key = key_text(k, "run_inference");
    if (is_inference_key(key)) {
      set_inference_option(job, key, option_text(v, key), "run_inference");
      continue;
    }
    bool known = false;
    for (const auto& f : engine_option_fields()) known = known || f.key == key;
    if (!known) {
      std::string keys;
      for (const auto& f : engine_option_fields()) keys += (keys.empty() ? "" : ", ") + f.key;
      for (const auto& f : inference_option_fields()) keys += ", " + f.key;
      throw ConfigError("run_inference: unknown key '" + key + "' (known keys: " + keys + ")");
    }
    set_option(o, key, v, "run_inference");
  }
  validate_profile(o, "run_inference");
  validate_inference_options(job, "run_inference");

  std::atomic<bool> cancel{false};
  job.cancel = &cancel;
  JobCancel exit_cancels(&cancel);  // the exit hook cancels the job too
  std::optional<nb::python_error> raised;  // the callback's exception (set with the GIL held)
  std::function<void(const PipelineEvent&)> events;
  if (!on_event.is_none())
    events = [&](const PipelineEvent& e) {
      // Not while the interpreter shuts down (a daemon thread's job): stop the job instead.
      if (closing() || finalizing()) throw CallbackFailure();
      nb::gil_scoped_acquire gil;
      deliver_log_lines();
      try {
        on_event(json_value(event_json(e)));
      } catch (nb::python_error& err) {
        raised.emplace(std::move(err));
        throw CallbackFailure();
      }
    };

  // The job runs on a thread of its own while this one waits with the GIL released and
  // wakes every 100 ms to let Python look at its signals (the main thread's: a job run from
  // another thread is not interrupted). Ctrl-C sets `cancel`: frames in flight finish,
  // nothing is left half-written, and KeyboardInterrupt is raised once the job has ended.
  // A second Ctrl-C meanwhile is taken as part of the first. The library installs no signal
  // handler; Python keeps its own.
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  JobSummary summary;
  std::exception_ptr failure;
  Busy busy;  // the job, until its worker has ended (the exit hook waits for the worker)
  std::thread worker([&] {
    try {
      summary = run_inference(o, job, events);
    } catch (...) {
      failure = std::current_exception();
    }
    busy.done();
    std::lock_guard<std::mutex> l(m);
    done = true;
    cv.notify_all();
  });
  std::optional<nb::python_error> interrupted;
  for (;;) {
    {
      Unlocked nogil;
      std::unique_lock<std::mutex> l(m);
      if (cv.wait_for(l, std::chrono::milliseconds(100), [&] { return done; })) break;
    }
    if (PyErr_CheckSignals() != 0) {
      if (!interrupted) interrupted.emplace();  // the KeyboardInterrupt (or the handler's error)
      else PyErr_Clear();
      cancel = true;
    }
  }
  {
    Unlocked nogil;
    worker.join();
  }
  if (interrupted) {
    nb::python_error err = std::move(*interrupted);
    interrupted.reset();
    throw err;
  }
  if (raised) {
    nb::python_error err = std::move(*raised);
    raised.reset();
    throw err;
  }
  if (failure) std::rethrow_exception(failure);
  return nb::cast<nb::dict>(json_value(summary_json(summary)));
}

nb::dict system_dict() {
  SystemInfo s;
  {
    Unlocked nogil;
    s = system_info();
  }
  nb::dict d;
  d["version"] = s.engine_version;
  d["torch_version"] = s.torch_version;
  d["cuda_build"] = s.cuda_build;
  d["cuda_runtime"] = s.cuda_runtime;
  nb::list cuda;
  for (const auto& c : s.cuda) cuda.append(c.name);
  d["cuda_devices"] = cuda;
  d["mps"] = s.mps;
  d["cpu_threads"] = s.cpu_threads;
  d["cpu"] = text_str(s.cpu.identity());  // /proc/cpuinfo's model name, as the kernel gives it
  d["auto_precision_cpu"] = s.auto_precision_cpu;
  d["auto_precision_cuda"] = s.auto_precision_cuda;
  d["profile_dir"] = path_str(profile_dir());
  d["default_checkpoint"] = path_str(default_checkpoint());
  return d;
}

}  // namespace

std::string option_text(nb::handle v, const std::string& key) {
  auto scalar = [&](nb::handle x) -> std::string {
    if (nb::isinstance<nb::bool_>(x)) return nb::cast<bool>(x) ? "true" : "false";
    if (nb::isinstance<nb::list>(x) || nb::isinstance<nb::tuple>(x) || nb::isinstance<nb::dict>(x))
      throw ConfigError(key + ": a nested list or a dict is not a value");
    if (PyObject_HasAttrString(x.ptr(), "__fspath__") || nb::isinstance<nb::bytes>(x)) return path_text(x, key);
    // A str as os.fsencode encodes it: a path given as os.fsdecode's str keeps its bytes.
    return str_text(nb::isinstance<nb::str>(x) ? nb::object(nb::borrow(x)) : nb::object(nb::str(x)), key);
  };
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {  // one level: outputs=("matte", "comp")
    std::string s;
    for (nb::handle x : v) s += (s.empty() ? "" : ",") + scalar(x);
    return s;
  }
  return scalar(v);
}

namespace {

/// A Python value named in a message: its repr, as the message's text.
std::string repr_text(nb::handle v) {
  PyObject* r = PyObject_Repr(v.ptr());
  if (!r) {
    PyErr_Clear();
    return "a " + std::string(Py_TYPE(v.ptr())->tp_name);
  }
  // repr() escapes what is not printable, lone surrogates included: it is UTF-8 clean.
  Py_ssize_t n = 0;
  const char* u = PyUnicode_AsUTF8AndSize(r, &n);
  std::string s = u ? std::string(u, static_cast<size_t>(n)) : std::string("a ") + Py_TYPE(v.ptr())->tp_name;
  if (!u) PyErr_Clear();
  Py_DECREF(r);
  return s;
}

/// The bytes of a str as os.fsencode gives them (the filesystem encoding, surrogateescape).
std::optional<std::string> fs_encoded(PyObject* str) {
  PyObject* b = PyUnicode_EncodeFSDefault(str);
  if (!b) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::string s(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
  Py_DECREF(b);
  return s;
}

}  // namespace

std::string str_text(nb::handle v, const std::string& what) {
  auto s = fs_encoded(v.ptr());
  if (!s) throw ConfigError(what + ": " + repr_text(v) + " cannot be encoded as the filesystem encodes names (os.fsencode)");
  return *s;
}

std::string path_text(nb::handle v, const std::string& what) {
  // os.fspath: str and bytes as they are, __fspath__ for os.PathLike; TypeError for the rest.
  PyObject* p = PyOS_FSPath(v.ptr());
  if (!p) {
    PyErr_Clear();
    throw ConfigError(what + ": not a path (str, bytes or os.PathLike): " + repr_text(v));
  }
  const nb::object path = nb::steal(p);
  std::string s;
  if (PyBytes_Check(p)) {
    s.assign(PyBytes_AS_STRING(p), static_cast<size_t>(PyBytes_GET_SIZE(p)));
  } else if (auto encoded = fs_encoded(p)) {
    s = std::move(*encoded);
  } else {
    throw ConfigError(what + ": " + repr_text(path) + " cannot be encoded as the filesystem encodes names (os.fsencode)");
  }
  if (s.find('\0') != std::string::npos) throw ConfigError(what + ": the path holds a NUL character");
  return s;
}

nb::str path_str(const std::string& path) {
  PyObject* s = PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
  if (s) return nb::steal<nb::str>(s);
  PyErr_Clear();  // not decodable even with surrogateescape (a non-POSIX encoding): shown as text
  return text_str(path);
}

nb::str text_str(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (!s) throw nb::python_error();  // MemoryError
  return nb::steal<nb::str>(s);
}

nb::object json_value(const std::string& text) {
  // The text is UTF-8 (bytes that are not are \udcXX escapes), so str() takes it whole.
  return nb::module_::import_("json").attr("loads")(nb::str(text.data(), text.size()));
}

nb::list text_list(const std::vector<std::string>& texts) {
  nb::list l;
  for (const auto& t : texts) l.append(text_str(t));
  return l;
}

void set_option(Profile& o, const std::string& key, nb::handle value, const std::string& source) {
  corridorkey::set_option(o, key, option_text(value, key), source);
}

void set_option(EngineSettings& o, const std::string& key, nb::handle value, const std::string& source) {
  corridorkey::set_option(o, key, option_text(value, key), source);
}

}  // namespace corridorkey::python

using namespace corridorkey;
using namespace corridorkey::python;

NB_MODULE(_corridorkey, m) {
  m.doc() = "CorridorKey Engine: neural green-screen keying on the engine's C++ API";
  m.attr("__version__") = CORRIDORKEY_VERSION_STRING;
  define_errors(m);

  m.def("_set_log_target", &set_log_target, nb::arg("target").none(),
        "Where the library's log lines go: target(level: int, message: str), or None for stderr.");

  nb::class_<PyModel>(m, "Model", "Loaded weights that engines share (one copy in memory).",
                      nb::is_weak_referenceable())
      .def_static("load", &load_model, nb::arg("checkpoint").none() = nb::none(), nb::kw_only(),
                  nb::arg("profile") = "optimized", nb::arg("device") = "auto", nb::arg("img_size") = 0,
                  nb::arg("model_overrides"),
                  "Loads a checkpoint (.safetensors, .pth, TorchScript or a folder; None: the bundled demo "
                  "model) with a profile and overrides in the CLI's keys and units. The measured plan is "
                  "made for img_size here.")
      .def("engine", &make_engine, nb::arg("engine_overrides"), nb::rv_policy::take_ownership,
           "An engine on these weights; overrides are engine settings (img_size, backbone_size, despill, ...).")
      .def_prop_ro("checkpoint", [](const PyModel& p) { return path_str(p.model->checkpoint()); })
      .def_prop_ro("arch", [](const PyModel& p) { return p.model->arch(); })
      .def_prop_ro("device", [](const PyModel& p) { return p.model->device(); })
      .def_prop_ro("img_size", [](const PyModel& p) { return p.model->img_size(); })
      .def_prop_ro("parameters", [](const PyModel& p) { return p.model->parameters(); })
      .def("__repr__", [](const PyModel& p) {
        return text_str("<corridorkey.Model " + p.model->arch() + " from " + p.model->checkpoint() + " on " +
                        p.model->device() + ">");
      });

  auto engine = nb::class_<PyEngine>(m, "Engine", "Keys frames on a Model's weights. Calls on one engine "
                                                  "are serialised; engines of one Model run concurrently.",
                                     nb::is_weak_referenceable());
  engine.def("info", [](PyEngine& e) { deliver_log_lines(); return info_dict(e.engine->info()); },
             "What runs: device, precision, attention, refiner, size and the measured plan.");
  bind_frames(engine);

  m.def("run_inference", &run_job, nb::arg("clips"), nb::kw_only(), nb::arg("profile") = "optimized",
        nb::arg("on_event").none() = nb::none(), nb::arg("overrides"),
        "Keys clips end to end as `corridorkey-engine inference` does; returns the summary.");
  m.def("info", &system_dict, "The engine and LibTorch versions, devices and the CPU.");
  m.def("_close_for_exit", &close_for_exit, nb::arg("seconds") = 300.0,
        "atexit: refuse new calls, cancel running jobs, wait for the calls in flight.");
}
