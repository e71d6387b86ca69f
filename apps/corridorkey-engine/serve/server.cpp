#include "serve/server_impl.h"

#include "event_stream.h"

#include <corridorkey/base/hash.h>
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>
#include <corridorkey/report_json.h>
#include <corridorkey/version.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>

namespace corridorkey::serve {

namespace {
/// The server's own lines on stderr (stdout carries the protocol in --stdio).
void say(const std::string& m) { std::fprintf(stderr, "corridorkey-engine serve: %s\n", m.c_str()); }
}  // namespace

void Conn::send(const json& j) {
  if (!ch.gone()) ch.write_line(cli::dump_lossless(j));
}

bool is_post_key(const std::string& k) {
  return k == "despill" || k == "despeckle" || k == "despeckle_size";
}

bool is_engine_key(const std::string& k) {
  static const std::set<std::string> keys = [] {
    std::set<std::string> s;
    for (const auto& f : engine_option_fields()) s.insert(f.key);
    return s;
  }();
  return keys.count(k) > 0;
}

std::string slot_key(const Profile& o, bool include_post) {
  std::string text = "model_key=" + corridorkey::model_key(o.model);
  for (const auto& f : engine_option_fields()) {
    if (f.in_model_key || (!include_post && is_post_key(f.key))) continue;
    text += "\n" + f.key + "=" + option_value(o, f.key);
  }
  text += "\nprofile=" + o.engine.profile;
  const uint64_t h = base::fnv1a64(text);
  char b[16];
  std::snprintf(b, sizeof b, "m%012llx", static_cast<unsigned long long>(h & 0xffffffffffffull));
  return b;
}

Server::Server(const ServeConfig& c, const std::atomic<bool>& stop)
    : cfg_(c), signal_(stop), cache_(static_cast<std::size_t>(std::max<int64_t>(c.cache_mb, 0)) << 20) {}

// ---- models and their workers ------------------------------------------------------

Profile Server::load_options(const json& params, const std::string& method, std::string& profile) {
  // Without "profile": the server's own options (its --profile and flags); with one: that
  // profile on the server's device and threads.
  Profile o = cfg_.base;
  if (has_param(params, "profile")) {
    o = load_profile(param_string(params, "profile", method));
    o.model.device = cfg_.base.model.device;
    o.model.threads = cfg_.base.model.threads;
  }
  profile = o.engine.profile;
  o.model.mmap = false;  // a long-lived process: a checkpoint replaced on disk must not SIGBUS it
  std::map<std::string, std::string> given;  // key -> where, so that one key is set once
  auto apply = [&](const std::string& key, const json& v, const std::string& where) {
    // "precision" is the CLI flag's name (--precision) for the profile key model_precision.
    const std::string k = key == "precision" ? "model_precision" : key;
    if (auto [it, fresh] = given.emplace(k, where); !fresh)
      throw RpcError(kInvalidParams, where + ": '" + key + "' is set twice (also in " + it->second +
                                         "): give each setting once");
    if (!is_engine_key(k))
      throw RpcError(kInvalidParams, where + ": unknown parameter '" + k +
                                         "' (expected profile, overrides, or an engine setting "
                                         "by its profile name: checkpoint, checkpoint_blue, device, "
                                         "img_size, model_precision (or precision), ...; `corridorkey-engine profiles "
                                         "show` lists them)");
    set_option(o, k, scalar_text(v, k, method), where);
  };
  for (const auto& [k, v] : params.items()) {
    if (k == "profile") continue;
    if (k == "overrides") {
      if (!v.is_object()) throw RpcError(kInvalidParams, method + ": \"overrides\" must be an object");
      for (const auto& [kk, vv] : v.items()) apply(kk, vv, method + " overrides");
      continue;
    }
    apply(k, v, method);
  }
  validate_profile(o, method);
  return o;
}

/// At most this many models at once: a client asking for one setting after another
/// (img_size 512, 520, ...) must not load engines until memory runs out. When a new one is
/// asked for with all of them held, the least recently used idle one is unloaded; with none
/// idle, the request gets a busy error. A load that fails takes no slot.
constexpr std::size_t kMaxModels = 8;

void Server::retire_locked(ModelSlot& s, const std::string& why) {
  auto it = models_.find(s.id);
  if (it == models_.end() || it->second.get() != &s) return;  // out already
  retired_.push_back(it->second);
  models_.erase(it);
  gone_[s.id] = why;
  gone_order_.push_back(s.id);
  while (gone_order_.size() > 64) {
    gone_.erase(gone_order_.front());
    gone_order_.pop_front();
  }
  {
    std::lock_guard<std::mutex> l(s.m);
    s.closing = true;
    s.retired = true;
  }
  s.cv.notify_all();
}

void Server::reap_retired(bool all) {
  std::vector<std::shared_ptr<ModelSlot>> done;
  {
    std::lock_guard<std::mutex> l(models_m_);
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (all || (*it)->ended.load()) {
        done.push_back(*it);
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : done)  // outside the lock: a worker finishing its queue may need models_m_
    if (s->worker.joinable()) s->worker.join();
}

std::shared_ptr<ModelSlot> Server::slot_for(Profile o, const std::string& profile,
                                            bool include_post) {
  const std::string id = slot_key(o, include_post);
  reap_retired(false);
  std::lock_guard<std::mutex> l(models_m_);
  if (!models_.count(id) && models_.size() >= kMaxModels) {
    std::shared_ptr<ModelSlot> lru;  // the least recently used slot with nothing to do
    for (const auto& [k, s] : models_) {
      std::lock_guard<std::mutex> ls(s->m);
      if (s->queue.empty() && s->active == 0 && (!lru || s->last_used < lru->last_used)) lru = s;
    }
    if (!lru)
      throw RpcError(kBusy, "the server holds " + std::to_string(kMaxModels) +
                                " models already, all of them busy (one per distinct checkpoint, profile "
                                "and engine settings); reuse one (its model_id), wait, or model.unload one",
                     json{{"kind", "busy"}, {"models", models_.size()}});
    retire_locked(*lru, "evicted (unloaded as the least recently used idle model, for another)");
  }
  gone_.erase(id);  // loaded again
  auto& s = models_[id];
  if (!s) {
    s = std::make_shared<ModelSlot>();
    s->id = id;
    s->profile = profile;
    s->opt = std::move(o);
    ModelSlot* raw = s.get();
    s->worker = std::thread([this, raw] { worker_loop(*raw); });
  }
  return s;
}

std::shared_ptr<ModelSlot> Server::find_slot(const std::string& id) {
  std::lock_guard<std::mutex> l(models_m_);
  auto it = models_.find(id);
  return it == models_.end() ? nullptr : it->second;
}

std::string Server::gone_reason(const std::string& id) {
  std::lock_guard<std::mutex> l(models_m_);
  auto it = gone_.find(id);
  return it == gone_.end() ? std::string() : it->second;
}

void Server::settle_model(Conn& c) {
  // A load that failed leaves the client on the model it had before (or the default): its
  // model.load's error said so. One unloaded or evicted is not replaced silently.
  if (c.model_id.empty() || find_slot(c.model_id) || gone_reason(c.model_id).rfind("failed to load", 0) != 0) return;
  c.model_id = c.previous_model_id;
  c.previous_model_id.clear();
}

std::shared_ptr<ModelSlot> Server::model_for(Conn& c, const json& params, const std::string& method,
                                             bool post_in_key) {
  auto gone = [&](const std::string& id) { return gone_reason(id); };
  settle_model(c);
  std::shared_ptr<ModelSlot> base;
  if (has_param(params, "model")) {
    const auto id = param_string(params, "model", method);
    base = find_slot(id);
    if (!base) {
      const auto why = gone(id);
      throw RpcError(kInvalidParams, method + ": no model '" + printable(id) + "'" +
                                         (why.empty() ? " (model.load returns a model_id)" : ": it " + why));
    }
  } else if (!c.model_id.empty()) {
    base = find_slot(c.model_id);
    if (!base) {
      const auto why = gone(c.model_id);
      throw RpcError(kInvalidParams, method + ": this connection's model " + c.model_id + " is gone (" +
                                         (why.empty() ? "unloaded" : why) +
                                         "); model.load it again, or name one with \"model\"");
    }
  }
  if (!base) {
    std::string profile;
    base = slot_for(load_options(json::object(), method, profile), profile);
  }
  // Engine settings among the params: the same model if they change nothing it was built
  // with, another one (loaded once, then shared) if they do.
  Profile o = base->opt;
  bool changed = false;
  for (const auto& [k, v] : params.items()) {
    if (!is_engine_key(k) || (is_post_key(k) && !post_in_key)) continue;
    set_option(o, k, scalar_text(v, k, method), method);
    changed = true;
  }
  if (!changed) return base;
  validate_profile(o, method);
  if (slot_key(o, post_in_key) == slot_key(base->opt, post_in_key)) return base;
  // clip.key with other post settings gets its own engine, keyed with them too
  return slot_for(o, base->profile, post_in_key);
}

std::shared_ptr<const Model> Server::shared_model(const ModelOptions& o, const EngineSettings& plan_for,
                                                  bool* shared) {
  const std::string key = corridorkey::model_key(o);
  // One load per key, and loads of different keys at once: the lock covers the bookkeeping
  // only, so a host loading a second checkpoint does not wait for the first one's read.
  std::shared_future<std::shared_ptr<const Model>> pending;
  std::promise<std::shared_ptr<const Model>> mine;
  {
    std::lock_guard<std::mutex> l(weights_m_);
    // A checkpoint replaced on disk is loaded again for new slots (engines at other sizes
    // read pos_embed from the file, and must not mix two checkpoints); slots already keying
    // keep the weights they have.
    if (auto m = weights_[key].lock(); m && !m->checkpoint_changed()) {
      if (shared) *shared = true;
      return m;
    }
    if (auto it = loading_.find(key); it != loading_.end()) pending = it->second;
    else loading_.emplace(key, mine.get_future().share());
  }
  if (pending.valid()) {  // another request is reading this key: its Model, or its error
    auto m = pending.get();
    if (shared) *shared = true;
    return m;
  }
  try {
    auto m = Model::load(o, plan_for);
    {
      std::lock_guard<std::mutex> l(weights_m_);
      weights_[key] = m;
      loading_.erase(key);
    }
    mine.set_value(m);
    return m;
  } catch (...) {
    {
      std::lock_guard<std::mutex> l(weights_m_);
      loading_.erase(key);
    }
    mine.set_exception(std::current_exception());
    throw;
  }
}

void Server::ensure_loaded(ModelSlot& s) {
  if (s.engine) return;
  if (s.load_failure) std::rethrow_exception(s.load_failure);  // the requests queued behind it
  try {
    load_engines(s);
  } catch (const std::exception& e) {
    s.load_failure = std::current_exception();
    std::lock_guard<std::mutex> l(models_m_);
    retire_locked(s, std::string("failed to load: ") + e.what());
    throw;
  }
}

void Server::load_engines(ModelSlot& s) {
  const auto t = Clock::now();
  bool shared = false;
  auto engine = create_engine(shared_model(s.opt.model, s.opt.engine, &shared), s.opt.engine);
  std::unique_ptr<BaseEngine> blue;
  if (!s.opt.model.checkpoint_blue.empty()) {  // blue-backed plates go to the blue-screen model
    try {  // its Model shared by key as the green one's (blue_model_options, model.h)
      blue = create_engine(shared_model(blue_model_options(s.opt.model), s.opt.engine), s.opt.engine);
    } catch (const IoError& e) {
      throw IoError(std::string("checkpoint_blue: ") + e.what());
    } catch (const ModelError& e) {
      throw ModelError(std::string("checkpoint_blue: ") + e.what());
    }
  }
  s.engine = std::move(engine);
  s.blue = std::move(blue);
  s.load_ms = ms_since(t);
  s.weights_shared = shared;
  std::lock_guard<std::mutex> l(s.m);
  s.loaded = true;
  s.info = s.engine->info();
}

json Server::load_result(ModelSlot& s, bool cached) {
  const auto& i = s.engine->info();
  json j{{"model_id", s.id},
         {"cached", cached},
         {"load_ms", cached ? 0.0 : s.load_ms},
         {"weights_shared", s.weights_shared},
         {"profile", s.profile},
         {"checkpoint", i.checkpoint},
         {"device", i.device},
         {"precision", i.precision},
         {"img_size", i.img_size},
         {"backbone_size", i.backbone_size},
         {"attention", i.attention},
         {"refiner", i.refiner}};
  if (s.blue) j["checkpoint_blue"] = s.blue->info().checkpoint;
  return j;
}

std::shared_ptr<Job> Server::enqueue(const std::shared_ptr<ModelSlot>& s, const std::shared_ptr<Conn>& c,
                                     const Request& r, std::function<json(Job&)> run) {
  auto j = std::make_shared<Job>();
  j->id = param_string(r.params, "job_id", r.method);
  if (j->id.empty()) {  // (not "j" + to_string(): g++ 12 warns falsely, -Wrestrict)
    j->id = "j";
    j->id += std::to_string(next_id_++);
  }
  j->key = std::to_string(c->serial) + "/" + j->id;
  j->conn = c;
  j->rpc_id = r.id;
  j->reply = r.has_id;
  j->run = std::move(run);
  {
    std::lock_guard<std::mutex> l(jobs_m_);
    auto& slot = jobs_[j->key];
    if (auto old = slot.lock())
      throw RpcError(kInvalidParams, r.method + ": job_id '" + j->id + "' is already queued or running");
    slot = j;
  }
  {
    std::lock_guard<std::mutex> l(s->m);
    if (s->closing || static_cast<int>(s->queue.size()) >= cfg_.queue_limit) {
      std::lock_guard<std::mutex> lj(jobs_m_);
      jobs_.erase(j->key);
      if (s->retired)
        throw RpcError(kInvalidParams, r.method + ": model " + s->id + " left the server as this request came "
                                                  "(unloaded, evicted or failed to load); model.load it again");
      if (s->closing) throw RpcError(kCancelled, r.method + ": the server is stopping");
      throw RpcError(kBusy, r.method + ": model " + s->id + " has " + std::to_string(s->queue.size()) +
                                " requests waiting (--queue-limit " + std::to_string(cfg_.queue_limit) +
                                "); retry later",
                     json{{"kind", "busy"}, {"queued", s->queue.size()}});
    }
    s->queue.push_back(j);
  }
  s->cv.notify_one();
  return j;
}

void Server::finish_job(Job& j, const json* result, const std::exception* error) {
  {
    std::lock_guard<std::mutex> l(jobs_m_);
    auto it = jobs_.find(j.key);
    if (it != jobs_.end() && it->second.lock().get() == &j) jobs_.erase(it);
  }
  if (!j.reply) return;
  if (result) j.conn->send(result_reply(j.rpc_id, *result));
  else j.conn->send(error_reply(j.rpc_id, *error));
}

void Server::worker_loop(ModelSlot& s) {
  for (;;) {
    std::shared_ptr<Job> j;
    {
      std::unique_lock<std::mutex> l(s.m);
      s.cv.wait(l, [&] { return s.closing || !s.queue.empty(); });
      if (s.queue.empty()) break;  // closing, and every request received has been answered
      j = s.queue.front();
      s.queue.pop_front();
      s.active = 1;
    }
    // The slot is idle (and its use time set) before the reply goes out: a client that
    // sends its next request on the reply must find it idle, or the LRU picks another.
    struct Idle {  // however the job ends
      ModelSlot& s;
      bool done = false;
      void now() {
        if (done) return;
        done = true;
        std::lock_guard<std::mutex> l(s.m);
        s.active = 0;
        s.last_used = Clock::now();
      }
      ~Idle() { now(); }
    } idle{s};
    if (j->cancelled()) {
      const RpcError e(kCancelled, "job " + j->id + " cancelled before it started" +
                                       (signalled_ ? " (the server is stopping)" : ""));
      finish_job(*j, nullptr, &e);
      continue;
    }
    j->running = true;
    try {
      const json result = j->run(*j);
      idle.now();
      finish_job(*j, &result, nullptr);
    } catch (const std::exception& e) {
      idle.now();
      finish_job(*j, nullptr, &e);
    } catch (...) {
      idle.now();
      const RpcError e(kInternal, "job " + j->id + ": an exception that is not a std::exception");
      finish_job(*j, nullptr, &e);
    }
  }
  // An unloaded or evicted model frees its engines now, not when the server exits.
  bool retired = false;
  {
    std::lock_guard<std::mutex> l(s.m);
    retired = s.retired;
  }
  if (retired) {
    s.blue.reset();
    s.engine.reset();
  }
  s.ended = true;
}

void Server::cancel_jobs(const std::function<bool(Job&)>& which, bool stop_running_clips) {
  std::lock_guard<std::mutex> l(jobs_m_);
  for (auto& [id, w] : jobs_)
    if (auto j = w.lock(); j && which(*j)) {
      if (!j->running) j->cancel = true;  // not started: it will not start
      else if (stop_running_clips) j->stop_clip = true;
    }
}

// ---- requests -------------------------------------------------------------------------

json Server::engine_info() {
  json models = json::array();
  {
    std::lock_guard<std::mutex> l(models_m_);
    for (const auto& [id, s] : models_) {
      std::lock_guard<std::mutex> ls(s->m);
      json m{{"model_id", id}, {"profile", s->profile}, {"loaded", s->loaded}, {"queued", s->queue.size()},
             {"checkpoint", s->loaded ? s->info.checkpoint : s->opt.model.checkpoint}};
      if (s->loaded) m["info"] = cli::raw_json(engine_info_json(s->info));  // Engine.info()'s fields
      models.push_back(m);
    }
  }
  return {{"version", version_string()},
          {"protocol", 1},
          {"pid", static_cast<int64_t>(::getpid())},
          {"listen", cfg_.listen},
          {"uptime_s", ms_since(started_) / 1000},
          {"default_checkpoint", default_checkpoint()},
          {"default_profile", cfg_.base.engine.profile},
          {"profiles", builtin_profiles()},
          {"methods", {"engine.info", "model.load", "model.unload", "frame.key", "frame.repost", "clip.key",
                       "job.cancel", "server.shutdown"}},
          {"models", models},
          {"cache", {{"frames", cache_.frames()}, {"mb", cache_.used_bytes() / 1048576.0},
                     {"limit_mb", cache_.limit_bytes() >> 20}}},
          {"limits", {{"max_request_bytes", cfg_.max_request_bytes}, {"queue_limit", cfg_.queue_limit}}}};
}

json Server::model_unload(const json& params) {
  const auto id = param_string(params, "model_id", "model.unload");
  if (id.empty()) throw RpcError(kInvalidParams, "model.unload: \"model_id\" is required (model.load returns it)");
  for (const auto& [k, v] : params.items())
    if (k != "model_id") throw RpcError(kInvalidParams, "model.unload: unknown parameter '" + printable(k) + "'");
  std::lock_guard<std::mutex> l(models_m_);
  auto it = models_.find(id);
  if (it == models_.end()) {
    auto g = gone_.find(id);
    throw RpcError(kInvalidParams, "model.unload: no model '" + printable(id) + "'" +
                                       (g == gone_.end() ? "" : ": it " + g->second));
  }
  auto s = it->second;
  std::size_t queued = 0;
  bool running = false;
  {
    std::lock_guard<std::mutex> ls(s->m);
    queued = s->queue.size();
    running = s->active > 0;
  }
  retire_locked(*s, "unloaded (model.unload)");
  return {{"model_id", id}, {"unloaded", true}, {"queued", queued}, {"running", running}};
}

json Server::job_cancel(const Conn& c, const json& params) {
  const auto id = param_string(params, "job_id", "job.cancel");
  if (id.empty()) throw RpcError(kInvalidParams, "job.cancel: \"job_id\" is required");
  std::lock_guard<std::mutex> l(jobs_m_);
  auto it = jobs_.find(std::to_string(c.serial) + "/" + id);  // this client's jobs only
  auto j = it == jobs_.end() ? nullptr : it->second.lock();
  if (!j) throw RpcError(kInvalidParams, "job.cancel: no job '" + id + "' of this client is queued or running");
  const bool running = j->running.load();
  j->cancel = true;
  j->stop_clip = true;
  return {{"job_id", id}, {"cancelled", true}, {"state", running ? "running" : "queued"}};
}

void Server::dispatch(const std::shared_ptr<Conn>& c, const Request& r) {
  auto reply = [&](json result) {
    if (r.has_id) c->send(result_reply(r.id, std::move(result)));
  };
  const auto& m = r.method;
  if (!c->authed) {
    if (m != "server.auth") {
      c->drop = true;
      throw RpcError(kUnauthorized, m + ": unauthorized; the first request on a TCP connection is "
                                        "server.auth with the token from the server's token file");
    }
    const auto token = param_string(r.params, "token", m);
    if (!same_token(token, token_)) {
      c->drop = true;
      throw RpcError(kUnauthorized, "server.auth: wrong token");
    }
    c->authed = true;
    return reply({{"authenticated", true}});
  }
  if (m == "server.auth") return reply({{"authenticated", true}});
  if (m == "engine.info") return reply(engine_info());
  if (m == "job.cancel") return reply(job_cancel(*c, r.params));
  if (m == "server.shutdown") {
    halt_ = true;
    return reply({{"stopping", true}});
  }
  if (m == "frame.repost") return reply(frame_repost(r.params));
  if (m == "model.unload") return reply(model_unload(r.params));
  if (m == "model.load") {
    settle_model(*c);
    std::string profile;
    auto s = slot_for(load_options(r.params, m, profile), profile);
    if (c->model_id != s->id) c->previous_model_id = c->model_id;
    c->model_id = s->id;  // this client's frame.key now defaults to it (if it loads)
    const std::string previous = c->previous_model_id;
    enqueue(s, c, r, [this, s, previous](Job&) {
      const bool cached = s->engine != nullptr;
      try {
        ensure_loaded(*s);
      } catch (const std::exception& e) {
        // The client is told which model its frame.key now runs on: the model it had
        // before, or the server's default; the failed one took no slot.
        json err = error_object(e);
        json data = err.contains("data") ? err["data"] : json::object();
        data["model_id"] = nullptr;
        data["keys_with"] = previous.empty() ? json("default") : json(previous);
        throw RpcError(err["code"].get<int>(),
                       err["message"].get<std::string>() + " (model " + s->id + " was not loaded and takes no "
                           "slot; this connection keys with " +
                           (previous.empty() ? std::string("the server's default model") : "its previous model " + previous) +
                           ")",
                       data);
      }
      return load_result(*s, cached);
    });
    return;
  }
  if (m == "frame.key") {
    auto s = model_for(*c, r.params, m, /*post_in_key=*/false);
    enqueue(s, c, r, frame_key(r.params, s));
    return;
  }
  if (m == "clip.key") {
    auto s = model_for(*c, r.params, m, /*post_in_key=*/true);
    enqueue(s, c, r, clip_key(r.params, s));
    return;
  }
  throw RpcError(kMethodNotFound, "unknown method '" + printable(m) +
                                      "' (engine.info, model.load, model.unload, frame.key, frame.repost, "
                                      "clip.key, job.cancel, server.shutdown)");
}

void Server::handle(const std::shared_ptr<Conn>& c, const std::string& line) {
  json id;  // null until the request's id could be read
  bool has_id = true;
  try {
    const Request r = parse_request(line, &id);
    has_id = r.has_id;
    dispatch(c, r);
  } catch (const std::exception& e) {
    if (has_id) c->send(error_reply(id, e));  // a notification gets no reply, even an error
    if (!c->authed) c->drop = true;           // TCP: anything but server.auth first ends it
  }
}

void Server::read_loop(const std::shared_ptr<Conn>& c, bool stdio) {
  std::string line;
  for (;;) {
    const auto r = c->ch.read_line(line, halt_);
    if (r == LineChannel::Read::TooLong) {
      c->send(error_reply(nullptr, kInvalidRequest,
                          "request line longer than " + std::to_string(cfg_.max_request_bytes) +
                              " bytes (--max-request-mb): skipped; put pixels in shared memory"));
      continue;
    }
    if (r != LineChannel::Read::Line) {
      if (r == LineChannel::Read::Eof && !stdio) {
        // A socket client went away: its waiting and running work is cancelled (a frame
        // being keyed finishes but writes nothing; a clip stops after its frames in flight).
        c->closed = true;
        c->ch.mark_gone();
        cancel_jobs([&](Job& j) { return j.conn == c; }, /*stop_running_clips=*/true);
      }
      return;
    }
    handle(c, line);
    if (c->drop) {
      c->closed = true;
      c->ch.mark_gone();
      return;
    }
  }
}

void Server::watch_signal() {
  while (!done_) {
    if (signal_.load()) {
      signalled_ = true;
      halt_ = true;
      // Waiting work is cancelled, clips stop after their frames in flight, frames being
      // keyed finish and are written.
      cancel_jobs([](Job&) { return true; }, /*stop_running_clips=*/true);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Server::reap_readers(std::vector<Reader>& readers) {
  // A reader whose client has gone is joined now, not at shutdown: a daemon that serves
  // thousands of connections keeps only the live ones.
  for (auto it = readers.begin(); it != readers.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = readers.erase(it);
    } else {
      ++it;
    }
  }
}

int Server::run() {
  std::thread watcher([this] { watch_signal(); });
  std::vector<Reader> readers;
  std::string unix_path;
  auto stop_all = [&] {
    halt_ = true;
    for (auto& r : readers) r.thread.join();
    std::vector<std::shared_ptr<ModelSlot>> slots;
    {
      std::lock_guard<std::mutex> l(models_m_);
      for (auto& [id, s] : models_) slots.push_back(s);
      for (auto& s : retired_) slots.push_back(s);  // unloaded ones still answering their queue
      retired_.clear();
    }
    for (auto& s : slots) {  // every request received is answered, then the worker ends
      {
        std::lock_guard<std::mutex> l(s->m);
        s->closing = true;
      }
      s->cv.notify_all();
      if (s->worker.joinable()) s->worker.join();
    }
    done_ = true;
    watcher.join();
    if (!unix_path.empty()) ::unlink(unix_path.c_str());
  };
  try {
    if (cfg_.listen == "stdio") {
      // The protocol gets a private copy of stdout, and fd 1 becomes stderr: a line that a
      // library prints to stdout (a oneDNN or OpenCV diagnostic) lands in the log instead of
      // corrupting the client's stream.
      const int proto = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
      CK_CHECK(proto >= 0, IoError, "serve --stdio: cannot duplicate stdout");
      std::fflush(stdout);
      ::dup2(STDERR_FILENO, STDOUT_FILENO);
      auto c = std::make_shared<Conn>(STDIN_FILENO, proto, cfg_.max_request_bytes, false, false);
      c->serial = next_conn_++;
      say("JSON-RPC 2.0 on stdin/stdout, one request per line");
      read_loop(c, /*stdio=*/true);
    } else {
      int fd = -1;
      bool tcp = false;
      if (cfg_.listen.rfind("unix:", 0) == 0) {
        const auto path = cfg_.listen.substr(5);
        fd = listen_unix(path);
        unix_path = path;  // ours to remove at exit only once bound (never a refused path)
        say("listening on unix:" + unix_path + " (mode 0600)");
      } else if (cfg_.listen.rfind("tcp:", 0) == 0) {
        const auto hp = cfg_.listen.substr(4);
        const auto colon = hp.rfind(':');
        CK_CHECK(colon != std::string::npos, ConfigError, "--listen ", cfg_.listen,
                 ": expected tcp:127.0.0.1:PORT");
        int port = -1;
        try {
          size_t used = 0;
          port = std::stoi(hp.substr(colon + 1), &used);
          if (used != hp.size() - colon - 1) port = -1;
        } catch (const std::exception&) {
        }
        CK_CHECK(port >= 0, ConfigError, "--listen ", cfg_.listen, ": the port is not a number");
        CK_CHECK(!cfg_.token_file.empty(), ConfigError, "--listen tcp: needs --token-file PATH (the token "
                                                        "clients send in server.auth is written there, mode 0600)");
        int bound = 0;
        fd = listen_tcp(hp.substr(0, colon), port, &bound);
        tcp = true;
        try {
          token_ = write_token_file(cfg_.token_file);
        } catch (...) {
          ::close(fd);
          throw;
        }
        say("listening on tcp:" + hp.substr(0, colon) + ":" + std::to_string(bound) +
                                " (token in " + cfg_.token_file + ")");
      } else {
        throw ConfigError("--listen " + cfg_.listen + ": expected stdio, unix:PATH or tcp:127.0.0.1:PORT");
      }
      while (!halt_) {
        reap_readers(readers);
        const int cfd = accept_client(fd);
        if (cfd < 0) continue;
        auto c = std::make_shared<Conn>(cfd, cfd, cfg_.max_request_bytes, true, tcp);
        c->serial = next_conn_++;
        auto done = std::make_shared<std::atomic<bool>>(false);
        readers.push_back({std::thread([this, c, done] {
                             read_loop(c, false);
                             *done = true;
                           }),
                           done});
      }
      ::close(fd);
    }
  } catch (...) {
    stop_all();
    throw;
  }
  stop_all();
  return signalled_ ? 130 : 0;
}

int run_server(const ServeConfig& config, const std::atomic<bool>& stop) {
  Server s(config, stop);
  return s.run();
}

}  // namespace corridorkey::serve
