#include "io/video_writer.h"

#include <corridorkey/check.h>

#include "io/image_io.h"

#include <opencv2/videoio.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <locale>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace corridorkey::io {
namespace fs = std::filesystem;

namespace {

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::string fps_text(double fps) {
  // NTSC rates as their exact rationals: 23.976 typed by a user (or 23.976023... read from a
  // source video) means 24000/1001, which editorial conform tools expect, not 2997/125.
  for (int n : {24, 30, 48, 60, 120})
    if (std::fabs(fps - n * 1000.0 / 1001.0) < 2e-3) return std::to_string(n * 1000) + "/1001";
  std::ostringstream s;
  s.imbue(std::locale::classic());  // numbers in every locale
  s.precision(10);
  s << fps;
  return s.str();
}

/// Writes all of `n` bytes to a pipe with SIGPIPE blocked on this thread: a dead encoder
/// gives EPIPE (reported with its log) instead of killing the process. A SIGPIPE raised
/// meanwhile is consumed before the mask is restored.
bool write_all(int fd, const void* data, size_t n) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const char* p = static_cast<const char*>(data);
  bool ok = true;
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      ok = false;
      break;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  if (!ok) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

uint8_t to8(float v) {
  return static_cast<uint8_t>(std::lround(std::clamp(std::isfinite(v) ? v : 0.f, 0.f, 1.f) * 255.f));
}
uint16_t to16(float v) {
  return static_cast<uint16_t>(std::lround(std::clamp(std::isfinite(v) ? v : 0.f, 0.f, 1.f) * 65535.f));
}

}  // namespace

std::string find_ffmpeg() {
  if (const char* env = std::getenv("CORRIDORKEY_FFMPEG"); env && *env) {
    if (std::string(env) == "none") return "";
    // Named but not there: an error, not a silent fall back to OpenCV (or a ProRes error
    // saying that none was found on PATH).
    CK_CHECK(executable(env), ConfigError, "CORRIDORKEY_FFMPEG=", env,
             ": not an executable file (name the ffmpeg binary, or set it to 'none')");
    return env;
  }
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  ss.imbue(std::locale::classic());  // numbers in every locale
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && executable(fs::path(dir) / "ffmpeg")) return (fs::path(dir) / "ffmpeg").string();
  return "";
}

struct VideoWriter::Impl {
  std::string path, tmp, log, encoder;
  // Locked while ffmpeg (or OpenCV) writes them, so no other run takes them for a dead
  // writer's leftovers; removed unless committed.
  std::unique_ptr<TempFile> tmp_file, log_file;
  int width = 0, height = 0;
  bool alpha = false, finished = false;
  // ffmpeg
  pid_t pid = -1;
  int fd = -1;
  bool sixteen = false;  // rgb48 / rgba64 frames (ProRes is 10-bit)
  // OpenCV
  cv::VideoWriter cv_writer;
  std::vector<uint8_t> buf;

  std::string log_tail() const {
    std::ifstream f(log);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (s.size() > 600) s = "..." + s.substr(s.size() - 600);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s.empty() ? "no message" : s;
  }

  /// Waits for ffmpeg; true when it exited 0.
  bool reap() {
    if (pid < 0) return true;
    if (fd >= 0) ::close(fd), fd = -1;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  void cleanup() {
    reap();
    if (cv_writer.isOpened()) cv_writer.release();
    tmp_file.reset();
    log_file.reset();
  }
};

VideoWriter::VideoWriter(const std::string& path, int width, int height, double fps,
                         VideoCodec codec, bool alpha)
    : impl_(std::make_unique<Impl>()) {
  auto& I = *impl_;
  CK_CHECK(width > 0 && height > 0, IoError, path, ": video frame size ", width, "x", height);
  CK_CHECK(std::isfinite(fps) && fps > 0, IoError, path, ": frame rate ", fps);
  CK_CHECK(!alpha || codec == VideoCodec::ProRes, IoError, path, ": only ProRes keeps alpha");
  I.path = path, I.width = width, I.height = height, I.alpha = alpha;
  const std::string ext = fs::path(path).extension().string();
  I.tmp_file = std::make_unique<TempFile>(path, ext);  // OpenCV picks the container from the extension
  // Confined (review): ffmpeg writes the file through its own descriptor's path (-f names the
  // container), so no name in the folder is ever reopened. Otherwise the name, as before.
  I.tmp = I.tmp_file->confined() ? I.tmp_file->own_path() : I.tmp_file->path();
  const std::string ffmpeg = find_ffmpeg();
  if (ffmpeg.empty()) {
    CK_CHECK(codec == VideoCodec::H264, ConfigError, path,
             ": ProRes needs the ffmpeg binary (none on PATH; CORRIDORKEY_FFMPEG names one)");
    // OpenCV needs the extension in the name it opens, a name someone who can write in the
    // folder could swap for a link: confined writes encode videos with ffmpeg only.
    CK_CHECK(!I.tmp_file->confined(), IoError, path,
             ": a confined run (review) encodes videos with the ffmpeg binary only (none on PATH; "
             "CORRIDORKEY_FFMPEG names one)");
    I.encoder = "OpenCV FFmpeg backend (H.264)";
    I.cv_writer.open(I.tmp, cv::CAP_FFMPEG, cv::VideoWriter::fourcc('a', 'v', 'c', '1'), fps,
                     cv::Size(width, height), true);
    if (!I.cv_writer.isOpened()) {
      I.cleanup();
      throw IoError(path + ": this OpenCV build cannot encode H.264 (no encoder in its FFmpeg "
                           "backend); install ffmpeg, or leave video_out off");
    }
    return;
  }
  I.sixteen = codec == VideoCodec::ProRes;
  const std::string in_fmt = I.sixteen ? (alpha ? "rgba64le" : "rgb48le") : "rgb24";
  std::vector<std::string> args = {ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
                                   "-f", "rawvideo", "-pix_fmt", in_fmt,
                                   "-s", std::to_string(width) + "x" + std::to_string(height),
                                   "-framerate", fps_text(fps), "-i", "pipe:0"};
  if (codec == VideoCodec::H264) {
    I.encoder = "ffmpeg libx264 crf 18";
    // yuv420p needs even sizes: an odd edge is padded by one pixel.
    for (const char* a : {"-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2,scale=out_color_matrix=bt709:out_range=tv",
                          "-c:v", "libx264", "-crf", "18", "-preset", "medium", "-pix_fmt",
                          "yuv420p", "-colorspace", "bt709", "-color_primaries", "bt709",
                          "-color_trc", "iec61966-2-1", "-movflags", "+faststart", "-f", "mp4"})
      args.emplace_back(a);
  } else {
    I.encoder = alpha ? "ffmpeg prores_ks 4444 with alpha" : "ffmpeg prores_ks 4444";
    for (const char* a : {"-vf", "scale=out_color_matrix=bt709:out_range=tv", "-c:v", "prores_ks",
                          "-profile:v", "4444", "-vendor", "apl0", "-pix_fmt",
                          alpha ? "yuva444p10le" : "yuv444p10le", "-colorspace", "bt709",
                          "-color_primaries", "bt709", "-color_trc", "iec61966-2-1", "-f", "mov"})
      args.emplace_back(a);
  }
  args.push_back(I.tmp);
  I.log_file = std::make_unique<TempFile>(path, ".log");
  // The log is written and read through the temporary file's own descriptor path: the file
  // created with O_EXCL, never a name reopened (a link swapped in is not followed).
  I.log = I.log_file->own_path();
  int pipefd[2];
  CK_CHECK(::pipe2(pipefd, O_CLOEXEC) == 0, IoError, path, ": pipe: ", std::strerror(errno));
  const int logfd = ::open(I.log.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (logfd < 0) {
    ::close(pipefd[0]), ::close(pipefd[1]);
    throw IoError(path + ": cannot open the encoder log " + I.log_file->path() + ": " + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[0], 0);
  posix_spawn_file_actions_adddup2(&fa, logfd, 1);
  posix_spawn_file_actions_adddup2(&fa, logfd, 2);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&I.pid, ffmpeg.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[0]);
  ::close(logfd);
  if (rc != 0) {
    ::close(pipefd[1]);
    I.pid = -1;
    I.cleanup();
    throw IoError(path + ": cannot run " + ffmpeg + ": " + std::strerror(rc));
  }
  I.fd = pipefd[1];
}

VideoWriter::~VideoWriter() {
  if (!impl_->finished) impl_->cleanup();
}

const std::string& VideoWriter::encoder() const { return impl_->encoder; }

void VideoWriter::write(const Image& f) {
  auto& I = *impl_;
  CK_CHECK(f.width == I.width && f.height == I.height, IoError, I.path, ": frame is ", f.width, "x",
           f.height, ", the video ", I.width, "x", I.height);
  CK_CHECK(f.channels == 1 || f.channels >= 3, IoError, I.path, ": frame has ", f.channels,
           " channels");
  const size_t n = static_cast<size_t>(f.width) * f.height;
  const int oc = I.alpha ? 4 : 3;  // channels sent
  auto value = [&](size_t i, int c) {
    if (f.channels == 1) return c == 3 ? 1.f : f.pixels[i];
    if (c == 3) return f.channels >= 4 ? f.pixels[i * f.channels + 3] : 1.f;
    return f.pixels[i * f.channels + static_cast<size_t>(c)];
  };
  if (I.cv_writer.isOpened()) {
    I.buf.resize(n * 3);
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c) I.buf[i * 3 + static_cast<size_t>(c)] = to8(value(i, 2 - c));  // BGR
    I.cv_writer.write(cv::Mat(f.height, f.width, CV_8UC3, I.buf.data()));
    return;
  }
  const size_t bytes = I.sixteen ? 2 : 1;
  I.buf.resize(n * static_cast<size_t>(oc) * bytes);
  if (I.sixteen) {
    auto* p = reinterpret_cast<uint16_t*>(I.buf.data());
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < oc; ++c) p[i * static_cast<size_t>(oc) + static_cast<size_t>(c)] = to16(value(i, c));
  } else {
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < oc; ++c) I.buf[i * static_cast<size_t>(oc) + static_cast<size_t>(c)] = to8(value(i, c));
  }
  if (!write_all(I.fd, I.buf.data(), I.buf.size())) {
    const bool ok = I.reap();
    (void)ok;
    throw IoError(I.path + ": the encoder stopped: " + I.log_tail());
  }
}

void VideoWriter::finish() {
  auto& I = *impl_;
  if (I.cv_writer.isOpened()) {
    I.cv_writer.release();
  } else if (!I.reap()) {
    throw IoError(I.path + ": the encoder failed: " + I.log_tail());
  }
  std::error_code ec;
  CK_CHECK(fs::is_regular_file(I.tmp, ec) && fs::file_size(I.tmp, ec) > 0, IoError, I.path,
           ": the encoder wrote nothing");
  I.tmp_file->commit(I.path);
  I.log_file.reset();
  I.finished = true;
}

}  // namespace corridorkey::io
