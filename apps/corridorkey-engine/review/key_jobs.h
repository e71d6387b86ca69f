// The model side of `review`: tweaks re-post despill and despeckle on a frame keyed once by
// the loaded model (no inference after the first time, through the library's
// finish_frame(), as `serve`'s frame.repost), saved settings (a job file beside the
// outputs, applied only when given), and keys of whole clips (a profile and a screen, or
// the tweak's settings written to Processed and Comp) with progress, cancel and failures.
// Keys run one at a time on their own thread; the model's frames are keyed one at a time.
// Thread-safe.
#pragma once

#include "review/clip_library.h"
#include "review/frame_views.h"

#include <corridorkey/engine.h>
#include <corridorkey/frame.h>
#include <corridorkey/model.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace corridorkey::review {

/// The post-processing a tweak sets, as the flags spell it (despill 0..10).
struct PostTweak {
  double despill = 5;
  bool despeckle = true;
  int64_t despeckle_size = 400;
};
/// From a POST body: HttpError 400 naming a key of the wrong type; the option table's
/// checks (ConfigError) for values out of range.
PostTweak parse_tweak(const json& body, const EngineSettings& base);
/// `o` with the tweak's despill and despeckle (the option table's checks: ConfigError).
EngineSettings with_post(EngineSettings o, const PostTweak& t);
/// A number as the option tables read it, in every locale.
std::string number_text(double v);

class Keying {
 public:
  Keying(const ReviewConfig& config, const ClipLibrary& library, FrameViews& views);
  ~Keying();  // cancels the keys, waits for their frames in flight

  /// The comp (sRGB) or processed (linear premultiplied) of a frame with these settings, on
  /// the display as the views show them. The frame is keyed by the loaded model the first
  /// time (the model loads on the first tweak) and kept; later tweaks only post-process.
  /// `timings` receives key_ms (0 when kept), post_ms, display_ms.
  Pixels tweak(const ClipEntry& c, int frame, const PostTweak& t, bool comp, const ViewParams& v,
               json& timings);

  /// Writes <output>/review-settings.yaml: a job file keying the clip with these settings;
  /// returns its path and the command lines that apply it.
  json save_settings(const ClipEntry& c, const PostTweak& t, const std::string& profile);

  /// Queues a key of the clip: every output with `profile` and `screen` (auto, green,
  /// blue), or with `post` set, Processed and Comp only with those settings ("Write").
  /// Returns the job's id.
  std::string start(const ClipEntry& c, const std::string& profile, const std::string& screen,
                    const PostTweak* post);
  /// Stops a queued or running job (frames in flight finish; nothing partial is left).
  void cancel(const std::string& id);
  /// Every job: state, frames done of total, ETA, failures.
  json jobs() const;
  /// Blocks until the jobs change after `seen` (a counter), or `timeout`; returns the counter.
  uint64_t wait(uint64_t seen, std::chrono::milliseconds timeout) const;
  void stop();

 private:
  struct Job;
  struct Kept;
  void worker();
  void run(Job& j);
  void changed();
  std::shared_ptr<const Kept> keyed(const ClipEntry& c, int frame, bool* ran);

  const ReviewConfig& cfg_;
  const ClipLibrary& lib_;
  FrameViews& views_;

  std::mutex model_m_;  // the model loads once; its engine keys one frame at a time
  std::shared_ptr<const Model> model_;
  std::unique_ptr<BaseEngine> engine_;
  std::mutex kept_m_;
  std::list<std::shared_ptr<const Kept>> kept_;  // the last frames keyed for tweaks

  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // every job of this session, oldest first
  uint64_t version_ = 0;
  int next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace corridorkey::review
