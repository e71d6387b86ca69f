// The overlapped clip pipeline: readers -> one inference thread -> writers.
#include <corridorkey/pipeline.h>

#include "pipeline/dma_ring.h"
#include "runtime/engine_impl.h"
#include "runtime/frame_tensors.h"
#include "io/clip.h"
#include "io/image_io.h"
#include "post/postprocess.h"

#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

CORRIDORKEY_NAMESPACE_BEGIN

const char* to_string(PipelineEvent::Kind k) {
  switch (k) {
    case PipelineEvent::Kind::JobStarted: return "job_started";
    case PipelineEvent::Kind::ClipStarted: return "clip_started";
    case PipelineEvent::Kind::FrameDone: return "frame_done";
    case PipelineEvent::Kind::FrameSkipped: return "frame_skipped";
    case PipelineEvent::Kind::Warning: return "warning";
    case PipelineEvent::Kind::FrameFailed: return "frame_failed";
    case PipelineEvent::Kind::ClipDone: return "clip_done";
    case PipelineEvent::Kind::JobDone: return "job_done";
  }
  return "?";
}

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Bounded blocking queue; close() wakes everyone, pop() then drains and returns nullopt.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t cap) : cap_(cap) {}
  bool push(T v) {
    std::unique_lock<std::mutex> l(m_);
    not_full_.wait(l, [&] { return q_.size() < cap_ || closed_; });
    if (closed_) return false;
    q_.push_back(std::move(v));
    not_empty_.notify_one();
    return true;
  }
  std::optional<T> pop() {
    std::unique_lock<std::mutex> l(m_);
    not_empty_.wait(l, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return std::nullopt;
    T v = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return v;
  }
  void close() {
    std::lock_guard<std::mutex> l(m_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  size_t cap_;
  std::deque<T> q_;
  bool closed_ = false;
  std::mutex m_;
  std::condition_variable not_empty_, not_full_;
};

struct ClipPlan {
  io::Clip clip;
  std::vector<int> frames;     // 0-based indices to key
  std::vector<std::string> stems;
  bool linear = false;
  fs::path out;
};

struct FrameTask {
  size_t clip = 0;
  int index = 0;
};

struct ReadItem {
  size_t clip = 0;
  int index = 0;
  std::string stem, file;
  int width = 0, height = 0;
  torch::Tensor x;             // [1,4,S,S] CPU float
  double read_ms = 0, preprocess_ms = 0;
  std::string error;
  std::vector<std::string> warnings;
};

struct WriteItem {
  ReadItem meta;
  detail::DmaRing::Ticket outputs;  // model-resolution alpha / fg on their way to the host
  double infer_ms = 0;
};

/// Replaces NaN / Inf with 0; returns how many were found.
size_t sanitize(Image& im) {
  size_t bad = 0;
  for (auto& v : im.pixels)
    if (!std::isfinite(v)) {
      v = 0.f;
      ++bad;
    }
  return bad;
}

std::string zero_pad(int i, int width) {
  auto s = std::to_string(i);
  return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), '0') + s;
}

class Pipeline {
 public:
  Pipeline(BaseEngine& engine, const InferenceOptions& job,
           const std::function<void(const PipelineEvent&)>& on_event)
      : engine_(engine), impl_(EngineAccess::impl(engine)), job_(job), on_event_(on_event),
        compression_(io::parse_exr_compression(job.exr_compression)),
        dma_(impl_.device, static_cast<int>(impl_.opt.dma_buffers)) {
    CK_CHECK(job.comp_format == "png" || job.comp_format == "exr", ConfigError,
             "--comp-format: invalid value '", job.comp_format, "' (expected png or exr)");
    CK_CHECK(job.read_workers >= 1 && job.write_workers >= 1, ConfigError,
             "--read-workers / --write-workers must be >= 1");
    CK_CHECK(job.fg || job.matte || job.comp || job.processed, ConfigError,
             "--outputs: select at least one of fg, matte, comp, processed");
  }

  JobSummary run() {
    const auto t0 = Clock::now();
    plan();
    summary_.engine = impl_.info;
    emit(PipelineEvent::Kind::JobStarted, "", "", "", impl_.info.checkpoint + " on " + impl_.info.device);
    for (const auto& p : plans_)
      emit(PipelineEvent::Kind::ClipStarted, p.clip.name, "", p.clip.root,
           std::to_string(p.frames.size()) + " frames" + (p.linear ? ", linear input" : ""));
    for (const auto& d : deferred_) emit(d.kind, d.clip, d.frame, d.file, d.message);
    std::vector<std::thread> readers, writers;
    for (int i = 0; i < job_.read_workers; ++i) readers.emplace_back([this] { reader(); });
    for (int i = 0; i < job_.write_workers; ++i) writers.emplace_back([this] { writer(); });
    inference();  // on this thread
    for (auto& t : readers) t.join();
    write_q_.close();
    for (auto& t : writers) t.join();
    summary_.wall_ms = ms_since(t0);
    for (size_t c = 0; c < plans_.size(); ++c)
      emit(PipelineEvent::Kind::ClipDone, plans_[c].clip.name, "", "", "");
    emit(PipelineEvent::Kind::JobDone, "", "", "", summary_.interrupted ? "interrupted" : "");
    return summary_;
  }

 private:
  void emit(PipelineEvent::Kind k, const std::string& clip, const std::string& frame,
            const std::string& file, const std::string& msg, const PipelineEvent* timing = nullptr) {
    if (!on_event_) return;
    std::lock_guard<std::mutex> l(event_m_);
    PipelineEvent e = timing ? *timing : PipelineEvent{};
    e.kind = k;
    e.clip = clip;
    e.frame = frame;
    e.file = file;
    e.message = msg;
    e.frames_done = summary_.frames_done + summary_.frames_failed;
    e.frames_total = summary_.frames_total;
    on_event_(e);
  }

  std::vector<std::string> outputs_for(const ClipPlan& p, const std::string& stem) const {
    std::vector<std::string> v;
    if (job_.fg) v.push_back((p.out / "FG" / (stem + ".exr")).string());
    if (job_.matte) v.push_back((p.out / "Matte" / (stem + ".exr")).string());
    if (job_.processed) v.push_back((p.out / "Processed" / (stem + ".exr")).string());
    if (job_.comp) v.push_back((p.out / "Comp" / (stem + "." + job_.comp_format)).string());
    return v;
  }

  void plan() {
    const auto clips = io::discover_clips(job_.paths);
    for (const auto& c : clips) {
      ClipPlan p;
      p.clip = c;
      int n = c.input.count();
      const int nh = c.hint.count();
      if (n != nh) {
        CK_CHECK(job_.allow_mismatch, IoError, c.root, ": Input has ", n, " frames but AlphaHint has ",
                 nh, " (pair by position; --allow-mismatch truncates to the shorter)");
        deferred_.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                             "Input has " + std::to_string(n) + " frames, AlphaHint " +
                                 std::to_string(nh) + ": keying the first " +
                                 std::to_string(std::min(n, nh))});
        n = std::min(n, nh);
      }
      CK_CHECK(n > 0, IoError, c.root, ": no frames in Input");
      const bool exr = !c.input.is_video() && fs::path(c.input.frames[0]).extension() == ".exr";
      p.linear = job_.color == ColorSpace::Linear || (job_.color == ColorSpace::Auto && exr);
      if (exr && job_.color == ColorSpace::Srgb)
        deferred_.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                             "EXR plates keyed as sRGB (the reference's default); pass --linear "
                             "(or --color auto) if they are scene-linear"});
      p.out = job_.output_root.empty() ? fs::path(c.root) / "Output" : fs::path(job_.output_root) / c.name;
      for (int i = 0; i < n; ++i)
        p.stems.push_back(c.input.is_video() ? zero_pad(i, 5) : fs::path(c.input.frames[i]).stem().string());
      std::vector<int> sel;
      if (job_.frames.empty()) {
        for (int i = 0; i < n; ++i) sel.push_back(i);
      } else {
        sel = io::parse_frame_ranges(job_.frames, n);
      }
      for (const char* d : {"FG", "Matte", "Processed", "Comp"}) {
        std::error_code ec;
        fs::create_directories(p.out / d, ec);
        CK_CHECK(!ec && fs::is_directory(p.out / d), IoError, (p.out / d).string(),
                 ": output folder cannot be created (", ec ? ec.message() : "not a folder", ")");
      }
      for (int i : sel) {
        if (job_.skip_existing) {
          const auto outs = outputs_for(p, p.stems[i]);
          if (std::all_of(outs.begin(), outs.end(), io::readable_output)) {
            ++summary_.frames_skipped;
            deferred_.push_back({PipelineEvent::Kind::FrameSkipped, c.name, p.stems[i], outs.front(),
                                 "outputs exist"});
            continue;
          }
        }
        p.frames.push_back(i);
      }
      summary_.frames_total += static_cast<int>(p.frames.size());
      plans_.push_back(std::move(p));
    }
    summary_.clips = static_cast<int>(plans_.size());
    // Tasks: image sequences frame by frame (any reader); clips with a video are decoded
    // sequentially by one reader (a video cannot be read in parallel).
    for (size_t ci = 0; ci < plans_.size(); ++ci) {
      const auto& p = plans_[ci];
      if (p.clip.input.is_video() || p.clip.hint.is_video()) {
        if (!p.frames.empty()) tasks_.push_back({ci, -1});
      } else {
        for (int i : p.frames) tasks_.push_back({ci, i});
      }
    }
    readers_left_ = job_.read_workers;
  }

  bool stopping() const {
    return stop_.load() || (job_.cancel && job_.cancel->load());
  }

  std::optional<FrameTask> next_task() {
    std::lock_guard<std::mutex> l(task_m_);
    if (stopping() || next_task_ >= tasks_.size()) return std::nullopt;
    return tasks_[next_task_++];
  }

  ReadItem prepare(size_t ci, int index, Image plate, Image hint, const std::string& file,
                   double read_ms) {
    const auto& p = plans_[ci];
    ReadItem it;
    it.clip = ci;
    it.index = index;
    it.stem = p.stems[index];
    it.file = file;
    it.read_ms = read_ms;
    CK_CHECK(plate.channels >= 1, IoError, file, ": image has no channels");
    if (plate.channels < 3) {  // grey plate: replicate to RGB
      Image rgb;
      rgb.width = plate.width;
      rgb.height = plate.height;
      rgb.channels = 3;
      rgb.pixels.resize(static_cast<size_t>(plate.width) * plate.height * 3);
      for (size_t i = 0; i < rgb.pixels.size(); ++i) rgb.pixels[i] = plate.pixels[(i / 3) * plate.channels];
      plate = std::move(rgb);
    }
    if (size_t bad = sanitize(plate))
      it.warnings.push_back(file + ": " + std::to_string(bad) + " NaN/Inf samples in the plate set to 0");
    if (size_t bad = sanitize(hint))
      it.warnings.push_back(file + ": " + std::to_string(bad) + " NaN/Inf samples in the hint set to 0");
    for (auto& v : plate.pixels) v = std::max(v, 0.f);  // EXR negatives clamped (reference)
    const double ar_p = static_cast<double>(plate.width) / plate.height;
    const double ar_h = static_cast<double>(hint.width) / hint.height;
    CK_CHECK(std::fabs(ar_p / ar_h - 1.0) <= 0.01, IoError, file, ": plate ", plate.width, "x",
             plate.height, " and hint ", hint.width, "x", hint.height,
             " have different aspect ratios (a hint may differ in size, not in shape)");
    it.width = plate.width;
    it.height = plate.height;
    const auto t = Clock::now();
    it.x = detail::rethrow_torch(file + ": pre-processing", [&] {
      c10::InferenceMode guard;
      auto pt = detail::view_to_tensor(plate.view(), 3, "plate");
      auto ht = detail::view_to_tensor(hint.view(), 1, "hint");
      return detail::preprocess(pt, ht, impl_.S, p.linear, torch::kCPU);
    });
    it.preprocess_ms = ms_since(t);
    return it;
  }

  void reader() {
    while (auto task = next_task()) {
      const auto& p = plans_[task->clip];
      if (task->index >= 0) {
        ReadItem it;
        const auto& file = p.clip.input.frames[task->index];
        try {
          const auto t = Clock::now();
          Image plate = io::read_image(file);
          Image hint = io::read_image(p.clip.hint.frames[task->index]);
          it = prepare(task->clip, task->index, std::move(plate), std::move(hint), file, ms_since(t));
        } catch (const std::exception& e) {
          it.clip = task->clip;
          it.index = task->index;
          it.stem = p.stems[task->index];
          it.file = file;
          it.error = e.what();
        }
        if (!read_q_.push(std::move(it))) break;
        continue;
      }
      read_video_clip(task->clip);
    }
    std::lock_guard<std::mutex> l(task_m_);
    if (--readers_left_ == 0) read_q_.close();
  }

  void read_video_clip(size_t ci) {
    const auto& p = plans_[ci];
    std::unique_ptr<io::VideoReader> vin, vhint;
    try {
      if (p.clip.input.is_video()) vin = std::make_unique<io::VideoReader>(p.clip.input.video);
      if (p.clip.hint.is_video()) vhint = std::make_unique<io::VideoReader>(p.clip.hint.video);
    } catch (const std::exception& e) {
      ReadItem it;
      it.clip = ci;
      it.index = p.frames.front();
      it.stem = p.stems[it.index];
      it.file = p.clip.root;
      it.error = e.what();
      read_q_.push(std::move(it));
      return;
    }
    size_t k = 0;
    for (int i = 0; k < p.frames.size() && !stopping(); ++i) {
      const auto t = Clock::now();
      Image plate, hint;
      const std::string file = vin ? p.clip.input.video + "#" + std::to_string(i) : p.clip.input.frames[i];
      std::string err;
      try {
        if (vin) {
          CK_CHECK(vin->next(plate), IoError, p.clip.input.video, ": video ended at frame ", i,
                   " (container reported ", p.clip.input.count(), ")");
        } else if (i == p.frames[k]) {
          plate = io::read_image(file);
        }
        if (vhint) {
          CK_CHECK(vhint->next(hint), IoError, p.clip.hint.video, ": hint video ended at frame ", i);
        } else if (i == p.frames[k]) {
          hint = io::read_image(p.clip.hint.frames[i]);
        }
      } catch (const std::exception& e) {
        err = e.what();
      }
      if (i != p.frames[k] && err.empty()) continue;  // decoded only to advance the stream
      ReadItem it;
      if (err.empty()) {
        try {
          it = prepare(ci, i, std::move(plate), std::move(hint), file, ms_since(t));
        } catch (const std::exception& e) {
          err = e.what();
        }
      }
      if (!err.empty()) {
        it = ReadItem{};
        it.clip = ci;
        it.index = p.frames[k];
        it.stem = p.stems[it.index];
        it.file = file;
        it.error = err;
        read_q_.push(std::move(it));
        return;  // a broken stream cannot continue
      }
      ++k;
      if (!read_q_.push(std::move(it))) return;
    }
  }

  void fail(const ReadItem& it, const std::string& why) {
    {
      std::lock_guard<std::mutex> l(summary_m_);
      ++summary_.frames_failed;
      summary_.failures.push_back(why);
    }
    emit(PipelineEvent::Kind::FrameFailed, plans_[it.clip].clip.name, it.stem, it.file, why);
    if (job_.on_error == OnError::Stop) stop_ = true;
  }

  void inference() {
    while (auto item = read_q_.pop()) {
      auto& it = *item;
      for (const auto& w : it.warnings)
        emit(PipelineEvent::Kind::Warning, plans_[it.clip].clip.name, it.stem, it.file, w);
      if (!it.error.empty()) {
        fail(it, it.error);
        continue;
      }
      if (stopping()) continue;  // drain without keying
      WriteItem w;
      try {
        const auto t = Clock::now();
        auto x = impl_.device.is_cuda() ? it.x.pin_memory().to(impl_.device, /*non_blocking=*/true)
                                        : it.x.to(impl_.device);
        auto run = impl_.infer(x);
        w.outputs = dma_.start(run.alpha, run.fg);
        w.infer_ms = ms_since(t);
      } catch (const std::exception& e) {
        fail(it, it.file + ": " + e.what());
        continue;
      }
      it.x = torch::Tensor();
      w.meta = std::move(it);
      if (!write_q_.push(std::move(w))) break;
    }
    if (job_.cancel && job_.cancel->load()) summary_.interrupted = true;
  }

  void writer() {
    post::PostOptions po;
    po.despeckle = impl_.opt.despeckle;
    po.despeckle_size = static_cast<int>(impl_.opt.despeckle_size);
    po.despill_strength = static_cast<float>(impl_.opt.despill_strength);
    while (auto item = write_q_.pop()) {
      auto& w = *item;
      const auto& p = plans_[w.meta.clip];
      PipelineEvent timing;
      timing.read_ms = w.meta.read_ms;
      timing.preprocess_ms = w.meta.preprocess_ms;
      timing.infer_ms = w.infer_ms;
      try {
        Image alpha_s, fg_s;
        dma_.finish(w.outputs, alpha_s, fg_s);
        auto t = Clock::now();
        const Image alpha = post::resize_lanczos(alpha_s, w.meta.width, w.meta.height);
        const Image fg = post::resize_lanczos(fg_s, w.meta.width, w.meta.height);
        post::PostResult pr;
        if (job_.processed || job_.comp) pr = post::finish(alpha, fg, po);
        timing.postprocess_ms = ms_since(t);
        t = Clock::now();
        const auto& s = w.meta.stem;
        if (job_.fg) io::write_exr((p.out / "FG" / (s + ".exr")).string(), fg, "RGB", compression_);
        if (job_.matte) io::write_exr((p.out / "Matte" / (s + ".exr")).string(), alpha, "Y", compression_);
        if (job_.processed)
          io::write_exr((p.out / "Processed" / (s + ".exr")).string(), pr.processed, "RGBA", compression_);
        if (job_.comp) {
          const auto path = (p.out / "Comp" / (s + "." + job_.comp_format)).string();
          if (job_.comp_format == "png") io::write_png8(path, pr.comp);
          else io::write_exr(path, pr.comp, "RGB", compression_);
        }
        timing.write_ms = ms_since(t);
      } catch (const std::exception& e) {
        fail(w.meta, e.what());
        continue;
      }
      {
        std::lock_guard<std::mutex> l(summary_m_);
        ++summary_.frames_done;
        summary_.read_ms += timing.read_ms;
        summary_.preprocess_ms += timing.preprocess_ms;
        summary_.infer_ms += timing.infer_ms;
        summary_.postprocess_ms += timing.postprocess_ms;
        summary_.write_ms += timing.write_ms;
      }
      emit(PipelineEvent::Kind::FrameDone, p.clip.name, w.meta.stem, w.meta.file, "", &timing);
    }
  }

  BaseEngine& engine_;
  EngineAccess::Impl& impl_;
  InferenceOptions job_;
  std::function<void(const PipelineEvent&)> on_event_;
  io::ExrCompression compression_;
  detail::DmaRing dma_;
  std::vector<ClipPlan> plans_;
  struct Deferred {  // events found while planning, sent after job_started
    PipelineEvent::Kind kind;
    std::string clip, frame, file, message;
  };
  std::vector<Deferred> deferred_;
  std::vector<FrameTask> tasks_;
  size_t next_task_ = 0;
  int readers_left_ = 0;
  std::mutex task_m_, summary_m_, event_m_;
  std::atomic<bool> stop_{false};
  BoundedQueue<ReadItem> read_q_{4};
  BoundedQueue<WriteItem> write_q_{4};
  JobSummary summary_;
};

}  // namespace

JobSummary run_inference(const EngineOptions& engine_options, const InferenceOptions& job,
                         const std::function<void(const PipelineEvent&)>& on_event) {
  auto engine = create_engine(engine_options);
  Pipeline p(*engine, job, on_event);
  return p.run();
}

CORRIDORKEY_NAMESPACE_END
