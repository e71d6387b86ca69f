// The opt-in SIGBUS guard (model/mapped_files.h, corridorkey::install_mapped_checkpoint_guard):
// a mapped safetensors checkpoint truncated under the process gives a message naming it and
// exit status 4; a SIGBUS that is not ours reaches the handler installed before, or the
// default action. Each case runs in a forked child, since the guard ends the process.
#include <corridorkey/checkpoint.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sys/stat.h>
#include <fcntl.h>

#include "model/mapped_files.h"
#include "model/safetensors.h"
#include "support/support.h"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace st = corridorkey::model::safetensors;

namespace {

struct Child {
  int status = 0;
  std::string err;  // what it wrote on stderr
};

/// Runs `body` in a child process with stderr on a pipe; the child ends with _exit(0) if
/// `body` returns.
template <class F>
Child in_child(F body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  Child c;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) c.err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  REQUIRE(::waitpid(pid, &c.status, 0) == pid);
  return c;
}

extern "C" void exit_42(int, siginfo_t*, void*) { ::_exit(42); }

}  // namespace

TEST_CASE("a mapped checkpoint truncated under the process ends it with exit 4, named", "[model][mmap]") {
  const auto dir = ck_test::temp_dir("mapped");
  const auto path = (dir / "w.safetensors").string();
  st::write_file(path, {{"w", torch::arange(1 << 20, torch::kFloat32)}}, {});
  auto touch_after_truncate = [&] {
    install_mapped_checkpoint_guard();
    auto f = st::read_file(path, st::Access::Map);
    const float* data = f.tensors.at(0).second.data_ptr<float>();
    REQUIRE(::truncate(path.c_str(), 4096) == 0);
    volatile float v = data[(1 << 20) - 1];  // a page past the new end: SIGBUS
    (void)v;
  };
  const auto c = in_child(touch_after_truncate);
  REQUIRE(WIFEXITED(c.status));
  CHECK(WEXITSTATUS(c.status) == 4);
  CHECK_THAT(c.err, Contains(path + ": the checkpoint changed on disk while it was mapped") && Contains("--mmap off"));

  // Without the guard (the library never installs it): the signal as before.
  st::write_file(path, {{"w", torch::arange(1 << 20, torch::kFloat32)}}, {});
  const auto bare = in_child([&] {
    auto f = st::read_file(path, st::Access::Map);
    const float* data = f.tensors.at(0).second.data_ptr<float>();
    REQUIRE(::truncate(path.c_str(), 4096) == 0);
    volatile float v = data[(1 << 20) - 1];
    (void)v;
  });
  CHECK((WIFSIGNALED(bare.status) && WTERMSIG(bare.status) == SIGBUS));
}

TEST_CASE("a SIGBUS that is not in a mapped checkpoint goes to the handler before the guard", "[model][mmap]") {
  const auto chained = in_child([] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = exit_42;
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &sa, nullptr);
    install_mapped_checkpoint_guard();
    ::raise(SIGBUS);
  });
  REQUIRE(WIFEXITED(chained.status));
  CHECK(WEXITSTATUS(chained.status) == 42);
  CHECK(chained.err.empty());
  const auto dfl = in_child([] {
    install_mapped_checkpoint_guard();
    ::raise(SIGBUS);
  });
  CHECK((WIFSIGNALED(dfl.status) && WTERMSIG(dfl.status) == SIGBUS));
  // The table forgets a mapping once unmapped.
  char page[64];
  const int slot = model::register_mapped_file(page, sizeof page, "/x/y.safetensors", -1);
  REQUIRE(slot >= 0);
  CHECK(std::string(model::mapped_file_at(page + 10)) == "/x/y.safetensors");
  CHECK(model::mapped_file_at(page + 64) == nullptr);
  model::unregister_mapped_file(slot);
  CHECK(model::mapped_file_at(page + 10) == nullptr);
}

// A file written in place under its mapping is told from one stat(): same inode, another
// size or modification time. A file renamed over the path is not the mapping's file.
TEST_CASE("a mapped file written in place is named; one replaced by rename is not", "[unit]") {
  const auto dir = ck_test::temp_dir("mapped_changed");
  const std::string path = (dir / "w.safetensors").string();
  { std::ofstream(path, std::ios::binary) << std::string(4096, 'a'); }
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  char page[64];
  const int slot = model::register_mapped_file(page, sizeof page, path, fd);
  ::close(fd);
  REQUIRE(slot >= 0);
  CHECK(model::changed_mapped_file().empty());
  // Renamed over: a new inode at the path, the mapped one untouched.
  const std::string fresh = path + ".new";
  { std::ofstream(fresh, std::ios::binary) << std::string(4096, 'b'); }
  REQUIRE(::rename(fresh.c_str(), path.c_str()) == 0);
  CHECK(model::changed_mapped_file().empty());
  model::unregister_mapped_file(slot);
  // Written in place at the same size: told by the modification time. (The file's time is
  // set in the past first: the kernel's clock for file times is coarse, and a write within
  // the same tick as the file's creation would leave it equal.)
  const struct timespec past[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), past, 0) == 0);
  const int fd2 = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd2 >= 0);
  const int slot2 = model::register_mapped_file(page, sizeof page, path, fd2);
  REQUIRE(::pwrite(fd2, "zzzz", 4, 100) == 4);
  struct stat st {};
  REQUIRE(::fstat(fd2, &st) == 0);
  CHECK(st.st_size == 4096);
  CHECK(model::changed_mapped_file() == path);
  ::close(fd2);
  model::unregister_mapped_file(slot2);
  CHECK(model::changed_mapped_file().empty());  // unmapped: nothing to tell
}
