// frame.key, frame.repost and clip.key. Parameters are checked on the reader thread, before
// anything is queued, so a malformed request is answered at once; the work itself runs on
// the model's worker (frame.repost on the reader: post-processing only, no model).
#include "serve/server_impl.h"

#include "event_stream.h"

#include <corridorkey/errors.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/report_json.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <exception>
#include <thread>

namespace corridorkey::serve {
namespace {

/// InferenceOptions fields that mean something for one frame.
const std::set<std::string>& frame_inference_keys() {
  // The colour decisions of a clip (docs/colour.md): the plate's space and the outputs'
  // (output_colorspace, fg_colorspace, comp_view), applied as `inference` applies them.
  static const std::set<std::string> k = {"color", "input_colorspace", "ocio_config", "output_colorspace",
                                          "fg_colorspace", "comp_view", "screen", "hint_erode",
                                          "hint_blur", "backing_check", "max_pixels", "exr_compression"};
  return k;
}

ImageArg image_arg(const json& params, const char* key, const std::string& method) {
  ImageArg a;
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return a;
  const std::string what = method + ": " + key;
  if (it->is_string()) {
    a.path = it->get<std::string>();
    if (a.path.empty()) throw RpcError(kInvalidParams, what + ": an empty path");
  } else if (it->is_object() && it->contains("shm")) {
    a.shm = parse_shm(*it, what);
  } else {
    throw RpcError(kInvalidParams, what + " must be a path (string) or a shared-memory block "
                                          "({\"shm\": NAME, \"width\", \"height\", \"channels\", "
                                          "\"type\", \"stride\"}), got " + std::string(it->type_name()));
  }
  return a;
}

std::string lower_ext(const std::string& path) {
  std::string e = std::filesystem::path(path).extension().string();
  for (auto& ch : e) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return e;
}

std::vector<OutputArg> output_args(const json& params, const std::string& method) {
  std::vector<OutputArg> out;
  auto it = params.find("outputs");
  if (it == params.end() || it->is_null()) return out;
  if (!it->is_object())
    throw RpcError(kInvalidParams,
                   method + ": \"outputs\" must be an object ({\"matte\": PATH, \"fg\": PATH, "
                            "\"processed\": PATH, \"comp\": PATH, \"hint\": PATH, "
                            "\"layered\": PATH})");
  for (const auto& [k, v] : it->items()) {
    OutputArg o;
    int channels = 3;
    std::string formats;
    if (k == "matte") o.kind = FrameOutput::Matte, channels = 1, formats = ".exr";
    else if (k == "fg") o.kind = FrameOutput::Fg, formats = ".exr";
    else if (k == "processed") o.kind = FrameOutput::Processed, channels = 4, formats = ".exr";
    else if (k == "comp") o.kind = FrameOutput::Comp, formats = ".png or .exr";
    else if (k == "hint") o.kind = FrameOutput::Hint, channels = 1, formats = ".png";
    else if (k == "layered") o.layered = true, formats = ".exr";
    else
      throw RpcError(kInvalidParams, method + ": unknown output '" + k +
                                         "' (expected matte, fg, processed, comp, hint or layered)");
    // One multi-layer EXR file (docs/clips.md, "The layered output"): no shared-memory
    // layout holds it; a host that wants the pixels takes matte, fg and processed blocks.
    if (o.layered && !v.is_null() && !v.is_string())
      throw RpcError(kInvalidParams,
                     method + ": outputs: layered is written only as a file (a .exr path); shared "
                              "memory cannot hold it: give a path, or take matte, fg and "
                              "processed as shared-memory blocks");
    o.where = image_arg(*it, k.c_str(), method + ": outputs");
    if (!o.where.given()) continue;
    if (o.where.shm && o.where.shm->channels != channels)
      throw RpcError(kInvalidParams, method + ": outputs: " + k + " has " + std::to_string(channels) +
                                         " channel(s); the shared-memory block states " +
                                         std::to_string(o.where.shm->channels));
    if (!o.where.shm) {  // refused now, not after the model has run for seconds
      std::error_code ec;
      if (std::filesystem::is_directory(o.where.path, ec))
        throw ConfigError(o.where.path + ": " + k + " names a folder; give a file path");
      // As the CLI's writer refuses it: a FIFO, device or socket there is never replaced.
      const auto st = std::filesystem::symlink_status(o.where.path, ec);
      if (!ec && st.type() != std::filesystem::file_type::regular &&
          st.type() != std::filesystem::file_type::symlink && st.type() != std::filesystem::file_type::not_found)
        throw ConfigError(o.where.path + ": " + k + " exists and is not a regular file; refusing to replace it");
      const auto e = lower_ext(o.where.path);
      if (formats.find(e.empty() ? "?" : e) == std::string::npos)
        throw ConfigError(o.where.path + ": " + k + " is written as " + formats + "; name the file so");
    }
    out.push_back(std::move(o));
  }
  // Two outputs into one file (the last would win silently), or one onto an input.
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    const auto ca = std::filesystem::weakly_canonical(a, ec), cb = std::filesystem::weakly_canonical(b, ec);
    return !ec ? ca == cb : a == b;
  };
  std::vector<std::string> inputs;
  for (const char* k : {"plate", "hint", "garbage", "holdout"})
    if (auto it = params.find(k); it != params.end() && it->is_string()) inputs.push_back(it->get<std::string>());
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& a = out[i].where;
    for (size_t j = i + 1; j < out.size(); ++j) {
      const auto& b = out[j].where;
      if ((a.shm && b.shm && a.shm->name == b.shm->name) || (!a.shm && !b.shm && same(a.path, b.path)))
        throw RpcError(kInvalidParams, method + ": outputs " + out[i].name() + " and " +
                                           out[j].name() + " name the same " +
                                           (a.shm ? "block " + a.shm->name : "file " + a.path));
    }
    if (!a.shm)
      for (const auto& in : inputs)
        if (same(a.path, in))
          throw RpcError(kInvalidParams, method + ": outputs: " + out[i].name() + " " + a.path +
                                             " is an input of this request; it would be overwritten");
  }
  return out;
}

/// Whether an output needs `k`: asked for itself, or (Processed) by the layered EXR.
bool wants(const std::vector<OutputArg>& outs, FrameOutput k) {
  return std::any_of(outs.begin(), outs.end(), [&](const OutputArg& o) {
    return o.layered ? k == FrameOutput::Processed : o.kind == k;
  });
}

/// The stages' times (report_json.h, the spelling of every output) with this request's own:
/// its wait in the queue and the whole call.
json timings_json(const StageTimings& t, double queue_ms) {
  json j = json::parse(stage_timings_json(t));  // numbers only: nothing a parser refuses
  j["queue_ms"] = queue_ms;
  j["total_ms"] = t.total_ms;
  return j;
}

/// Post-processes what the outputs need and writes them; fills postprocess_ms / write_ms.
json write_outputs(const CachedFrame& f, const EngineSettings& post, Screen backing, const std::vector<OutputArg>& outs,
                   const std::string& compression, StageTimings& t, const std::string& method,
                   const std::function<bool()>& cancelled, FinishedFrame* scratch = nullptr) {
  const RawFrame& raw = f.frame.raw();
  auto t0 = Clock::now();
  const bool want_p = wants(outs, FrameOutput::Processed), want_c = wants(outs, FrameOutput::Comp);
  FinishedFrame own;
  FinishedFrame& done = scratch ? *scratch : own;
  f.frame.finish(post, backing, want_p, want_c, done);  // every core: a host waits on a repost
  t.postprocess_ms += ms_since(t0);
  if (cancelled()) throw RpcError(kCancelled, method + ": cancelled; no output written");
  t0 = Clock::now();
  auto image_of = [&](FrameOutput k) -> const Image& {
    return k == FrameOutput::Matte       ? raw.alpha
           : k == FrameOutput::Fg        ? raw.fg
           : k == FrameOutput::Processed ? done.processed
           : k == FrameOutput::Comp      ? done.comp
                                         : raw.hint;
  };
  // Every shared-memory output is checked (size, existence) before anything is written, so
  // a request that fails on its third output has not written its first two.
  for (const auto& o : outs)
    if (o.where.shm) {
      const Image& im = image_of(o.kind);
      const auto& sh = *o.where.shm;
      if (sh.width != im.width || sh.height != im.height)
        throw RpcError(kInvalidParams, method + ": outputs: " + to_string(o.kind) + ": the shared-memory block is " +
                                           std::to_string(sh.width) + "x" + std::to_string(sh.height) +
                                           "; the frame is " + std::to_string(im.width) + "x" +
                                           std::to_string(im.height) + "; nothing was written");
      check_shm(sh, method + ": outputs: " + to_string(o.kind));
    }
  json written = json::object();
  // Each output in the colour space the frame's decisions give it (output_image), as the
  // files `inference` writes hold it.
  std::vector<Image> converted(outs.size());
  std::vector<const Image*> delivered(outs.size());
  for (size_t i = 0; i < outs.size(); ++i)  // (files: write_frame_output converts them)
    if (outs[i].where.shm) delivered[i] = &output_image(outs[i].kind, image_of(outs[i].kind), raw, converted[i]);
  // Shared-memory outputs are written at once, one thread each: mapping a block (populated),
  // copying and unmapping is ~9 ms for a 1920x1080 RGBA float block on a Zen 5, mostly the
  // kernel's page-table work, which runs in parallel.
  std::vector<std::thread> shm_writers;
  std::vector<std::exception_ptr> shm_errors(outs.size());
  struct JoinAll {  // also when a file output throws: no joinable thread is ever destroyed
    std::vector<std::thread>& v;
    ~JoinAll() {
      for (auto& th : v)
        if (th.joinable()) th.join();
    }
  } join_all{shm_writers};
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i];
    if (o.where.shm) {
      auto write = [&, i] {
        try {
          write_shm(*outs[i].where.shm, *delivered[i], method + ": outputs: " + to_string(outs[i].kind));
        } catch (...) {
          shm_errors[i] = std::current_exception();
        }
      };
      if (shm_writers.size() + 1 < std::max(1u, std::thread::hardware_concurrency())) shm_writers.emplace_back(write);
      else write();
    } else {
      if (o.layered) write_layered_output(o.where.path, raw, done.processed, compression);
      else write_frame_output(o.kind, o.where.path, image_of(o.kind), raw, compression);
    }
    written[o.name()] = o.where.shm ? o.where.shm->name : o.where.path;
  }
  for (auto& th : shm_writers) th.join();
  for (const auto& e : shm_errors)
    if (e) std::rethrow_exception(e);
  t.write_ms += ms_since(t0);
  return written;
}

/// The post-processing settings of the params on top of `base` (what the frame was keyed
/// with, or the model's): despill, despeckle, despeckle_size by their profile names.
EngineSettings post_options(EngineSettings base, const json& params, const std::string& method) {
  for (const auto& [k, v] : params.items())
    if (is_post_key(k)) set_option(base, k, scalar_text(v, k, method), method);
  return base;
}

json frame_result(const std::string& frame_id, const std::string& job_id, const std::string& model_id,
                  const RawFrame& raw, json written, const StageTimings& t, double queue_ms,
                  bool cached) {
  return {{"frame_id", frame_id},
          {"job_id", job_id},
          {"model_id", model_id},
          {"width", raw.alpha.width},
          {"height", raw.alpha.height},
          {"backing", to_string(raw.backing)},
          {"swapped", raw.swapped},
          {"linear", raw.linear},
          {"checkpoint", raw.checkpoint},
          {"outputs", std::move(written)},
          {"cached", cached},
          {"warnings", raw.warnings},
          {"timings", timings_json(t, queue_ms)}};
}

}  // namespace

std::function<json(Job&)> Server::frame_key(const json& params, const std::shared_ptr<ModelSlot>& s) {
  const std::string method = "frame.key";
  static const std::set<std::string> own = {"plate",   "hint",  "garbage", "holdout",
                                            "outputs", "model", "job_id"};
  InferenceOptions io;  // the per-frame settings, parsed by the inference table
  for (const auto& [k, v] : params.items()) {
    if (own.count(k) || is_engine_key(k)) continue;
    if (!frame_inference_keys().count(k))
      throw RpcError(kInvalidParams, method + ": unknown parameter '" + k +
                                         "' (expected plate, hint, garbage, holdout, outputs, model, "
                                         "job_id, screen, color, input_colorspace, ocio_config, "
                                         "output_colorspace, fg_colorspace, comp_view, "
                                         "hint_erode, hint_blur, backing_check, max_pixels, "
                                         "exr_compression, or an engine setting by its profile name)");
    set_inference_option(io, k, scalar_text(v, k, method), method);
  }
  auto plate = image_arg(params, "plate", method);
  if (!plate.given()) throw RpcError(kInvalidParams, method + ": \"plate\" is required (a path or a shared-memory block)");
  auto hint = image_arg(params, "hint", method);
  // Garbage and holdout mattes (docs/clips.md): white marks the region, plate-sized (key_frame
  // names the file otherwise). They shape the raw result itself (the garbage matte multiplies
  // the hint the model sees), so they travel in the cached RawFrame: a repost keeps them, and
  // another matte is another frame.key, another frame_id.
  auto garbage = image_arg(params, "garbage", method);
  auto holdout = image_arg(params, "holdout", method);
  auto outs = output_args(params, method);
  if (hint.given() && wants(outs, FrameOutput::Hint))
    throw RpcError(kInvalidParams, method + ": outputs: hint is the generated hint; this request gives one");
  if (io.color_given && !io.input_colorspace.empty())
    throw RpcError(kInvalidParams, method + ": color and input_colorspace both given (color is "
                                            "the deprecated spelling); give one");
  const FrameSettings fs = frame_settings(io);
  const EngineSettings post = post_options(s->opt.engine, params, method);
  const std::string compression = io.exr_compression;
  return [this, s, plate, hint, garbage, holdout, outs, fs, post, compression, method](Job& job) {
    const double queue_ms = ms_since(job.queued_at);
    const bool cached = s->engine != nullptr;
    ensure_loaded(*s);
    FrameSource src;
    src.plate_file = plate.name();
    if (plate.shm) src.plate = read_shm(*plate.shm, method + ": plate");
    if (hint.given()) src.hint_file = hint.name();
    if (hint.shm) src.hint = read_shm(*hint.shm, method + ": hint");
    if (garbage.given()) src.garbage_file = garbage.name();
    if (garbage.shm) src.garbage = read_shm(*garbage.shm, method + ": garbage");
    if (holdout.given()) src.holdout_file = holdout.name();
    if (holdout.shm) src.holdout = read_shm(*holdout.shm, method + ": holdout");
    auto entry = std::make_shared<CachedFrame>(key_frame(*s->engine, s->blue.get(), std::move(src), fs));
    entry->post = post;
    entry->model_id = s->id;
    entry->exr_compression = compression;
    const RawFrame& raw = entry->frame.raw();
    StageTimings t = raw.timings;
    std::string frame_id = "f";
    frame_id += std::to_string(next_id_++);
    // Cached before the outputs are written: when an output fails, the error names the
    // frame_id, and frame.repost writes the outputs without keying it again.
    const bool kept = cache_.put(frame_id, entry);  // false: too large for --cache-mb
    const auto t_total = Clock::now();
    json written;
    try {
      written = write_outputs(*entry, post, raw.backing, outs, compression, t, method,
                              [&] { return job.cancelled(); });
    } catch (const std::exception& e) {
      json err = error_object(e);
      json data = err.contains("data") ? err["data"] : json::object();
      if (kept) data["frame_id"] = frame_id;
      throw RpcError(err["code"].get<int>(), err["message"].get<std::string>(), data);
    }
    t.total_ms += ms_since(t_total);
    json result = frame_result(frame_id, job.id, s->id, raw, std::move(written), t, queue_ms, cached);
    result["repost"] = kept;
    return result;
  };
}

json Server::frame_repost(const json& params) {
  const std::string method = "frame.repost";
  static const std::set<std::string> own = {"frame_id", "outputs", "screen", "exr_compression"};
  for (const auto& [k, v] : params.items())
    if (!own.count(k) && !is_post_key(k))
      throw RpcError(kInvalidParams, method + ": unknown parameter '" + k +
                                         "' (expected frame_id, outputs, despill, despeckle, "
                                         "despeckle_size, screen, exr_compression)");
  const auto id = param_string(params, "frame_id", method);
  if (id.empty()) throw RpcError(kInvalidParams, method + ": \"frame_id\" is required (frame.key returns it)");
  auto f = cache_.get(id);
  if (!f)
    throw RpcError(kUnknownFrame, method + ": no cached frame '" + id +
                                      "' (never keyed here, or evicted: the cache keeps the last " +
                                      std::to_string(cache_.limit_bytes() >> 20) +
                                      " MiB of raw outputs, --cache-mb)");
  auto outs = output_args(params, method);
  if (wants(outs, FrameOutput::Hint) && f->frame.raw().hint.empty())
    throw RpcError(kInvalidParams, method + ": outputs: hint: frame '" + id + "' was keyed with a given hint");
  const auto t0 = Clock::now();
  const EngineSettings post = post_options(f->post, params, method);
  Screen backing = f->frame.raw().backing;
  if (has_param(params, "screen")) {  // which channel despill acts on
    const auto sc = param_string(params, "screen", method);
    if (sc != "green" && sc != "blue")
      throw RpcError(kInvalidParams, method + ": \"screen\" must be green or blue, got '" + sc + "'");
    backing = sc == "blue" ? Screen::Blue : Screen::Green;
  }
  std::string compression = param_string(params, "exr_compression", method, f->exr_compression);
  StageTimings t;
  std::unique_lock<std::mutex> scratch(repost_scratch_m_, std::try_to_lock);
  json written = write_outputs(*f, post, backing, outs, compression, t, method,
                               [] { return false; }, scratch.owns_lock() ? &repost_scratch_ : nullptr);
  t.total_ms = ms_since(t0);
  RawFrame shape;  // the result names the frame as frame.key did
  shape.alpha.width = f->frame.raw().alpha.width, shape.alpha.height = f->frame.raw().alpha.height;
  shape.backing = backing, shape.swapped = f->frame.raw().swapped, shape.linear = f->frame.raw().linear;
  shape.checkpoint = f->frame.raw().checkpoint;
  json r = frame_result(id, "", f->model_id, shape, std::move(written), t, 0, true);
  r.erase("job_id");
  return r;
}

std::function<json(Job&)> Server::clip_key(const json& params, const std::shared_ptr<ModelSlot>& s) {
  const std::string method = "clip.key";
  InferenceOptions io;
  auto it = params.find("paths");
  if (it == params.end()) it = params.find("path");
  if (it != params.end() && it->is_string()) io.paths.push_back(it->get<std::string>());
  else if (it != params.end() && it->is_array())
    for (const auto& p : *it) {
      if (!p.is_string()) throw RpcError(kInvalidParams, method + ": \"paths\" must hold strings");
      io.paths.push_back(p.get<std::string>());
    }
  if (io.paths.empty())
    throw RpcError(kInvalidParams, method + ": \"paths\" is required (clip folders or clips roots)");
  static const std::set<std::string> own = {"paths", "path", "model", "job_id"};
  for (const auto& [k, v] : params.items()) {
    if (own.count(k) || is_engine_key(k)) continue;
    set_inference_option(io, k, scalar_text(v, k, method), method);  // unknown keys: ConfigError
  }
  validate_inference_options(io, method);
  return [this, s, io](Job& job) mutable {
    ensure_loaded(*s);
    io.cancel = &job.stop_clip;
    auto conn = job.conn;
    const std::string id = job.id;
    const auto sum = run_inference(*s->engine, s->blue.get(), io, [conn, id](const PipelineEvent& e) {
      // The event as `inference --json` writes it (report_json.h), with the job it is of.
      conn->send(notification("clip.event", cli::raw_json(cli::with_members(event_json(e), {{"job_id", id}}))));
    });
    return cli::raw_json(cli::with_members(
        summary_json(sum), {{"job_id", id}, {"model_id", s->id}, {"cancelled", job.stop_clip.load()}}));
  };
}

}  // namespace corridorkey::serve
