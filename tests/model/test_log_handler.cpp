// set_log_handler: every message the library prints reaches the host's handler, and none
// goes to stderr behind its back.
#include <corridorkey/engine.h>
#include <corridorkey/log.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "support/support.h"

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

using namespace corridorkey;
using Catch::Matchers::Contains;

namespace {

/// Everything written to fd 2 while alive (the C++ streams and stdio both end there).
class StderrCapture {
 public:
  StderrCapture() : path_(ck_test::temp_dir("stderr_capture") / "stderr.txt") {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved_ >= 0);
    REQUIRE(fd >= 0);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  std::string finish() {
    restore();
    return ck_test::read_file(path_.string());
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::filesystem::path path_;
  int saved_ = -1;
};

struct Received {
  std::mutex m;
  std::vector<std::pair<LogLevel, std::string>> lines;
  bool has(LogLevel l, const std::string& part) {
    std::lock_guard<std::mutex> g(m);
    for (const auto& [lv, s] : lines)
      if (lv == l && s.find(part) != std::string::npos) return true;
    return false;
  }
};

/// Restores the default handler even when a CHECK fails mid-test.
struct ResetLog {
  ~ResetLog() { reset_log_handler(); }
};

Profile tiny() {
  auto o = load_profile("original");
  o.model.checkpoint = ck_test::fixture("tiny256.pth");
  o.engine.img_size = 256;
  o.model.device = "cpu";
  o.model.threads = 1024;  // more than this process may use: a note, on every engine built
  return o;
}

}  // namespace

TEST_CASE("set_log_handler receives the engine's notes and warnings; stderr stays quiet",
          "[model][embedding]") {
  ResetLog reset;
  Received got;
  set_log_handler(LogLevel::Debug, [&](LogLevel l, const std::string& m) {
    std::lock_guard<std::mutex> g(got.m);
    got.lines.emplace_back(l, m);
  });
  std::string notes, err;
  {
    StderrCapture cap;
    auto engine = create_engine(tiny().model, tiny().engine);
    notes = engine->info().notes;
    Profile o = load_profile("original");
    apply_profile_yaml(o, "tile_overlap: 32\n", "host.yaml");  // deprecated: a warning
    err = cap.finish();
  }
  INFO("stderr: " << err);
  CHECK(err.empty());
  // The threads note is in the engine's notes and arrived at the handler as an Info line,
  // without the "corridorkey: " prefix.
  REQUIRE_THAT(notes, Contains("threads 1024: this process may use"));
  CHECK(got.has(LogLevel::Info, "threads 1024: this process may use"));
  for (size_t a = 0, b; (b = notes.find('\n', a)) != std::string::npos; a = b + 1)
    CHECK(got.has(LogLevel::Info, notes.substr(a, b - a)));
  CHECK(got.has(LogLevel::Warning, "host.yaml:1: key 'tile_overlap' is deprecated and ignored"));
  {
    std::lock_guard<std::mutex> g(got.m);
    for (const auto& [l, m] : got.lines) CHECK(m.rfind("corridorkey: ", 0) == std::string::npos);
  }

  SECTION("below the level: dropped") {
    Received warn_only;
    set_log_handler(LogLevel::Warning, [&](LogLevel l, const std::string& m) {
      std::lock_guard<std::mutex> g(warn_only.m);
      warn_only.lines.emplace_back(l, m);
    });
    StderrCapture cap;
    auto engine = create_engine(tiny().model, tiny().engine);
    Profile o = load_profile("original");
    apply_profile_yaml(o, "tile_overlap: 32\n", "host.yaml");
    CHECK(cap.finish().empty());
    CHECK_FALSE(warn_only.has(LogLevel::Info, "threads 1024"));
    CHECK(warn_only.has(LogLevel::Warning, "tile_overlap"));
  }

  SECTION("a handler that throws is dropped by the library, which carries on") {
    int calls = 0;
    set_log_handler(LogLevel::Debug, [&](LogLevel, const std::string&) {
      ++calls;
      throw std::runtime_error("host logger failed");
    });
    StderrCapture cap;
    std::unique_ptr<BaseEngine> engine;
    REQUIRE_NOTHROW(engine = create_engine(tiny().model, tiny().engine));
    CHECK(engine != nullptr);
    CHECK(calls >= 1);
    CHECK(cap.finish().empty());
  }

  SECTION("the default handler writes today's stderr lines") {
    reset_log_handler();
    StderrCapture cap;
    auto engine = create_engine(tiny().model, tiny().engine);
    Profile o = load_profile("original");
    apply_profile_yaml(o, "tile_overlap: 32\n", "host.yaml");
    const auto text = cap.finish();
    CHECK_THAT(text, Contains("corridorkey: threads 1024: this process may use"));
    CHECK_THAT(text, Contains("corridorkey: warning: host.yaml:1: key 'tile_overlap' is deprecated"));
  }
}
