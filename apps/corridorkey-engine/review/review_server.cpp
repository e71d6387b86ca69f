// The HTTP side of `review`: one gate in front of every route (loopback Host, the token,
// the Origin of POSTs, bounded requests), then the page's files and its JSON / PNG API, and
// the keys' progress as server-sent events.
// Routes take clip ids and frame indexes, never paths, except /raw/, whose paths are
// resolved under a root and checked (clip_library.h).
#include "review/review_server.h"

#include "review/assets.h"
#include "review/clip_library.h"
#include "review/frame_views.h"
#include "review/http_guard.h"
#include "review/json_input.h"
#include "review/key_jobs.h"
#include "serve/channel.h"

#include <corridorkey/check.h>
#include <corridorkey/colour.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <httplib.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace corridorkey::review {
namespace {

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::string param(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) throw HttpError(400, std::string("missing parameter '") + name + "'");
  return req.get_param_value(name);
}

double number(const httplib::Request& req, const char* name, double dflt) {
  if (!req.has_param(name)) return dflt;
  const auto t = req.get_param_value(name);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end || !std::isfinite(v))
    throw HttpError(400, std::string("parameter '") + name + "' is not a number");
  return v;
}

/// A file descriptor closed with its last owner (a streamed answer outlives its handler).
struct Descriptor {
  int fd;
  explicit Descriptor(int f) : fd(f) {}
  ~Descriptor() { ::close(fd); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};

/// A pixel coordinate (-1 when absent): an integer a frame can have, else HttpError 400
/// (a cast of a huge or fractional value to int would be undefined or silently moved).
int coordinate(const httplib::Request& req, const char* name) {
  const double v = number(req, name, -1);
  if (v != std::floor(v) || v < -1 || v > 1 << 20)
    throw HttpError(400, std::string("parameter '") + name + "' is not a pixel coordinate");
  return static_cast<int>(v);
}

class Review {
 public:
  Review(const ReviewConfig& c, const std::atomic<bool>& stop)
      : cfg_(c), stop_(stop), lib_(c), views_(lib_, c.cache_mb << 20), keying_(c, lib_, views_),
        token_(serve::random_token()) {}

  int run() {
    const Listen l = parse_listen(cfg_.listen);
    // Connections are accepted and their request heads read, with limits, by the guard
    // (http_guard.h), not by httplib. Workers for the token holder: the page loads a handful
    // of previews at once, and an event stream holds one for as long as it is open (at most
    // kStreams).
    GuardLimits limits;
    limits.trusted_threads = 8 + kStreams;
    GuardedServer svr(limits);
    svr.set_payload_max_length(cfg_.max_body_bytes);
    svr.set_keep_alive_max_count(limits.max_requests_per_connection);  // what the answers say
    svr.set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits.keep_alive).count());
    svr.set_default_headers({
        {"X-Content-Type-Options", "nosniff"},
        {"X-Frame-Options", "DENY"},
        {"Referrer-Policy", "no-referrer"},  // the token never leaves in a Referer header
        {"Cache-Control", "no-store"},
        {"Content-Security-Policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
         "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    });
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return gate(req, res) ? httplib::Server::HandlerResponse::Unhandled
                            : httplib::Server::HandlerResponse::Handled;
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      try {
        std::rethrow_exception(ep);
      } catch (const HttpError& e) {
        send_json(res, {{"error", e.what()}}, e.status);
      } catch (const ConfigError& e) {
        send_json(res, {{"error", e.what()}}, 400);
      } catch (const std::exception& e) {
        send_json(res, {{"error", e.what()}}, 500);
      }
    });
    svr.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) send_json(res, {{"error", "status " + std::to_string(res.status)}}, res.status);
    });
    routes(svr);
    edit_routes(svr);

    port_ = svr.listen_on(l.host, l.port);
    CK_CHECK(port_ > 0, IoError, "--listen ", cfg_.listen, ": cannot bind (", std::strerror(errno), ")");
    origin_host_ = l.host == "::1" ? "[::1]:" + std::to_string(port_) : l.host + ":" + std::to_string(port_);
    cookie_name_ = "ck_review_" + std::to_string(port_);  // cookies are per host, not per port
    // The conversions every preview uses are built before the first request needs them.
    srgb_to_linear();
    linear_to_display(cfg_.ocio_config, "");
    std::cout << "http://" << origin_host_ << "/?token=" << token_ << std::endl;
    std::thread server([&] { svr.serve([this](const std::string& head) { return trusted(head); }); });
    // The page opens on the first clip's first plate: made while the browser starts.
    std::thread warm([this] {
      try {
        const auto clips = lib_.list()["clips"];
        if (!clips.empty()) views_.png(*lib_.find(clips[0]["id"].get<std::string>()), 0, ViewParams{});
      } catch (const std::exception&) {
        // The page asks again, and shows the error then.
      }
    });
    while (!stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Event streams end, keys stop after their frames in flight (nothing partial), then the
    // server closes.
    stopping_ = true;
    keying_.stop();
    svr.shutdown();
    server.join();
    warm.join();
    return 130;
  }

 private:
  /// Whether a request head carries the token (the cookie, or the printed URL's query): the
  /// guard keeps workers for those. The gate checks every request again.
  bool trusted(const std::string& head) const {
    const auto c = cookie(head_header(head, "Cookie"), cookie_name_);
    if (!c.empty() && serve::same_token(c, token_)) return true;
    const size_t end = head.find(' ', 4);
    if (head.compare(0, 6, "GET /?") != 0 || end == std::string::npos) return false;
    std::stringstream q(head.substr(6, end - 6));
    for (std::string kv; std::getline(q, kv, '&');)
      if (kv.rfind("token=", 0) == 0 && serve::same_token(kv.substr(6), token_)) return true;
    return false;
  }

  /// True when the request may go on; else the 403 is written (no file content).
  bool gate(const httplib::Request& req, httplib::Response& res) {
    auto refuse = [&](int status, const std::string& why) {
      send_json(res, {{"error", why}}, status);
      return false;
    };
    // DNS rebinding: a page of another site whose name resolves to 127.0.0.1 sends its own
    // name as Host; only this server's loopback address (or localhost) is answered.
    const auto host = req.get_header_value("Host");
    const std::string port = std::to_string(port_);
    if (host != origin_host_ && host != "localhost:" + port)
      return refuse(403, "forbidden: Host '" + host + "' is not this server's loopback address");
    if (req.method != "GET" && req.method != "POST" && req.method != "HEAD")
      return refuse(405, "method " + req.method + " not allowed");
    const auto from_cookie = cookie(req.get_header_value("Cookie"), cookie_name_);
    const bool cookie_ok = !from_cookie.empty() && serve::same_token(from_cookie, token_);
    const bool query_ok = req.method == "GET" && req.path == "/" && req.has_param("token") &&
                          serve::same_token(req.get_param_value("token"), token_);
    if (!cookie_ok && !query_ok)
      return refuse(403, "forbidden: open the URL that `corridorkey-engine review` printed (it carries the token)");
    if (req.method == "POST") {
      // A state change needs the cookie (SameSite=Strict: never sent by another site's page)
      // and an Origin naming this server.
      const auto origin = req.get_header_value("Origin");
      if (!cookie_ok || (origin != "http://" + origin_host_ && origin != "http://localhost:" + port))
        return refuse(403, "forbidden: a POST needs this page's Origin and cookie");
      if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
        return refuse(415, "POST bodies are application/json");
    }
    return true;
  }

  void routes(httplib::Server& svr) {
    svr.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.has_param("token")) {  // the token moves into the cookie and out of the URL
        res.set_header("Set-Cookie", cookie_name_ + "=" + token_ + "; Path=/; HttpOnly; SameSite=Strict");
        res.set_redirect("/", 303);
        return;
      }
      asset(res, "index.html");
    });
    svr.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
    svr.Get("/assets/([A-Za-z0-9_.-]+)", [](const httplib::Request& req, httplib::Response& res) {
      asset(res, req.matches[1]);
    });
    svr.Get("/api/clips", [this](const httplib::Request&, httplib::Response& res) { send_json(res, lib_.list()); });
    svr.Get("/api/clip", [this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, lib_.details(*lib_.find(param(req, "id"))));
    });
    svr.Get("/api/frame", [this](const httplib::Request& req, httplib::Response& res) {
      const auto c = lib_.find(param(req, "clip"));
      send_json(res, frame_files(*c, frame_index(*c, param(req, "frame"))));
    });
    svr.Get("/api/view", [this](const httplib::Request& req, httplib::Response& res) {
      const auto c = lib_.find(param(req, "clip"));
      const int f = frame_index(*c, param(req, "frame"));
      ViewParams v;
      v.view = param(req, "view");
      if (req.has_param("of")) v.diff_of = req.get_param_value("of");
      v.side_b = req.has_param("side") && req.get_param_value("side") == "b";
      if (req.has_param("bg")) v.bg = req.get_param_value("bg");
      v.exposure = number(req, "exposure", 0);
      if (req.has_param("display")) v.display = req.get_param_value("display");
      const auto png = views_.png(*c, f, v);
      res.set_content(*png, "image/png");
    });
    svr.Get("/api/probe", [this](const httplib::Request& req, httplib::Response& res) {
      const auto c = lib_.find(param(req, "clip"));
      const int f = frame_index(*c, param(req, "frame"));
      send_json(res, views_.probe(*c, f, coordinate(req, "x"), coordinate(req, "y")));
    });
    svr.Get("/api/mse", [this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, {{"mse", views_.matte_mse(*lib_.find(param(req, "clip")))}});
    });
    svr.Get("/api/displays", [this](const httplib::Request&, httplib::Response& res) {
      json d = json::array({json{{"name", "sRGB"}, {"value", ""}}});
      for (const auto& v : display_views(cfg_.ocio_config)) d.push_back({{"name", v}, {"value", v}});
      send_json(res, {{"displays", d}});
    });
    // A file of a root, as it is on disk, for another program: never shown inline (a page
    // under a root must not run in this origin).
    svr.Get("/raw/([^/]+)/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
      // Streamed from a descriptor opened once and checked after opening (a link swapped in
      // after the check is refused), never held whole: a clip's video may be many GB.
      const auto file = std::make_shared<Descriptor>(lib_.open_checked(lib_.raw_file(req.matches[1], req.matches[2])));
      struct stat st {};
      if (::fstat(file->fd, &st) != 0) throw HttpError(404, "cannot read " + std::string(req.matches[2]));
      res.set_header("Content-Disposition", "attachment");
      res.set_content_provider(static_cast<size_t>(st.st_size), "application/octet-stream",
                               [file](size_t offset, size_t length, httplib::DataSink& sink) {
                                 char buf[1 << 16];
                                 const ssize_t n = ::pread(file->fd, buf, std::min(length, sizeof buf),
                                                           static_cast<off_t>(offset));
                                 if (n <= 0) return false;  // the file shrank: the answer ends short
                                 return sink.write(buf, static_cast<size_t>(n));
                               });
    });
  }

  static json body_of(const httplib::Request& req) {
    std::string error;
    json j = parse_json_limited(req.body, error);
    if (!error.empty()) throw HttpError(400, "the request body: " + error);
    if (!j.is_object()) throw HttpError(400, "the request body is not a JSON object");
    return j;
  }
  static std::string text(const json& j, const char* key, const std::string& dflt = "") {
    if (!j.contains(key)) {
      if (!dflt.empty()) return dflt;
      throw HttpError(400, std::string("missing '") + key + "'");
    }
    if (!j[key].is_string()) throw HttpError(400, std::string("'") + key + "' must be a string");
    return j[key].get<std::string>();
  }
  std::shared_ptr<const ClipEntry> clip_of(const json& j) { return lib_.find(text(j, "clip")); }
  /// A request's profile: a built-in one or the one the review started with. Never a path:
  /// a profile names a checkpoint and an AOTInductor package (compiled code) to load, so a
  /// request must not choose a file.
  std::string profile_of(const json& j) const {
    const std::string p = text(j, "profile", cfg_.options.engine.profile);
    const auto names = builtin_profiles();
    if (p == cfg_.options.engine.profile || std::find(names.begin(), names.end(), p) != names.end()) return p;
    throw HttpError(400, "profile '" + p + "': expected a built-in profile or '" + cfg_.options.engine.profile + "'");
  }

  void edit_routes(httplib::Server& svr) {
    svr.Get("/api/profiles", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, {{"profiles", builtin_profiles()}, {"default", cfg_.options.engine.profile}});
    });
    // A tweak: the frame keyed once by the loaded model, then post-processed only; the
    // answer is the comp (or processed) as the views show it. Nothing is written.
    svr.Post("/api/tweak", [this](const httplib::Request& req, httplib::Response& res) {
      const json b = body_of(req);
      const auto c = clip_of(b);
      if (!b.contains("frame") || !b["frame"].is_number_integer()) throw HttpError(400, "'frame' must be an integer");
      const int f = frame_index(*c, std::to_string(b["frame"].get<int64_t>()));
      const auto view = text(b, "view", "comp");
      if (view != "comp" && view != "processed") throw HttpError(400, "view: expected comp or processed");
      ViewParams v;
      v.view = view;
      v.bg = text(b, "bg", "checker");
      if (b.contains("exposure")) {
        if (!b["exposure"].is_number()) throw HttpError(400, "'exposure' must be a number");
        v.exposure = b["exposure"].get<double>();
      }
      if (b.contains("display")) v.display = text(b, "display");
      v.validate();
      json timings;
      const Pixels p = keying_.tweak(*c, f, parse_tweak(b, cfg_.options.engine), view == "comp", v, timings);
      const auto t0 = std::chrono::steady_clock::now();
      // Stored, not deflated: a tweak's answer is used once, and deflating a 1920x1080
      // frame cost more than sending it over loopback.
      std::string png = encode_png(p, 0);
      timings["encode_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      res.set_header("X-CK-Timings", timings.dump());
      res.set_content(std::move(png), "image/png");
    });
    svr.Post("/api/settings", [this](const httplib::Request& req, httplib::Response& res) {
      const json b = body_of(req);
      const auto c = clip_of(b);
      send_json(res, keying_.save_settings(*c, parse_tweak(b, cfg_.options.engine), profile_of(b)));
    });
    svr.Post("/api/key", [this](const httplib::Request& req, httplib::Response& res) {
      const json b = body_of(req);
      const auto c = clip_of(b);
      send_json(res, {{"job", keying_.start(*c, profile_of(b), text(b, "screen", "auto"), nullptr)}});
    });
    svr.Post("/api/write", [this](const httplib::Request& req, httplib::Response& res) {
      const json b = body_of(req);
      const auto c = clip_of(b);
      const PostTweak t = parse_tweak(b, cfg_.options.engine);
      send_json(res, {{"job", keying_.start(*c, profile_of(b), "auto", &t)}});
    });
    svr.Post("/api/cancel", [this](const httplib::Request& req, httplib::Response& res) {
      keying_.cancel(text(body_of(req), "job"));
      send_json(res, {{"cancelled", true}});
    });
    svr.Get("/api/jobs", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, {{"jobs", keying_.jobs()}});
    });
    // Progress: the jobs' state as an event whenever it changes (a comment each second keeps
    // the stream and lets it end when the server stops).
    svr.Get("/api/events", [this](const httplib::Request&, httplib::Response& res) {
      if (streams_.fetch_add(1) >= kStreams) {
        --streams_;
        throw HttpError(503, "too many event streams open");
      }
      auto seen = std::make_shared<uint64_t>(~uint64_t{0});
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, seen](size_t, httplib::DataSink& sink) {
            if (stopping_) {
              sink.done();
              return true;
            }
            const uint64_t v = keying_.wait(*seen, std::chrono::seconds(1));
            const std::string msg = v != *seen ? "data: " + keying_.jobs().dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"
                                               : ": alive\n\n";
            *seen = v;
            return sink.write(msg.data(), msg.size());
          },
          [this](bool) { --streams_; });
    });
  }

  static void asset(httplib::Response& res, const std::string& name) {
    for (std::size_t i = 0; i < kAssetCount; ++i)
      if (name == kAssets[i].name) {
        res.set_content(reinterpret_cast<const char*>(kAssets[i].data), kAssets[i].size, kAssets[i].type);
        return;
      }
    throw HttpError(404, "no page file '" + name + "'");
  }

  /// A frame's files, with /raw/ links to each under the root that holds it.
  json frame_files(const ClipEntry& c, int frame) {
    json j = {{"frame", frame}, {"stem", c.clip.stems[static_cast<size_t>(frame)]}};
    auto put = [&](const char* name, const std::string& path) {
      if (path.empty()) {
        j[name] = nullptr;
        return;
      }
      j[name] = {{"path", path}, {"raw", lib_.raw_link(path)}};
    };
    put("plate", c.clip.input.video.empty() ? lib_.plate_file(c, frame) : c.clip.input.video);
    put("hint", lib_.hint_file(c, frame));
    put("matte", lib_.output_file(c, frame, Output::Matte, false));
    put("fg", lib_.output_file(c, frame, Output::Fg, false));
    put("processed", lib_.output_file(c, frame, Output::Processed, false));
    put("comp", lib_.output_file(c, frame, Output::Comp, false));
    return j;
  }

  static constexpr int kStreams = 4;
  const ReviewConfig& cfg_;
  const std::atomic<bool>& stop_;
  ClipLibrary lib_;
  FrameViews views_;
  Keying keying_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> streams_{0};
  const std::string token_;
  int port_ = 0;
  std::string origin_host_, cookie_name_;
};

}  // namespace

int run_review(const ReviewConfig& config, const std::atomic<bool>& stop) {
  Review r(config, stop);
  return r.run();
}

}  // namespace corridorkey::review
