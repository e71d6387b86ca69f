#include "config/cpu_limit.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <locale>
#include <sstream>

#include <sched.h>

namespace corridorkey::config {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

/// `top`/`rel` without a trailing separator ("/" -> `top` itself).
fs::path under(const fs::path& top, const std::string& rel) {
  fs::path dir = top;
  for (const auto& part : fs::path(rel).relative_path())
    if (!part.empty() && part != ".") dir /= part;
  return dir;
}

int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

/// The smallest quota on the way from `dir` up to `top` (a quota on any ancestor applies),
/// read by `limit_of`; 0 for none.
template <typename F>
int min_quota(fs::path dir, const fs::path& top, F limit_of) {
  int best = 0;
  std::error_code ec;
  while (true) {
    if (fs::is_directory(dir, ec))
      if (const int n = limit_of(dir); n > 0) best = best ? std::min(best, n) : n;
    if (dir == top || !dir.has_relative_path() || dir.string().size() <= top.string().size()) break;
    dir = dir.parent_path();
  }
  return best;
}

/// The CPU quota of this process's cgroup, 0 for none. /proc/self/cgroup names the
/// cgroup relative to the mount (in a container: usually "/", the container's own).
int cgroup_quota() {
  std::ifstream f("/proc/self/cgroup");
  int best = 0;
  auto take = [&](int n) {
    if (n > 0) best = best ? std::min(best, n) : n;
  };
  for (std::string line; std::getline(f, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
    if (controllers.empty()) {  // v2 (hybrid hosts mount it at unified/)
      for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      const fs::path top = mount;
      take(min_quota(under(top, rel), top, [](const fs::path& d) { return cpus_from_cpu_max(read_text(d / "cpu.max")); }));
      }
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {  // v1
      for (const char* mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        const fs::path top = mount;
        take(min_quota(under(top, rel), top, [](const fs::path& d) {
          const long long q = std::atoll(read_text(d / "cpu.cfs_quota_us").c_str());
          const long long p = std::atoll(read_text(d / "cpu.cfs_period_us").c_str());
          return q > 0 && p > 0 ? ceil_div(q, p) : 0;
        }));
      }
    }
  }
  return best;
}

}  // namespace

int cpus_from_cpu_max(const std::string& text) {
  std::istringstream in(text);
  in.imbue(std::locale::classic());  // numbers in every locale
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || period <= 0 || quota == "max") return 0;
  char* end = nullptr;
  const long long q = std::strtoll(quota.c_str(), &end, 10);
  if (*end != '\0' || q <= 0) return 0;
  return ceil_div(q, period);
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = 1;
  if (const int q = cgroup_quota(); q > 0) n = std::min(n, q);
  return std::max(n, 1);
}

}  // namespace corridorkey::config
