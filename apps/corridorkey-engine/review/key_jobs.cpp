#include "review/key_jobs.h"

#include <corridorkey/base/timing.h>
#include <corridorkey/clips.h>
#include <corridorkey/errors.h>
#include <corridorkey/job.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/pipeline.h>
#include <corridorkey/version.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace corridorkey::review {
namespace fs = std::filesystem;
using timing::Clock;
using timing::ms_since;

namespace {

/// How many finished jobs the list keeps (a session's running and queued ones all stay).
constexpr size_t kMaxFinishedJobs = 50;

}  // namespace

/// A number as the option tables read it, in every locale.
std::string number_text(double v) {
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

EngineSettings with_post(EngineSettings o, const PostTweak& t) {
  set_option(o, "despill", number_text(t.despill), "review");
  set_option(o, "despeckle", t.despeckle ? "true" : "false", "review");
  set_option(o, "despeckle_size", std::to_string(t.despeckle_size), "review");
  return o;
}

PostTweak parse_tweak(const json& body, const EngineSettings& base) {
  PostTweak t;
  t.despill = base.despill_strength * 10;
  t.despeckle = base.despeckle;
  t.despeckle_size = base.despeckle_size;
  if (body.contains("despill")) {
    if (!body["despill"].is_number()) throw HttpError(400, "despill: expected a number in 0..10");
    t.despill = body["despill"].get<double>();
  }
  if (body.contains("despeckle")) {
    if (!body["despeckle"].is_boolean()) throw HttpError(400, "despeckle: expected true or false");
    t.despeckle = body["despeckle"].get<bool>();
  }
  if (body.contains("despeckle_size")) {
    if (!body["despeckle_size"].is_number_integer()) throw HttpError(400, "despeckle_size: expected an integer");
    t.despeckle_size = body["despeckle_size"].get<int64_t>();
  }
  with_post(base, t);  // the option table's range checks (ConfigError: 400)
  return t;
}

/// A frame keyed once by the loaded model, kept for tweaks: the raw result with its
/// despeckle memo (a despill change reuses it; RepostableFrame, as serve's frame.repost) and
/// the outputs' buffers, reused tweak after tweak.
struct Keying::Kept {
  Kept(std::string k, RawFrame raw) : key(std::move(k)), frame(std::move(raw)) {}
  std::string key;
  RepostableFrame frame;
  mutable std::mutex m;  // guards `out`
  mutable FinishedFrame out;
};

struct Keying::Job {
  std::string id, kind, profile, screen;
  ClipEntry clip;
  Profile options;
  bool write_only = false;
  std::string state = "queued";  // queued | running | done | cancelled | failed
  int frames_done = 0, frames_total = 0, frames_failed = 0;
  json failures = json::array(), warnings = json::array();
  std::string message;
  Clock::time_point started, first_frame;
  bool any_frame = false;
  double elapsed_s = 0;
  std::atomic<bool> cancel{false};
};

Keying::Keying(const ReviewConfig& config, const ClipLibrary& library, FrameViews& views)
    : cfg_(config), lib_(library), views_(views), thread_([this] { worker(); }) {}

Keying::~Keying() { stop(); }

void Keying::stop() {
  {
    std::lock_guard<std::mutex> l(m_);
    stopping_ = true;
    for (auto& j : jobs_) j->cancel = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Keying::changed() {  // under m_
  ++version_;
  cv_.notify_all();
}

std::shared_ptr<const Keying::Kept> Keying::keyed(const ClipEntry& c, int frame, bool* ran) {
  const bool video = !c.clip.input.video.empty();
  const auto plate = lib_.checked(video ? c.clip.input.video : lib_.plate_file(c, frame));
  const auto hint_name = lib_.hint_file(c, frame);
  const auto hint = hint_name.empty() ? std::string() : lib_.checked(hint_name);
  const auto hint_video = hint.empty() && !c.clip.hint.video.empty() ? lib_.checked(c.clip.hint.video) : "";
  const auto garbage = lib_.matte(c, frame, /*holdout=*/false), holdout = lib_.matte(c, frame, /*holdout=*/true);
  const auto run = lib_.run_record(c);
  const std::string colour = lib_.plate_colorspace(c);
  // Every file the key reads is in its identity: a hint or matte repainted keys it again.
  auto stamp = [](const std::string& p) { return p.empty() ? std::string("-") : file_stamp(p); };
  const std::string key = c.id + "|" + std::to_string(frame) + "|" + file_stamp(plate) + "|" + stamp(hint) + "|" +
                          stamp(hint_video) + "|" + stamp(garbage.path) + "|" + stamp(holdout.path) + "|" + colour;
  {
    std::lock_guard<std::mutex> l(kept_m_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if ((*it)->key == key) {
        kept_.splice(kept_.begin(), kept_, it);
        return kept_.front();
      }
  }
  RawFrame raw;
  try {
    FrameSource src;
    src.plate_file = plate;
    if (video) src.plate = read_video_frame(plate, frame);
    if (!hint.empty()) src.hint_file = hint;
    else if (!hint_video.empty()) {
      src.hint_file = hint_video;
      src.hint = read_video_frame(src.hint_file, frame);
    }
    // The clip's mattes, as a key applies them: key_frame reads a file; a video's frame is
    // read here, as the hint's.
    src.garbage_file = garbage.path;
    src.holdout_file = holdout.path;
    if (garbage.video) src.garbage = read_video_frame(garbage.path, frame);
    if (holdout.video) src.holdout = read_video_frame(holdout.path, frame);
    FrameSettings fs;
    fs.input_colorspace = colour;
    fs.ocio_config = cfg_.ocio_config;
    // The backing as the clip was keyed (a frame alone could be estimated otherwise).
    const std::string screen = run.is_object() ? run.value("screen", "") : "";
    fs.screen = screen == "blue" ? Screen::Blue : screen == "green" ? Screen::Green : Screen::Auto;
    std::lock_guard<std::mutex> l(model_m_);
    if (!engine_) {
      model_ = Model::load(cfg_.options.model, cfg_.options.engine);
      engine_ = create_engine(model_, cfg_.options.engine);
    }
    raw = key_frame(*engine_, nullptr, std::move(src), fs);
    *ran = true;
  } catch (const HttpError&) {
    throw;
  } catch (const std::exception& e) {
    throw HttpError(422, std::string("keying the frame for the tweak: ") + e.what());
  }
  auto k = std::make_shared<Kept>(key, std::move(raw));
  std::lock_guard<std::mutex> l(kept_m_);
  kept_.push_front(k);
  while (kept_.size() > 4) kept_.pop_back();  // a 1920x1080 frame keeps 41 MB
  return k;
}

Pixels Keying::tweak(const ClipEntry& c, int frame, const PostTweak& t, bool comp, const ViewParams& v,
                     json& timings) {
  auto t0 = Clock::now();
  bool ran = false;
  const auto k = keyed(c, frame, &ran);
  timings["key_ms"] = ms_since(t0);
  timings["keyed"] = ran;  // false: post-processing only, no model
  t0 = Clock::now();
  std::lock_guard<std::mutex> l(k->m);
  k->frame.finish(with_post(cfg_.options.engine, t), k->frame.raw().backing, /*processed=*/!comp, comp, k->out);
  timings["post_ms"] = ms_since(t0);
  t0 = Clock::now();
  // The keyed frame cut to the plate's display window, as the views show the files.
  Image cut;
  Pixels p = views_.display(in_display_window(comp ? k->out.comp : k->out.processed, display_window(k->frame.raw()), cut),
                            comp, v);
  timings["display_ms"] = ms_since(t0);
  return p;
}

std::string Keying::start(const ClipEntry& c, const std::string& profile, const std::string& screen,
                          const PostTweak* post) {
  if (screen != "auto" && screen != "green" && screen != "blue")
    throw HttpError(400, "screen '" + screen + "': expected auto, green or blue");
  auto j = std::make_shared<Job>();
  j->options = cfg_.engine_for(profile);  // ConfigError (400) for an unknown profile
  if (post) j->options.engine = with_post(j->options.engine, *post);
  j->kind = post ? "write" : "key";
  j->write_only = post != nullptr;
  j->profile = profile;
  j->screen = screen;
  j->clip = c;
  // The confinement the previews have: every file the job reads lies under the roots, and
  // its outputs go to a folder under the roots or output folders (made here when missing).
  lib_.check_inputs(c);
  (void)lib_.writable_folder(c.clip.output);
  lib_.check_outputs(c);  // a link out from Output/Comp, Matte, ... or run.json: 403
  std::lock_guard<std::mutex> l(m_);
  if (stopping_) throw HttpError(503, "the review is stopping");
  // Finished jobs beyond the last kMaxFinishedJobs are forgotten: the list is sent whole
  // to every progress stream on each change.
  size_t finished = 0;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it)
    if ((*it)->state != "queued" && (*it)->state != "running") ++finished;
  for (auto it = jobs_.begin(); it != jobs_.end() && finished > kMaxFinishedJobs;) {
    if ((*it)->state != "queued" && (*it)->state != "running") {
      it = jobs_.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
  j->id = "k" + std::to_string(next_id_++);
  jobs_.push_back(j);
  changed();
  return j->id;
}

void Keying::cancel(const std::string& id) {
  std::lock_guard<std::mutex> l(m_);
  for (auto& j : jobs_)
    if (j->id == id) {
      j->cancel = true;
      if (j->state == "queued") j->state = "cancelled";
      changed();
      return;
    }
  throw HttpError(404, "no job '" + id + "'");
}

json Keying::jobs() const {
  std::lock_guard<std::mutex> l(m_);
  json out = json::array();
  for (const auto& j : jobs_) {
    json e = {{"id", j->id},          {"kind", j->kind},       {"clip", j->clip.clip.name}, {"clip_id", j->clip.id},
              {"profile", j->profile}, {"screen", j->screen},   {"state", j->state},
              {"frames_done", j->frames_done}, {"frames_total", j->frames_total},
              {"frames_failed", j->frames_failed}, {"failures", j->failures},
              {"warnings", j->warnings}, {"message", j->message}};
    if (j->state == "running") {
      const double s = std::chrono::duration<double>(Clock::now() - j->started).count();
      e["elapsed_s"] = s;
      // From the first frame on: the model's load and plan are not the clip's rate.
      if (j->any_frame && j->frames_done > 0 && j->frames_total > j->frames_done) {
        const double per = std::chrono::duration<double>(Clock::now() - j->first_frame).count() /
                           std::max(1, j->frames_done - 1);
        e["eta_s"] = per * (j->frames_total - j->frames_done);
      }
    } else {
      e["elapsed_s"] = j->elapsed_s;
    }
    out.push_back(std::move(e));
  }
  return out;
}

uint64_t Keying::wait(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(m_);
  cv_.wait_for(l, timeout, [&] { return version_ != seen || stopping_; });
  return version_;
}

void Keying::worker() {
  for (;;) {
    std::shared_ptr<Job> j;
    {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] {
        if (stopping_) return true;
        for (auto& x : jobs_)
          if (x->state == "queued") return true;
        return false;
      });
      if (stopping_) {
        for (auto& x : jobs_)
          if (x->state == "queued") x->state = "cancelled";
        return;
      }
      for (auto& x : jobs_)
        if (x->state == "queued") {
          j = x;
          break;
        }
      j->state = "running";
      j->started = Clock::now();
      changed();
    }
    run(*j);
  }
}

void Keying::run(Job& j) {
  InferenceOptions io;
  io.paths = {j.clip.clip.root};
  io.output_root = cfg_.output_root;
  io.on_error = OnError::Skip;  // every failed frame listed, the others keyed
  io.input_colorspace = cfg_.input_colorspace;
  io.ocio_config = cfg_.ocio_config;
  io.cancel = &j.cancel;
  // Confined writing: the output folders are opened once, without following links out of
  // the roots, and written through their descriptors (a link swapped in after the check in
  // start() is not followed either). `inference` follows the user's links.
  io.confine_writes = lib_.write_roots();
  std::string state = "done";
  try {
    set_inference_option(io, "screen", j.screen, "review");
    if (j.write_only) io.fg = io.matte = false;  // Processed and Comp depend on the settings
    auto on_event = [&](const PipelineEvent& e) {
      std::lock_guard<std::mutex> l(m_);
      using K = PipelineEvent::Kind;
      if (e.kind == K::FrameDone || e.kind == K::FrameFailed || e.kind == K::FrameSkipped || e.kind == K::JobStarted) {
        j.frames_done = e.frames_done;
        j.frames_total = e.frames_total;
      }
      if (e.kind == K::FrameDone && !j.any_frame) j.any_frame = true, j.first_frame = Clock::now();
      if (e.kind == K::FrameFailed) {
        ++j.frames_failed;
        j.failures.push_back({{"frame", e.frame}, {"message", e.message}});
      }
      if (e.kind == K::Warning && j.warnings.size() < 50) j.warnings.push_back(e.message);
      changed();
    };
    // The loaded model's weights when the job's profile needs the same ones; else its own.
    std::shared_ptr<const Model> shared;
    {
      std::lock_guard<std::mutex> l(model_m_);
      if (model_ && model_key(j.options.model) == model_key(cfg_.options.model)) shared = model_;
    }
    JobSummary s;
    if (shared) {
      auto engine = create_engine(shared, j.options.engine);
      s = run_inference(*engine, io, on_event);
    } else {
      s = run_inference(j.options, io, on_event);
    }
    state = s.interrupted ? "cancelled" : "done";  // a cancel after the last frame changes nothing
    std::lock_guard<std::mutex> l(m_);
    j.frames_total = s.frames_total;
    j.frames_done = s.frames_done + s.frames_failed;
    j.message = std::to_string(s.frames_done) + " keyed, " + std::to_string(s.frames_failed) + " failed, " +
                std::to_string(s.frames_skipped) + " skipped";
  } catch (const std::exception& e) {
    state = j.cancel ? "cancelled" : "failed";
    std::lock_guard<std::mutex> l(m_);
    j.message = e.what();
  }
  std::lock_guard<std::mutex> l(m_);
  j.state = state;
  j.elapsed_s = std::chrono::duration<double>(Clock::now() - j.started).count();
  changed();
}

}  // namespace corridorkey::review
