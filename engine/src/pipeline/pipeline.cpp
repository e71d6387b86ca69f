// The overlapped clip pipeline: reader threads -> one inference thread -> writer threads,
// with bounded queues between them. This file orchestrates; planning, reading and writing
// live in clip_plan.cpp, frame_reader.cpp and frame_writer.cpp.
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/pipeline.h>

#include "config/input_file.h"
#include "io/clip.h"
#include "io/image_io.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/clip_colour.h"
#include "pipeline/clip_plan.h"
#include "pipeline/dma_ring.h"
#include "pipeline/frame_items.h"
#include "pipeline/frame_reader.h"
#include "pipeline/frame_stages.h"
#include "pipeline/frame_writer.h"
#include "pipeline/run.h"
#include "pipeline/run_record.h"
#include "pipeline/video_outputs.h"
#include "runtime/engine_impl.h"
#include "timing.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>

#include <sys/resource.h>
#include <unistd.h>

namespace corridorkey::pipeline {
namespace {

using timing::Clock;
using timing::ms_since;

class Pipeline {
 public:
  Pipeline(BaseEngine& engine, BlueEngineSource blue, const InferenceOptions& job,
           const std::function<void(const PipelineEvent&)>& on_event)
      : engine_(engine), impl_(EngineAccess::impl(engine)), blue_source_(std::move(blue)), job_(job),
        on_event_(on_event),
        writer_(job_, impl_.settings),
        dma_(impl_.device, static_cast<int>(impl_.settings.dma_buffers)) {
    validate_inference_options(job, "inference options");
  }

  JobSummary run() {
    const auto t0 = Clock::now();
    plan_ = plan_job(job_);
    summary_.clips = static_cast<int>(plan_.clips.size());
    summary_.frames_total = plan_.frames_total;
    summary_.frames_skipped = plan_.frames_skipped;
    summary_.failures = plan_.clips_skipped;  // the summary names clips that were left out
    summary_.engine = impl_.info;
    assign_models();  // may load the blue-screen model: before any folder is made
    make_output_folders(plan_, job_);
    make_tasks();
    {
      PipelineEvent e;
      e.kind = PipelineEvent::Kind::JobStarted;
      e.message = impl_.info.checkpoint + " on " + impl_.info.device;
      e.plan_origin = impl_.info.tune.origin;
      e.trial_ms = impl_.info.tune.trial_ms_this_run();
      emit(e);
    }
    for (const auto& p : plan_.clips) {
      PipelineEvent e;
      e.kind = PipelineEvent::Kind::ClipStarted;
      e.clip = p.clip.name;
      e.file = p.clip.root;
      e.message = std::to_string(p.frames.size()) + " frames, " + p.colour.summary() +
                  ", " + to_string(p.screen.screen) + " backing, " + p.checkpoint +
                  (p.swap_gb ? " (green and blue swapped)" : "");
      e.checkpoint = p.checkpoint;
      e.screen = to_string(p.screen.screen);
      emit(e);
    }
    for (const auto& d : plan_.events) emit(d.kind, d.clip, d.frame, d.file, d.message);

    {
      FrameReader reader(plan_.clips, plan_.decode);
      Threads threads(*this);
      readers_left_ = job_.read_workers;
      for (int i = 0; i < job_.read_workers; ++i)
        threads.readers.emplace_back([&] { guarded([&] { read_loop(reader); }, [this] { reader_done(); }); });
      for (int i = 0; i < job_.write_workers; ++i)
        threads.writers.emplace_back([this] { guarded([this] { write_loop(); }, [] {}); });
      inference_loop();  // on this thread
      threads.join();
    }
    if (!aborted()) encode_videos();
    summary_.wall_ms = ms_since(t0);
    const auto info = [this](size_t ci) -> const EngineInfo& {
      return plan_.clips[ci].engine == 1 ? blue_impl_->info : impl_.info;
    };
    for (const auto& w : records_.write(plan_, job_, info, impl_.settings, summary_.interrupted, summary_.wall_ms))
      emit(PipelineEvent::Kind::Warning, "", "", "", w);
    for (const auto& p : plan_.clips) emit(PipelineEvent::Kind::ClipDone, p.clip.name, "", "", "");
    emit(PipelineEvent::Kind::JobDone, "", "", "", summary_.interrupted ? "interrupted" : "");
    // After every thread has ended: the job stops with the library's error type, never by an
    // exception escaping a std::thread (std::terminate would take the host with it).
    std::lock_guard<std::mutex> l(abort_m_);
    if (!abort_why_.empty()) {
      if (abort_is_model_) throw ModelError(abort_why_);
      throw Error(abort_why_);
    }
    return summary_;
  }

 private:
  /// The reader and writer threads, joined however run() leaves: on an exception from the
  /// inference loop the queues are closed and the job stopped first, so no thread blocks
  /// and none is left joinable (whose destructor would call std::terminate).
  struct Threads {
    Pipeline& p;
    std::vector<std::thread> readers, writers;
    explicit Threads(Pipeline& pl) : p(pl) {}
    void join() {
      for (auto& t : readers)
        if (t.joinable()) t.join();
      p.write_q_.close();
      for (auto& t : writers)
        if (t.joinable()) t.join();
    }
    ~Threads() {
      bool any = false;
      for (auto& t : readers) any = any || t.joinable();
      for (auto& t : writers) any = any || t.joinable();
      if (!any) return;
      p.abort("the clip pipeline stopped on an internal error");
      p.read_q_.close();
      join();
    }
  };

  /// Stops the job for good: no new frames are read, keyed or written, and run() throws
  /// Error(why) once every thread has ended. The first reason wins.
  void abort(const std::string& why, bool model_error = false) {
    {
      std::lock_guard<std::mutex> l(abort_m_);
      if (abort_why_.empty()) abort_why_ = why, abort_is_model_ = model_error;
    }
    aborted_ = true;
    // Nobody stays blocked: readers on a full read queue, the inference thread on a full
    // write queue (every writer may have ended). What is still queued is dropped.
    read_q_.close();
    write_q_.close();
  }

  /// A dropped frame still gives its DMA slot back (the inference thread may be waiting
  /// for one).
  void release(WriteItem& w) {
    try {
      Image a, f;
      dma_.finish(w.outputs, a, f);
    } catch (...) {
      // Only the slot matters here; the frame is dropped anyway.
    }
  }
  bool aborted() const { return aborted_.load(); }

  /// A reader or writer thread's body: anything it throws stops the job instead of
  /// escaping the thread; `always` runs either way (a reader's share of closing the queue).
  template <class F, class G>
  void guarded(F&& body, G&& always) {
    try {
      body();
    } catch (const std::exception& e) {
      abort(std::string("clip pipeline thread: ") + e.what());
    } catch (...) {
      abort("clip pipeline thread: unknown exception");
    }
    always();
  }

  /// After the frames: videos of the clips whose sequences are now complete (not after an
  /// interruption, whose frames are incomplete by definition).
  void encode_videos() {
    if (summary_.interrupted) return;
    for (size_t ci = 0; ci < plan_.clips.size(); ++ci) {
      const auto& p = plan_.clips[ci];
      if (!p.videos.any()) continue;
      const auto r = encode_clip_videos(
          p, job_, keyed_clips_.count(ci) > 0,
          [&](PipelineEvent::Kind k, const std::string& file, const std::string& msg) {
            if (k == PipelineEvent::Kind::VideoFailed) summary_.failures.push_back(file + ": " + msg);
            emit(k, p.clip.name, "", file, msg);
          });
      summary_.videos_written += r.written;
      summary_.videos_failed += r.failed;
    }
  }

  void emit(PipelineEvent::Kind k, const std::string& clip, const std::string& frame,
            const std::string& file, const std::string& msg, const StageTimings* timings = nullptr) {
    if (!on_event_) return;
    PipelineEvent e;
    e.kind = k;
    e.clip = clip;
    e.frame = frame;
    e.file = file;
    e.message = msg;
    if (timings) e.timings = *timings;
    emit(e);
  }

  /// Calls on_event, one event at a time. A callback that throws stops the job (run()
  /// throws Error naming its exception) and is not called again: it is host code, and an
  /// exception escaping a pipeline thread would terminate the process.
  void emit(PipelineEvent& e) {
    if (!on_event_) return;
    std::lock_guard<std::mutex> l(event_m_);
    if (callback_failed_) return;
    {
      std::lock_guard<std::mutex> s(summary_m_);  // the writers change the counters under it
      e.frames_done = summary_.frames_done + summary_.frames_failed;
      e.frames_total = summary_.frames_total;
    }
    try {
      on_event_(e);
    } catch (const std::exception& x) {
      callback_failed_ = true;
      abort(std::string("on_event callback threw on ") + to_string(e.kind) + ": " + x.what());
    } catch (...) {
      callback_failed_ = true;
      abort(std::string("on_event callback threw on ") + to_string(e.kind) +
            ": an exception that is not a std::exception");
    }
  }

  /// Each clip's model: a blue backing goes to the blue-screen model when there is one
  /// (loaded here, the first time a clip with frames to key needs it), else to the main
  /// model with green and blue swapped around it.
  void assign_models() {
    for (auto& p : plan_.clips) {
      const Screen backing = p.screen.screen == Screen::Blue ? Screen::Blue : Screen::Green;
      const auto choice = choose_model(engine_, blue_source_, backing, !p.frames.empty());
      if (choice.blue_model) blue_impl_ = choice.engine;
      p.engine = choice.blue_model ? 1 : 0;
      p.model_size = choice.model_size;
      p.checkpoint = choice.checkpoint;
      p.swap_gb = choice.swap_gb;
      const auto* use = choice.engine;
      if (p.engine == 1)
        plan_.events.push_back({PipelineEvent::Kind::Warning, p.clip.name, "", p.clip.root,
                                "blue backing: keyed with the blue-screen model " + p.checkpoint +
                                    " (no channel swap)"});
      else if (p.swap_gb)
        plan_.events.push_back(
            {PipelineEvent::Kind::Warning, p.clip.name, "", p.clip.root,
             std::string(to_string(backing)) + " backing, " + to_string(use->model->options().model_screen) +
                 " model: green and blue are swapped before the model and after it" +
                 (backing == Screen::Blue ? " (checkpoint_blue / --checkpoint-blue gives a "
                                            "blue-screen model)"
                                          : "")});
      summary_.clip_models.push_back({p.clip.name, p.checkpoint, to_string(backing), p.swap_gb});
    }
  }

  /// Image sequences frame by frame (any reader); a clip with a video is one task, decoded
  /// in order by one reader (a video cannot be read in parallel).
  void make_tasks() {
    for (size_t ci = 0; ci < plan_.clips.size(); ++ci) {
      const auto& p = plan_.clips[ci];
      if (p.clip.input.is_video() || p.clip.hint.is_video() || p.mattes.has_video()) {
        if (!p.frames.empty()) tasks_.push_back({ci, -1});
      } else {
        for (int i : p.frames) tasks_.push_back({ci, i});
      }
    }
  }

  bool stopping() const { return stop_.load() || aborted() || (job_.cancel && job_.cancel->load()); }

  std::optional<FrameTask> next_task() {
    std::lock_guard<std::mutex> l(task_m_);
    if (stopping() || next_task_ >= tasks_.size()) return std::nullopt;
    return tasks_[next_task_++];
  }

  /// Readers and writers run at a lower priority: on a CPU node inference bounds the
  /// throughput, and I/O that competes with it for the cores only slows the frame down.
  void lower_priority() const {
    if (job_.io_nice > 0) (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), job_.io_nice);
  }

  void read_loop(const FrameReader& reader) {
    lower_priority();
    while (auto task = next_task()) {
      if (task->index >= 0) {
        if (!read_q_.push(reader.read_frame(task->clip, task->index))) break;
      } else {
        reader.read_video_clip(
            task->clip, [this](ReadItem it) { return read_q_.push(std::move(it)); },
            [this] { return stopping(); });
      }
    }
  }

  /// The last reader to end closes the queue (whether it ended normally or threw).
  void reader_done() {
    std::lock_guard<std::mutex> l(task_m_);
    if (--readers_left_ == 0) read_q_.close();
  }

  /// Position of a frame in the job (clips in order, then frames): what "before the
  /// failure" means for --on-error stop.
  static std::pair<size_t, int> position(const ReadItem& it) { return {it.clip, it.index}; }

  void fail(const ReadItem& it, const std::string& why) {
    {
      std::lock_guard<std::mutex> l(summary_m_);
      ++summary_.frames_failed;
      summary_.failures.push_back(why);
      if (job_.on_error == OnError::Stop && position(it) < stop_at_) stop_at_ = position(it);
    }
    records_.frame_failed(it.clip, it.index, it.stem, why);
    emit(PipelineEvent::Kind::FrameFailed, plan_.clips[it.clip].clip.name, it.stem, it.file, why);
    if (job_.on_error == OnError::Stop) stop_ = true;
  }

  /// Under --on-error stop, frames before the failing one are still keyed and written
  /// (readers may deliver them after the failure: frames are read in parallel).
  bool keep_despite_stop(const ReadItem& it) {
    if (aborted() || (job_.cancel && job_.cancel->load())) return false;
    std::lock_guard<std::mutex> l(summary_m_);
    return position(it) < stop_at_;
  }

  void inference_loop() {
    auto t_wait = Clock::now();
    while (auto item = read_q_.pop()) {
      summary_.infer_wait_ms += ms_since(t_wait);
      auto& it = *item;
      for (const auto& w : it.warnings)  // each distinct warning once per clip
        if (warned_.insert({it.clip, w}).second)
          emit(PipelineEvent::Kind::Warning, plan_.clips[it.clip].clip.name, it.stem, it.file, w);
      if (!it.error.empty()) {
        fail(it, it.error);
        t_wait = Clock::now();
        continue;
      }
      if (stopping() && !keep_despite_stop(it)) continue;  // drain without keying
      WriteItem w;
      std::vector<std::string> run_warnings;  // on_oom's steps: told even when the frame fails
      auto tell = [&] {
        for (const auto& m : run_warnings)
          emit(PipelineEvent::Kind::Warning, plan_.clips[it.clip].clip.name, it.stem, it.file, m);
      };
      try {
        const auto t = Clock::now();
        auto& model = plan_.clips[it.clip].engine == 1 ? *blue_impl_ : impl_;
        auto run = infer_frame(model, it.x, it.file, it.timings, run_warnings);
        tell();
        w.outputs = dma_.start(run.alpha, run.fg);
        it.timings.infer_ms = ms_since(t);  // with the transfers the DMA ring starts
      } catch (const std::exception& e) {
        tell();
        // Weights that changed under the run would fail every later frame the same way
        // (--on-error skip included): the job stops, as for a fault in the mapping.
        if (!model::changed_mapped_file().empty()) {
          abort(e.what(), /*model_error=*/true);
          break;
        }
        fail(it, it.file + ": " + e.what());
        t_wait = Clock::now();
        continue;
      }
      it.x = torch::Tensor();
      w.meta = std::move(it);
      t_wait = Clock::now();  // a full write queue (writers behind) is idle time too
      if (!write_q_.push(std::move(w))) break;
    }
    if (job_.cancel && job_.cancel->load()) summary_.interrupted = true;
  }

  void write_loop() {
    lower_priority();
    // EXR compression on every core (PXR24 is single-threaded per file otherwise: 3 EXRs of
    // a 3840x2160 frame took 8.8 s on 2 cores of a Xeon 6/207); the pool's threads inherit
    // this thread's lower priority, so they never slow inference down.
    io::ensure_exr_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    while (auto item = write_q_.pop()) {
      auto& w = *item;
      if (aborted()) {  // drain: a stopped job writes no more frames
        release(w);
        continue;
      }
      const auto& p = plan_.clips[w.meta.clip];
      StageTimings timings = w.meta.timings;
      try {
        Image alpha_s, fg_s;
        dma_.finish(w.outputs, alpha_s, fg_s);
        writer_.write(p, w.meta.stem, w.meta.width, w.meta.height, alpha_s, fg_s, timings, w.meta.plate,
                      w.meta.mattes);
      } catch (const std::exception& e) {
        fail(w.meta, e.what());
        continue;
      }
      {
        std::lock_guard<std::mutex> l(summary_m_);
        ++summary_.frames_done;
        keyed_clips_.insert(w.meta.clip);
        summary_.stage_sums += timings;
      }
      records_.frame_done(w.meta.clip, w.meta.index, w.meta.stem, timings);
      emit(PipelineEvent::Kind::FrameDone, p.clip.name, w.meta.stem, w.meta.file, "", &timings);
    }
  }

  BaseEngine& engine_;
  EngineAccess::Impl& impl_;
  BlueEngineSource blue_source_;  // asked by choose_model, for a clip on a blue backing
  EngineAccess::Impl* blue_impl_ = nullptr;  // the blue-screen model, once a clip needs it
  const InferenceOptions& job_;
  std::function<void(const PipelineEvent&)> on_event_;
  FrameWriter writer_;
  detail::DmaRing dma_;
  Plan plan_;
  std::vector<FrameTask> tasks_;
  size_t next_task_ = 0;
  int readers_left_ = 0;
  std::mutex task_m_, summary_m_, event_m_, abort_m_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};  // abort(): a callback or a pipeline thread threw
  std::string abort_why_;             // under abort_m_
  bool abort_is_model_ = false;       // under abort_m_: run() throws ModelError (exit 4)
  bool callback_failed_ = false;      // under event_m_
  std::pair<size_t, int> stop_at_{SIZE_MAX, INT_MAX};
  std::set<size_t> keyed_clips_;  // clips with a frame written by this run
  std::set<std::pair<size_t, std::string>> warned_;  // first failing frame (on_error stop)
  BoundedQueue<ReadItem> read_q_{4};
  BoundedQueue<WriteItem> write_q_{4};
  JobSummary summary_;
  RunRecords records_;  // run.json of each clip, written when the run ends
};

}  // namespace
}  // namespace corridorkey::pipeline

CORRIDORKEY_NAMESPACE_BEGIN

JobSummary run_inference(BaseEngine& engine, const InferenceOptions& job,
                         const std::function<void(const PipelineEvent&)>& on_event) {
  // checkpoint_blue's engine, held by `engine`: loaded by the first clip that needs it.
  return pipeline::run_pipeline(engine, pipeline::held_blue_engine(engine), job, on_event);
}

JobSummary run_inference(BaseEngine& engine, BaseEngine* blue_engine, const InferenceOptions& job,
                         const std::function<void(const PipelineEvent&)>& on_event) {
  if (!blue_engine) return run_inference(engine, job, on_event);
  return pipeline::run_pipeline(engine, [blue_engine] { return blue_engine; }, job, on_event);
}

JobSummary run_inference(const Profile& profile, const InferenceOptions& job,
                         const std::function<void(const PipelineEvent&)>& on_event) {
  validate_inference_options(job, "inference options");
  // The clip folders are listed before the model loads (and tunes): a mistyped path failed
  // after 5.3 s of loading a 380 MB checkpoint, longer on a farm node's first plan. Listing
  // them again in the run costs milliseconds.
  std::vector<std::string> skipped;  // a clips root's unreadable clip is skipped, as in the run
  io::discover_clips(job.paths, &skipped);
  (void)pipeline::resolve_job_colour(job);  // an unknown colour space name, likewise
  auto engine = create_engine(profile.model, profile.engine);
  return run_inference(*engine, job, on_event);
}

CORRIDORKEY_NAMESPACE_END

namespace corridorkey::pipeline {

BlueEngineSource held_blue_engine(BaseEngine& main) {
  const std::string& path = main.model()->options().checkpoint_blue;
  if (path.empty()) return [] { return static_cast<BaseEngine*>(nullptr); };
  std::error_code ec;
  CK_CHECK(std::filesystem::exists(path, ec), IoError, "checkpoint_blue: ", path, ": does not exist");
  if (!std::filesystem::is_directory(path, ec))  // a checkpoint folder is allowed
    config::check_input_file(path, "checkpoint_blue:");
  return [&main] { return EngineAccess::impl(main).blue_engine(); };
}

JobSummary run_pipeline(BaseEngine& engine, const BlueEngineSource& blue, const InferenceOptions& job,
                        const std::function<void(const PipelineEvent&)>& on_event) {
  Pipeline p(engine, blue, job, on_event);
  return p.run();
}

}  // namespace corridorkey::pipeline
