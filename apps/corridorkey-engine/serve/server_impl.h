// serve's state, shared by server.cpp (connections, dispatch, models, lifetime) and
// frame_methods.cpp (frame.key, frame.repost, clip.key).
#pragma once

#include "serve/channel.h"
#include "serve/raw_cache.h"
#include "serve/rpc.h"
#include "serve/server.h"
#include "serve/shm.h"

#include <corridorkey/base/timing.h>
#include <corridorkey/engine.h>
#include <corridorkey/frame.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace corridorkey::serve {

using json = nlohmann::json;
using timing::Clock;
using timing::ms_since;

/// One client: its channel, the model its model.load chose, whether it may call (TCP).
struct Conn {
  Conn(int in, int out, std::size_t max, bool owns, bool needs_auth)
      : ch(in, out, max, owns), authed(!needs_auth) {}
  LineChannel ch;
  uint64_t serial = 0;           // jobs are keyed "<serial>/<job_id>": a client sees only its own
  std::string model_id;          // reader thread only: the model its model.load chose
  std::string previous_model_id; // reader thread only: the one before, if that load fails
  bool authed;                   // reader thread only
  bool drop = false;             // reader thread only: close after this request
  std::atomic<bool> closed{false};  // a socket client went away: its work is cancelled
  void send(const json& j);
};

/// A request waiting in, or running on, a model's worker.
struct Job {
  std::string id;   // the client's job_id
  std::string key;  // "<conn serial>/<id>" in Server::jobs_
  std::shared_ptr<Conn> conn;
  json rpc_id;
  bool reply = true;                 // false for a JSON-RPC notification (no id)
  std::atomic<bool> cancel{false};   // job.cancel / disconnect / stop: do not start, do not write
  std::atomic<bool> stop_clip{false};  // clip.key: the pipeline's cancel flag
  std::atomic<bool> running{false};
  Clock::time_point queued_at = Clock::now();
  std::function<json(Job&)> run;
  bool cancelled() const { return cancel.load() || conn->closed.load(); }
};

/// A loaded (or loading) model: its options, its engines and the queue its worker drains.
struct ModelSlot {
  std::string id, profile;
  Profile opt;  // fixed at creation
  // Worker thread only:
  std::unique_ptr<BaseEngine> engine, blue;
  double load_ms = 0;
  bool weights_shared = false;  // the engine runs on a Model another slot had loaded
  // Guarded by m:
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  bool closing = false;
  bool retired = false;  // unloaded, evicted or failed: out of Server::models_, worker ending
  bool loaded = false;
  int active = 0;        // jobs running on the worker now (0 or 1)
  Clock::time_point last_used = Clock::now();
  EngineInfo info;
  std::thread worker;
  std::atomic<bool> ended{false};  // the worker has returned: the thread may be joined
  // Worker thread only: the load's failure, rethrown to the jobs queued behind it (the
  // checkpoint is not read again for each of them).
  std::exception_ptr load_failure;
};

/// An image parameter: a path, or a shared-memory block.
struct ImageArg {
  std::string path;
  std::optional<ShmImage> shm;
  bool given() const { return !path.empty() || shm.has_value(); }
  std::string name() const { return shm ? "shm:" + shm->name : path; }
};
struct OutputArg {
  FrameOutput kind = FrameOutput::Matte;
  /// The layered EXR (Processed, FG and the matte in one file; write_layered_output): `kind`
  /// is unused, `where` a path (never shared memory).
  bool layered = false;
  ImageArg where;
  const char* name() const { return layered ? "layered" : to_string(kind); }
};

/// A connection's reader thread and whether it has ended (then it is joined).
struct Reader {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done;
};

class Server {
 public:
  Server(const ServeConfig& c, const std::atomic<bool>& stop);
  int run();

 private:
  // server.cpp
  void read_loop(const std::shared_ptr<Conn>& c, bool stdio);
  void handle(const std::shared_ptr<Conn>& c, const std::string& line);
  void dispatch(const std::shared_ptr<Conn>& c, const Request& r);
  void watch_signal();
  static void reap_readers(std::vector<Reader>& readers);
  json engine_info();
  json job_cancel(const Conn& c, const json& params);
  /// model.unload: the slot leaves the server; its queued requests are still answered.
  json model_unload(const json& params);
  /// Takes `s` out of models_ (models_m_ held): it takes no slot from then on, its worker
  /// answers what is queued and ends, and its engines are freed on the worker.
  void retire_locked(ModelSlot& s, const std::string& why);
  /// Joins the workers of retired slots that have ended (all of them when `all`).
  void reap_retired(bool all);
  /// The model of these options (post-processing settings part of its identity only when
  /// include_post), created with its worker on first use; at most kMaxModels.
  std::shared_ptr<ModelSlot> slot_for(Profile o, const std::string& profile,
                                      bool include_post = false);
  std::shared_ptr<ModelSlot> find_slot(const std::string& id);
  /// Why a model_id left the server ("" when it did not, or the reason was forgotten).
  std::string gone_reason(const std::string& id);
  /// The connection's model after a failed model.load: the one it had before (or none).
  void settle_model(Conn& c);
  /// model.load's options: profile + engine settings (top level or in "overrides").
  Profile load_options(const json& params, const std::string& method, std::string& profile);
  /// The model a frame.key / clip.key runs on: "model", else the client's, else the default,
  /// changed by any engine settings among the params (a new model when they differ).
  std::shared_ptr<ModelSlot> model_for(Conn& c, const json& params, const std::string& method,
                                       bool post_in_key);
  std::shared_ptr<Job> enqueue(const std::shared_ptr<ModelSlot>& s, const std::shared_ptr<Conn>& c,
                               const Request& r, std::function<json(Job&)> run);
  void worker_loop(ModelSlot& s);
  void finish_job(Job& j, const json* result, const std::exception* error);
  void cancel_jobs(const std::function<bool(Job&)>& which, bool stop_running_clips);
  /// The slot's engines, loaded on first use; a failure is kept (rethrown to the requests
  /// queued behind it) and takes the slot out of the server.
  void ensure_loaded(ModelSlot& s);
  void load_engines(ModelSlot& s);
  /// The Model of these options' model_key(): loaded once, then shared by every slot whose
  /// options differ only in per-engine fields (post-processing, refiner, compile mode).
  /// `shared`: set when it was loaded already.
  std::shared_ptr<const Model> shared_model(const ModelOptions& o, const EngineSettings& plan_for,
                                             bool* shared = nullptr);
  static json load_result(ModelSlot& s, bool cached);

  // frame_methods.cpp
  std::function<json(Job&)> frame_key(const json& params, const std::shared_ptr<ModelSlot>& s);
  json frame_repost(const json& params);
  std::function<json(Job&)> clip_key(const json& params, const std::shared_ptr<ModelSlot>& s);

  ServeConfig cfg_;
  const std::atomic<bool>& signal_;
  std::atomic<bool> halt_{false};        // readers stop (signal, shutdown)
  std::atomic<bool> signalled_{false};
  std::atomic<bool> done_{false};
  std::string token_;
  std::mutex models_m_;
  std::map<std::string, std::shared_ptr<ModelSlot>> models_;
  std::vector<std::shared_ptr<ModelSlot>> retired_;  // under models_m_: workers to join
  // Under models_m_: why a model_id left the server ("failed to load: ...", "unloaded",
  // "evicted ..."), for the clients that still name it (bounded: the last 64).
  std::map<std::string, std::string> gone_;
  std::deque<std::string> gone_order_;
  std::mutex weights_m_;  // guards weights_ and loading_ (not held while a Model loads)
  std::map<std::string, std::weak_ptr<const Model>> weights_;  // by corridorkey::model_key
  // Loads in progress, by key: a second request for the key waits on the first one's
  // future, so one key is never read twice while other keys load at the same time.
  std::map<std::string, std::shared_future<std::shared_ptr<const Model>>> loading_;
  std::mutex jobs_m_;
  std::map<std::string, std::weak_ptr<Job>> jobs_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> next_conn_{1};
  RawCache cache_;
  // frame.repost's processed / comp buffers, reused while the frames keep one size (58 MB
  // at 1920x1080): a slider's reposts allocate nothing. A second repost running at once on
  // another connection finds it locked and allocates its own.
  std::mutex repost_scratch_m_;
  FinishedFrame repost_scratch_;
  const Clock::time_point started_ = Clock::now();
};

/// Keys of EngineSettings that post-processing reads (per frame in frame.key / frame.repost).
bool is_post_key(const std::string& key);
bool is_engine_key(const std::string& key);
/// A slot's identity, the model_id clients see: "m" + 12 hex digits of the public
/// model_key(options.model) (which weights) and every field outside it (the engine's
/// settings, checkpoint_blue, tune_cache, the process-wide ones), post-processing settings
/// aside unless include_post. Not the Model's key: slots of one Model share its weights.
std::string slot_key(const Profile& options, bool include_post);

}  // namespace corridorkey::serve
