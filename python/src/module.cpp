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
#include <corridorkey/system.h>
#include <corridorkey/version.h>

#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <optional>
#include <thread>

namespace corridorkey::python {
namespace {

// The Python classes of the library's errors (module attributes Error, ConfigError, ...).
PyObject* g_error = nullptr;
PyObject* g_config_error = nullptr;
PyObject* g_io_error = nullptr;
PyObject* g_model_error = nullptr;
PyObject* g_device_error = nullptr;

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
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      PyErr_SetString(g_config_error, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(g_io_error, e.what());
    } catch (const ModelError& e) {
      PyErr_SetString(g_model_error, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(g_device_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

// ---- log lines -------------------------------------------------------------------------

/// The Python callable log lines go to (the module sets logging.getLogger("corridorkey")'s
/// at import). Read and replaced only with the GIL held, so a line being logged on another
/// thread either calls the old target, holding a reference, or the new one; never a freed one.
PyObject* g_log_target = nullptr;

void set_log_target(nb::object target) {
  PyObject* old = g_log_target;
  g_log_target = target.is_none() ? nullptr : target.release().ptr();
  Py_XDECREF(old);
  if (!g_log_target) {
    reset_log_handler();
    return;
  }
  set_log_handler(LogLevel::Debug, [](LogLevel level, const std::string& message) {
    if (!Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    if (!g_log_target) return;
    const nb::object fn = nb::borrow(g_log_target);
    try {
      fn(static_cast<int>(level), nb::str(message.data(), message.size()));
    } catch (nb::python_error& e) {
      e.discard_as_unraisable(fn);  // a handler that raises loses its line, not the work
    }
  });
}

// ---- options -----------------------------------------------------------------------------

bool is_inference_key(const std::string& key) {
  for (const auto& f : inference_option_fields())
    if (f.key == key) return true;
  return false;
}

/// The profile with the keyword overrides applied, checked as a profile file is.
EngineOptions profile_with(const std::string& profile, const nb::kwargs& overrides, const char* what) {
  EngineOptions o = load_profile(profile);
  for (auto [k, v] : overrides) set_option(o, nb::cast<std::string>(k), v);
  validate_profile(o, what);
  return o;
}

// ---- Model and Engine --------------------------------------------------------------------

PyModel load_model(nb::object checkpoint, const std::string& profile, const std::string& device, int64_t img_size,
                   const nb::kwargs& overrides) {
  PyModel m;
  m.options = profile_with(profile, overrides, "Model.load");
  m.options.checkpoint = checkpoint.is_none() ? default_checkpoint() : nb::cast<std::string>(nb::str(checkpoint));
  m.options.device = device;
  m.options.img_size = img_size;
  nb::gil_scoped_release nogil;
  m.model = Model::load(m.options.model(), m.options.engine());
  return m;
}

PyEngine* make_engine(const PyModel& m, const nb::kwargs& overrides) {
  EngineOptions o = m.options;
  for (auto [k, v] : overrides) {
    const auto key = nb::cast<std::string>(k);
    for (const auto& f : engine_option_fields())
      if (f.key == key && f.owner == OptionOwner::Model)
        throw ConfigError("Model.engine: '" + key + "' is a Model option (it changes the weights or the process); "
                          "give it to Model.load");
    set_option(o, key, v);
  }
  validate_profile(o, "Model.engine");
  auto e = std::make_unique<PyEngine>();
  nb::gil_scoped_release nogil;
  e->engine = create_engine(m.model, o.engine());
  return e.release();
}

nb::dict plan_dict(const TunePlan& p) {
  nb::dict d;
  d["origin"] = to_string(p.origin);
  d["trial_ms"] = p.trial_ms;
  d["cache"] = p.cache_path;
  nb::dict decisions;
  for (const auto& x : p.decisions) {
    nb::dict one;
    one["value"] = to_string(x.value);
    one["source"] = to_string(x.source);
    one["why"] = x.why;
    nb::dict times;
    for (const auto& [name, ms] : x.times_ms) times[name.c_str()] = ms;
    one["times_ms"] = times;
    decisions[to_string(x.option)] = one;
  }
  d["decisions"] = decisions;
  return d;
}

nb::dict info_dict(const EngineInfo& i) {
  nb::dict d;
  d["device"] = i.device;
  d["arch"] = i.arch;
  d["checkpoint"] = i.checkpoint;
  d["profile"] = i.profile;
  d["compile_mode"] = i.compile_mode_effective;
  d["precision"] = i.precision;
  d["attention"] = i.attention;
  d["refiner"] = i.refiner;
  d["img_size"] = i.img_size;
  d["backbone_size"] = i.backbone_size;
  d["parameters"] = i.parameters;
  d["notes"] = i.notes;
  d["plan"] = plan_dict(i.tune);
  return d;
}

nb::dict timings_dict(const StageTimings& t) {
  nb::dict d;
  d["read_ms"] = t.read_ms;
  d["preprocess_ms"] = t.preprocess_ms;
  d["encoder_ms"] = t.encoder_ms;
  d["decoders_ms"] = t.decoders_ms;
  d["refiner_ms"] = t.refiner_ms;
  d["infer_ms"] = t.infer_ms;
  d["postprocess_ms"] = t.postprocess_ms;
  d["write_ms"] = t.write_ms;
  d["total_ms"] = t.total_ms;
  return d;
}

// ---- clip jobs -------------------------------------------------------------------------

/// An event as `inference --json` writes it (docs/clips.md, NDJSON events): the same
/// fields, names and units; empty text fields left out.
nb::dict event_dict(const PipelineEvent& e) {
  nb::dict d;
  d["event"] = to_string(e.kind);
  for (auto [name, text] : {std::pair{"clip", &e.clip}, std::pair{"frame", &e.frame}, std::pair{"file", &e.file},
                            std::pair{"message", &e.message}, std::pair{"checkpoint", &e.checkpoint},
                            std::pair{"screen", &e.screen}})
    if (!text->empty()) d[name] = *text;
  d["done"] = e.frames_done;
  d["total"] = e.frames_total;
  if (e.kind == PipelineEvent::Kind::FrameDone) {
    const auto& t = e.timings;
    nb::dict ms;
    ms["read"] = t.read_ms;
    ms["preprocess"] = t.preprocess_ms;
    ms["infer"] = t.infer_ms;
    ms["encoder"] = t.encoder_ms;
    ms["decoders"] = t.decoders_ms;
    ms["refiner"] = t.refiner_ms;
    ms["postprocess"] = t.postprocess_ms;
    ms["write"] = t.write_ms;
    d["timings_ms"] = ms;
  }
  if (e.kind == PipelineEvent::Kind::JobStarted) {
    nb::dict plan;
    plan["origin"] = to_string(e.plan_origin);
    plan["trial_ms"] = e.trial_ms;
    d["plan"] = plan;
  }
  return d;
}

nb::dict summary_dict(const JobSummary& s) {
  nb::dict d;
  d["clips"] = s.clips;
  d["frames_total"] = s.frames_total;
  d["frames_done"] = s.frames_done;
  d["frames_skipped"] = s.frames_skipped;
  d["frames_failed"] = s.frames_failed;
  d["videos_written"] = s.videos_written;
  d["videos_failed"] = s.videos_failed;
  d["failures"] = s.failures;
  d["interrupted"] = s.interrupted;
  d["wall_ms"] = s.wall_ms;
  d["infer_wait_ms"] = s.infer_wait_ms;
  d["stage_sums"] = timings_dict(s.stage_sums);
  d["engine"] = info_dict(s.engine);
  nb::list models;
  for (const auto& c : s.clip_models) {
    nb::dict one;
    one["clip"] = c.clip;
    one["checkpoint"] = c.checkpoint;
    one["screen"] = c.screen;
    one["swapped"] = c.swapped;
    models.append(one);
  }
  d["clip_models"] = models;
  return d;
}

/// The callback's exception, kept to be raised from run_inference on the calling thread.
struct CallbackFailure : std::exception {
  const char* what() const noexcept override { return "the on_event callback raised"; }
};

nb::dict run_job(nb::object clips, const std::string& profile, nb::object on_event, const nb::kwargs& overrides) {
  EngineOptions o = load_profile(profile);
  InferenceOptions job;
  if (nb::isinstance<nb::str>(clips)) job.paths.push_back(nb::cast<std::string>(clips));
  else
    for (nb::handle c : clips) job.paths.push_back(nb::cast<std::string>(nb::str(c)));
  for (auto [k, v] : overrides) {
    const auto key = nb::cast<std::string>(k);
    if (is_inference_key(key)) set_inference_option(job, key, option_text(v));
    else set_option(o, key, v);
  }
  validate_profile(o, "run_inference");
  validate_inference_options(job, "run_inference");

  std::atomic<bool> cancel{false};
  job.cancel = &cancel;
  std::optional<nb::python_error> raised;  // the callback's exception (only set under the GIL)
  std::function<void(const PipelineEvent&)> events;
  if (!on_event.is_none())
    events = [&](const PipelineEvent& e) {
      nb::gil_scoped_acquire gil;
      try {
        on_event(event_dict(e));
      } catch (nb::python_error& err) {
        raised.emplace(std::move(err));
        throw CallbackFailure();
      }
    };

  // The job runs on a thread of its own while this one waits with the GIL released and
  // wakes every 100 ms to let Python look at its signals: Ctrl-C sets `cancel` (frames in
  // flight finish, nothing is left half-written) and KeyboardInterrupt is raised once the
  // job has ended. The library installs no signal handler; Python keeps its own.
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  JobSummary summary;
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      summary = run_inference(o, job, events);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> l(m);
    done = true;
    cv.notify_all();
  });
  bool interrupted = false;
  for (;;) {
    {
      nb::gil_scoped_release nogil;
      std::unique_lock<std::mutex> l(m);
      if (cv.wait_for(l, std::chrono::milliseconds(100), [&] { return done; })) break;
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;  // the KeyboardInterrupt (or the handler's exception) stays set
      cancel = true;
    }
  }
  {
    nb::gil_scoped_release nogil;
    worker.join();
  }
  if (interrupted) throw nb::python_error();
  if (raised) {
    nb::python_error err = std::move(*raised);
    raised.reset();
    throw err;
  }
  if (failure) std::rethrow_exception(failure);
  return summary_dict(summary);
}

nb::dict system_dict() {
  SystemInfo s;
  {
    nb::gil_scoped_release nogil;
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
  d["cpu"] = s.cpu.identity();
  d["auto_precision_cpu"] = s.auto_precision_cpu;
  d["auto_precision_cuda"] = s.auto_precision_cuda;
  d["profile_dir"] = profile_dir();
  d["default_checkpoint"] = default_checkpoint();
  return d;
}

}  // namespace

std::string option_text(nb::handle v) {
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v) ? "true" : "false";
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    std::string s;
    for (nb::handle x : v) s += (s.empty() ? "" : ",") + option_text(x);
    return s;
  }
  return nb::cast<std::string>(nb::str(v));
}

void set_option(EngineOptions& o, const std::string& key, nb::handle value) {
  set_engine_option(o, key, option_text(value));
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

  nb::class_<PyModel>(m, "Model", "Loaded weights that engines share (one copy in memory).")
      .def_static("load", &load_model, nb::arg("checkpoint").none() = nb::none(), nb::kw_only(),
                  nb::arg("profile") = "optimized", nb::arg("device") = "auto", nb::arg("img_size") = 0,
                  nb::arg("model_overrides"),
                  "Loads a checkpoint (.safetensors, .pth, TorchScript or a folder; None: the bundled demo "
                  "model) with a profile and overrides in the CLI's keys and units. The measured plan is "
                  "made for img_size here.")
      .def("engine", &make_engine, nb::arg("engine_overrides"), nb::rv_policy::take_ownership,
           "An engine on these weights; overrides are engine settings (img_size, backbone_size, despill, ...).")
      .def_prop_ro("checkpoint", [](const PyModel& p) { return p.model->checkpoint(); })
      .def_prop_ro("arch", [](const PyModel& p) { return p.model->arch(); })
      .def_prop_ro("device", [](const PyModel& p) { return p.model->device(); })
      .def_prop_ro("img_size", [](const PyModel& p) { return p.model->img_size(); })
      .def_prop_ro("parameters", [](const PyModel& p) { return p.model->parameters(); })
      .def("__repr__", [](const PyModel& p) {
        return "<corridorkey.Model " + p.model->arch() + " from " + p.model->checkpoint() + " on " +
               p.model->device() + ">";
      });

  auto engine = nb::class_<PyEngine>(m, "Engine", "Keys frames on a Model's weights. Calls on one engine "
                                                  "are serialised; engines of one Model run concurrently.");
  engine.def("info", [](PyEngine& e) { return info_dict(e.engine->info()); },
             "What runs: device, precision, attention, refiner, size and the measured plan.");
  bind_frames(engine);

  m.def("run_inference", &run_job, nb::arg("clips"), nb::kw_only(), nb::arg("profile") = "optimized",
        nb::arg("on_event").none() = nb::none(), nb::arg("overrides"),
        "Keys clips end to end as `corridorkey-engine inference` does; returns the summary.");
  m.def("info", &system_dict, "The engine and LibTorch versions, devices and the CPU.");
}
