// The one temporary-file-and-rename write (corridorkey/base/atomic_write.h) keeps each
// caller's guarantee: an exact mode (serve's 0600 token), a replaced file's mode (the plan
// cache), links and FIFOs refused and never written through, a check before the rename
// (review's settings) that leaves the old file and no temporary file when it fails, names
// relative to a held folder, and a locked temporary file until the rename. Real files.
#include <corridorkey/base/atomic_write.h>

#include <catch2/catch.hpp>

#include "support/support.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace base = corridorkey::base;

namespace {

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("atomic_write: exact mode, or the replaced file's", "[unit][atomic_write]") {
  const auto dir = ck_test::temp_dir("atomic_mode");
  const auto token = dir / "token";
  base::AtomicWriteOptions secret;
  secret.mode = 0600;
  REQUIRE(base::atomic_write(token.string(), "abc\n", secret).empty());
  CHECK(ck_test::read_file(token.string()) == "abc\n");
  CHECK(mode_of(token) == 0600);
  // keep_owner: the old file's permission bits win over `mode`, set-ID bits dropped.
  const auto cache = dir / "cache.json";
  { std::ofstream(cache) << "old"; }
  REQUIRE(::chmod(cache.c_str(), 02640) == 0);
  base::AtomicWriteOptions keep;
  keep.keep_owner = true;
  REQUIRE(base::atomic_write(cache.string(), "new", keep).empty());
  CHECK(ck_test::read_file(cache.string()) == "new");
  CHECK(mode_of(cache) == 0640);
  CHECK(entries(dir) == 2);  // no temporary file left
}

TEST_CASE("atomic_write: a link or FIFO at the path is refused and never written through", "[unit][atomic_write]") {
  const auto dir = ck_test::temp_dir("atomic_refuse");
  const auto target = dir / "target", link = dir / "link", fifo = dir / "fifo";
  { std::ofstream(target) << "theirs"; }
  fs::create_symlink(target, link);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  base::AtomicWriteOptions o;
  o.refuse_links = true;
  CHECK_THAT(base::atomic_write(link.string(), "x", o), Contains("symbolic link"));
  CHECK_THAT(base::atomic_write(fifo.string(), "x", {}), Contains("FIFO"));
  CHECK(fs::is_symlink(link));
  CHECK(fs::is_fifo(fifo));
  // Without refuse_links the rename replaces the link itself, never its target.
  REQUIRE(base::atomic_write(link.string(), "mine", {}).empty());
  CHECK_FALSE(fs::is_symlink(link));
  CHECK(ck_test::read_file(target.string()) == "theirs");
  CHECK(entries(dir) == 3);
}

TEST_CASE("atomic_write: a failed check leaves the old file and no temporary one", "[unit][atomic_write]") {
  const auto dir = ck_test::temp_dir("atomic_validate");
  const int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(dirfd >= 0);
  { std::ofstream(dir / "settings.yaml") << "good\n"; }
  base::AtomicWriteOptions o;
  o.dir_fd = dirfd;  // names relative to a folder held open
  std::string seen;
  o.validate = [&](const base::TempFile& t) {
    seen = ck_test::read_file((dir / t.name()).string());
    // Locked while it lives: a cleaner could not take it for a dead writer's.
    const int fd = ::open((dir / t.name()).c_str(), O_RDONLY | O_CLOEXEC);
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    if (free) throw std::runtime_error("temporary file not locked");
    if (seen != "good\n") throw std::runtime_error("not a job file");
  };
  o.lock = true;
  CHECK(base::atomic_write("settings.yaml", "bad\n", o) == "not a job file");
  CHECK(seen == "bad\n");
  CHECK(ck_test::read_file((dir / "settings.yaml").string()) == "good\n");
  CHECK(entries(dir) == 1);
  CHECK(base::atomic_write("settings.yaml", "good\n", o).empty());
  CHECK(entries(dir) == 1);
  ::close(dirfd);
}
