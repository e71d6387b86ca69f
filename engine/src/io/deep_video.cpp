#include "io/deep_video.h"

#include <corridorkey/check.h>

#include "io/video_writer.h"

#include <cerrno>
#include <cstring>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace corridorkey::io {

DeepVideoFrames::DeepVideoFrames(const std::string& path, int width, int height)
    : path_(path), width_(width), height_(height) {
  CK_CHECK(width > 0 && height > 0, IoError, path, ": video frame size ", width, "x", height);
  const std::string ffmpeg = find_ffmpeg();
  CK_CHECK(!ffmpeg.empty(), IoError, path,
           ": decoding video at 16 bits (a colour space other than srgb) needs the ffmpeg "
           "binary (none on PATH; CORRIDORKEY_FFMPEG names one)");
  // ffmpeg's messages go to a file next to nothing of ours: the temp folder, under a fresh
  // name made exclusively (O_EXCL | O_NOFOLLOW: a link another user planted at a predictable
  // name in a shared /tmp was followed and truncated before), 0600.
  base::TempFile::Options lo;
  lo.dir = std::filesystem::temp_directory_path().string();
  lo.next_name = [] { return "corridorkey-ffmpeg-" + base::random_name_part() + ".log"; };
  lo.mode = 0600;
  log_file_ = std::make_unique<base::TempFile>(lo);
  const int logfd = log_file_->fd();
  if (logfd < 0) log_file_.reset();  // no log: ffmpeg's stderr is dropped, its exit status still read
  else log_ = log_file_->at_path();
  std::vector<std::string> args = {ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error",
                                   "-i", path, "-map", "0:v:0", "-f", "rawvideo",
                                   "-pix_fmt", "rgb48le", "pipe:1"};
  int pipefd[2];
  CK_CHECK(::pipe2(pipefd, O_CLOEXEC) == 0, IoError, path, ": pipe: ", std::strerror(errno));
  const int nullfd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, nullfd, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  if (logfd >= 0) posix_spawn_file_actions_adddup2(&fa, logfd, 2);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, ffmpeg.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  if (nullfd >= 0) ::close(nullfd);
  if (rc != 0) {
    ::close(pipefd[0]);
    pid_ = -1;
    throw IoError(path + ": cannot run " + ffmpeg + ": " + std::strerror(rc));
  }
  fd_ = pipefd[0];
}

DeepVideoFrames::~DeepVideoFrames() {
  if (pid_ > 0) ::kill(pid_, SIGTERM);  // stopped early: ffmpeg would block on the pipe
  finish();  // log_file_ then removes the log
}

bool DeepVideoFrames::finish() {
  if (fd_ >= 0) ::close(fd_), fd_ = -1;
  if (pid_ < 0) return true;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool DeepVideoFrames::next(Image& out) {
  if (fd_ < 0) return false;
  const size_t n = static_cast<size_t>(width_) * height_ * 3;
  std::vector<uint16_t> buf(n);
  auto* p = reinterpret_cast<char*>(buf.data());
  size_t got = 0;
  while (got < n * 2) {
    const ssize_t k = ::read(fd_, p + got, n * 2 - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  if (got < n * 2) {
    const bool ok = finish();
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    CK_CHECK(ok && got == 0, IoError, path_, ": ffmpeg (16-bit decode) ",
             got ? "ended inside a frame" : "failed", ": ", ss.str());
    return false;
  }
  out.width = width_;
  out.height = height_;
  out.channels = 3;
  out.pixels.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto* b = reinterpret_cast<const unsigned char*>(&buf[i]);  // little-endian samples
    out.pixels[i] = static_cast<float>(b[0] | (b[1] << 8)) / 65535.f;
  }
  return true;
}

}  // namespace corridorkey::io
