// The plan cache stays readable (issue 47): no write makes a file over the 8 MiB its reader
// accepts (an import that would is refused whole), an import is one write, a killed
// writer's temporary file is removed by the next write (a live writer's, another host's and
// a user's are kept), deeply nested JSON is refused without recursion, and a plan's key and
// reasons reach a terminal only escaped. Real files, real processes (fork + SIGKILL).
#include <corridorkey/base/atomic_write.h>
#include <corridorkey/errors.h>
#include <corridorkey/tune.h>

#include <catch2/catch.hpp>

#include "runtime/tune_cache.h"
#include "runtime/tune_cache_files.h"
#include "support/support.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace d = corridorkey::detail;

namespace {

TunePlan plan_with(const std::string& key, const std::string& why = "") {
  TunePlan p;
  p.key = key;
  p.origin = PlanOrigin::Trials;
  p.decisions.push_back({TuneOption::ModelPrecision, TuneChoice::Float32, DecisionSource::Plan, why,
                         {{"float32", 100}, {"bfloat16", 120}}});
  return p;
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

/// A temporary file in `dir` as a cache write makes it: the cache's name, locked.
base::TempFile::Options cache_temp(const std::string& dir) {
  base::TempFile::Options o;
  o.dir = dir;
  o.next_name = d::tune_temp_name;
  o.lock = true;
  return o;
}

/// A child process that makes a temporary file as a cache write does, writes part of it and
/// is killed by SIGKILL before its rename: what a killed `tune --import` leaves.
void killed_writer(const std::string& dir) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    base::TempFile tmp(cache_temp(dir));
    if (tmp.fd() >= 0 && ::write(tmp.fd(), "{\"format\": ", 11) == 11) ::raise(SIGKILL);
    ::_exit(1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
}

std::vector<std::string> temps_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& n : names_in(dir))
    if (n.rfind(".corridorkey-engine-tune.", 0) == 0 && n != ".corridorkey-engine-tune.lock") out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("a cache write past the reader's 8 MiB is refused and the cache stays readable", "[unit][tune]") {
  const auto dir = ck_test::temp_dir("tune_limit");
  const std::string path = (dir / "tune.json").string();
  const std::string mb(1 << 20, 'x');
  std::string warning;
  // Two 5 MB plans: the second made a 10 MB file that no later run could read.
  REQUIRE(d::tune_cache_store(path, plan_with("a", std::string(5, 'a') + mb + mb + mb + mb + mb), warning));
  const std::string before = ck_test::read_file(path);
  REQUIRE(before.size() > (size_t{5} << 20));
  CHECK_FALSE(d::tune_cache_store(path, plan_with("b", mb + mb + mb + mb), warning));
  CHECK_THAT(warning, Contains("over the 8388608 (8 MiB)") && Contains("nothing written"));
  CHECK(ck_test::read_file(path) == before);  // byte for byte
  std::string error;
  CHECK(d::tune_cache_read_all(path, error).size() == 1);
  CHECK(error.empty());
  // The refused plan is kept in this process's memory.
  CHECK(d::tune_cache_load(path, "b", warning));

  SECTION("an import that would pass the limit is refused whole") {
    const std::string from = (dir / "import.json").string();
    REQUIRE(d::tune_cache_store_all(from, {plan_with("c", mb + mb + mb + mb), plan_with("e", "small")}).empty());
    CHECK_THROWS_AS(copy_tune_plans(from, path), IoError);
    CHECK_THROWS_WITH(copy_tune_plans(from, path), Contains("tune.json") && Contains("nothing written"));
    CHECK(ck_test::read_file(path) == before);
    // Into a folder cache (one file per plan) the same import fits.
    CHECK(copy_tune_plans(from, (dir / "plans").string() + "/") == 2);
  }
  SECTION("a plan file of a folder cache too, with no plan of the import written") {
    const std::string folder = (dir / "share").string() + "/";
    CHECK_THAT(d::tune_cache_store_all(folder, {plan_with("small"), plan_with("huge", before + before)}),
               Contains("nothing written"));
    CHECK(!fs::exists(folder));
  }
}

TEST_CASE("an import into a single-file cache is one write, not one per plan", "[unit][tune]") {
  const auto dir = ck_test::temp_dir("tune_batch");
  const std::string from = (dir / "from.json").string(), to = (dir / "tune.json").string();
  std::vector<TunePlan> plans;
  for (int i = 0; i < 1500; ++i)
    plans.push_back(plan_with("cpu " + std::to_string(i) + "; threads 2; torch 2.15.0", std::string(1000, 'w')));
  REQUIRE(d::tune_cache_store_all(from, plans).empty());
  // One plan at a time, each rewriting the whole file, took 101 s on a 2-core VM.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(copy_tune_plans(from, to) == 1500);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(s << " s");
  CHECK(s < 30);
  std::string error;
  CHECK(d::tune_cache_read_all(to, error).size() == 1500);
  CHECK(error.empty());
}

TEST_CASE("a killed writer's temporary file is removed; a live one's, another host's and a user's are kept",
          "[unit][tune]") {
  const auto dir = ck_test::temp_dir("tune_dead_writer");
  killed_writer(dir.string());
  const auto dead = temps_in(dir);
  REQUIRE(dead.size() == 1);
  base::TempFile live(cache_temp(dir.string()));  // a writer of this process, still writing
  REQUIRE(live.error().empty());
  const std::string other = ".corridorkey-engine-tune.another-node.4242.AbC123";
  write(dir / other, "another host's write in progress");
  const std::string old_legacy = ".corridorkey-engine-tune.Ab12Cd", new_legacy = ".corridorkey-engine-tune.Zz99Yy";
  write(dir / old_legacy, "an earlier version's leftover");
  fs::last_write_time(dir / old_legacy, fs::file_time_type::clock::now() - std::chrono::hours(2));
  write(dir / new_legacy, "an earlier version's write, maybe in progress");
  write(dir / ".corridorkey-engine-tune.notes.txt", "a user's file");
  // A link named as this host's temporary file: not followed, not removed.
  fs::create_symlink(dir / "elsewhere", dir / (dead[0].substr(0, dead[0].size() - 6) + "Lnk123"));

  CHECK(d::remove_dead_tune_temps(dir.string()) == 2);  // the killed writer's, the old leftover
  const auto left = names_in(dir);
  CHECK(!left.count(dead[0]));
  CHECK(!left.count(old_legacy));
  CHECK(left.count(live.name()));
  CHECK(left.count(other));
  CHECK(left.count(new_legacy));
  CHECK(left.count(".corridorkey-engine-tune.notes.txt"));
  CHECK(left.size() == 5);  // and the link

  SECTION("the next write into the cache removes it") {
    const auto cache = ck_test::temp_dir("tune_dead_writer_cache");
    killed_writer(cache.string());
    REQUIRE(temps_in(cache).size() == 1);
    std::string warning;
    REQUIRE(d::tune_cache_store((cache / "tune.json").string(), plan_with("a"), warning));
    CHECK(temps_in(cache).empty());
    const std::set<std::string> want = {".corridorkey-engine-tune.lock", "tune.json"};
    CHECK(names_in(cache) == want);
  }
}

TEST_CASE("deeply nested JSON in a plan cache or an import file is refused, not recursed into", "[unit][tune]") {
  const auto dir = ck_test::temp_dir("tune_deep");
  std::string objects;
  for (int i = 0; i < 300000; ++i) objects += "{\"a\":";
  objects += '1';  // appended, not "1" + string: GCC 12 warns a false stringop-overflow there
  objects.append(300000, '}');
  const std::vector<std::pair<std::string, std::string>> shapes = {
      {"arrays", std::string(200000, '[') + std::string(200000, ']')},
      {"objects", objects},
      {"open", std::string(200000, '[')},
      {"in plans", "{\"format\": \"corridorkey-engine tune cache\", \"version\": 2, \"plans\": {\"k\": " +
                       std::string(100000, '[') + std::string(100000, ']') + "}}"}};
  for (const auto& [name, text] : shapes) {
    INFO(name);
    const std::string file = (dir / (name + ".json")).string();
    write(file, text);
    std::string error;
    CHECK(d::tune_cache_read_all(file, error).empty());
    CHECK_THAT(error, Contains("nested deeper than 32"));
    std::string warning;
    CHECK_FALSE(d::tune_cache_load(file, "k", warning));
    CHECK_THAT(warning, Contains("left as it is"));
    CHECK_THROWS_WITH(copy_tune_plans(file, (dir / "to.json").string()), Contains("nested deeper than 32"));
    CHECK(ck_test::read_file(file) == text);  // never replaced
    // A folder cache's plan file of the same shape.
    const auto folder = dir / ("folder-" + name);
    fs::create_directories(folder);
    write(folder / "plan-0123456789abcdef.json", text);
    CHECK(d::tune_cache_read_all(folder.string(), error).empty());
    CHECK_THAT(error, Contains("nested deeper than 32"));
  }
}

TEST_CASE("plan keys and reasons are printed with control characters escaped", "[unit][tune]") {
  CHECK(printable_text("cpu \x1b]0;owned\x07\nmodel_precision float16 (flag)") ==
        "cpu \\x1b]0;owned\\x07\\x0amodel_precision float16 (flag)");
  CHECK(printable_text("del \x7f c1 \xc2\x9b" "2J bad \xff\xfe cut \xc3") == "del \\x7f c1 \\xc2\\x9b2J bad \\xff\\xfe cut \\xc3");
  CHECK(printable_text("caf\xc3\xa9 \xe2\x84\xa2 (R) \\ ok") == "caf\xc3\xa9 \xe2\x84\xa2 (R) \\ ok");  // UTF-8 kept
  auto p = plan_with("k", "fast\n\x1b[2Jmodel_precision float16 (flag)");
  p.decisions[0].times_ms.emplace_back("n\x1b]0;t\x07", 5);
  const auto s = p.summary();
  CHECK(s.find('\x1b') == std::string::npos);
  CHECK(s.find('\x07') == std::string::npos);
  CHECK(std::count(s.begin(), s.end(), '\n') == 1);  // one decision, one line
  CHECK_THAT(s, Contains("fast\\x0a\\x1b[2Jmodel_precision float16 (flag)") && Contains("n\\x1b]0;t\\x07 5 ms"));
}
