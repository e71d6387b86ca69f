#include "io/decode_budget.h"

#include <corridorkey/check.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <locale>
#include <sstream>

namespace corridorkey::io {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

/// The first number of a file (a cgroup's memory.max, memory.current), -1 when it holds
/// none ("max": no limit).
int64_t read_number(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!(f >> s) || s.empty() || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }) || s.size() > 18) return -1;
  return std::stoll(s);
}

/// Free room (limit - usage) of a cgroup folder and its ancestors up to `top`, the least of
/// them; -1 when none has a limit. Names the files: v2 memory.max / memory.current, v1
/// memory.limit_in_bytes / memory.usage_in_bytes.
int64_t cgroup_room(fs::path dir, const fs::path& top, const char* limit, const char* usage) {
  int64_t best = -1;
  std::error_code ec;
  for (int guard = 0; guard < 64; ++guard) {
    if (fs::is_directory(dir, ec)) {
      const int64_t l = read_number(dir / limit), u = read_number(dir / usage);
      // v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages): beyond 2^60, none.
      if (l >= 0 && u >= 0 && l < (int64_t{1} << 60)) {
        const int64_t room = std::max<int64_t>(l - u, 0);
        best = best < 0 ? room : std::min(best, room);
      }
    }
    if (dir == top || dir.string().size() <= top.string().size()) break;
    dir = dir.parent_path();
  }
  return best;
}

int64_t cgroup_room_of_self() {
  std::ifstream f("/proc/self/cgroup");
  int64_t best = -1;
  for (std::string line; std::getline(f, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const fs::path rel = fs::path(line.substr(b + 1)).relative_path();
    int64_t r = -1;
    if (controllers.empty())
      r = cgroup_room(fs::path("/sys/fs/cgroup") / rel, "/sys/fs/cgroup", "memory.max", "memory.current");
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      r = cgroup_room(fs::path("/sys/fs/cgroup/memory") / rel, "/sys/fs/cgroup/memory",
                      "memory.limit_in_bytes", "memory.usage_in_bytes");
    if (r >= 0) best = best < 0 ? r : std::min(best, r);
  }
  return best;
}

}  // namespace

int64_t decode_bytes(const ImageSize& s, uint64_t exr_chunk_bytes) {
  const int64_t px = std::max<int64_t>(s.width, 0) * std::max<int64_t>(s.height, 0);
  const int64_t ch = s.channels > 0 ? s.channels : 4, bps = s.bytes_per_sample > 0 ? s.bytes_per_sample : 4;
  if (exr_chunk_bytes) return px * ch * 4 + static_cast<int64_t>(exr_chunk_bytes);
  // read_cv: the decoder's image (and its own whole-image buffers) alive while it is
  // converted into the float image: 8-bit RGB is 3 x (1 + 4) = 15 bytes a pixel.
  return px * ch * (bps * (1 + s.decoder_copies) + 4);
}

int64_t mem_available_from_meminfo(const std::string& meminfo) {
  std::istringstream in(meminfo);
  in.imbue(std::locale::classic());  // numbers in every locale
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream v(line.substr(13));
    v.imbue(std::locale::classic());  // numbers in every locale
    long long kb = -1;
    std::string unit;
    if (v >> kb >> unit && kb >= 0 && unit == "kB") return kb * 1024;
    return -1;
  }
  return -1;
}

int64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::stringstream ss;
  ss.imbue(std::locale::classic());  // numbers in every locale
  ss << f.rdbuf();
  int64_t avail = mem_available_from_meminfo(ss.str());
  const int64_t room = cgroup_room_of_self();
  if (room >= 0) avail = avail < 0 ? room : std::min(avail, room);
  return avail;
}

DecodeLimits decode_limits(int64_t max_pixels, int64_t budget_mb, int workers) {
  DecodeLimits l;
  l.max_pixels = max_pixels;
  l.workers = std::max(workers, 1);
  if (budget_mb > 0) {
    l.budget_bytes = budget_mb * kMiB;
    l.origin = "--decode-budget-mb " + std::to_string(budget_mb);
  } else if (const int64_t avail = available_memory_bytes(); avail > 0) {
    l.budget_bytes = avail / 2;
    l.origin = "half of the " + std::to_string(avail / kMiB) +
               " MiB this process could still use when the run started (MemAvailable, cgroup "
               "limit); --decode-budget-mb sets it";
  }
  return l;
}

void check_decode_budget(const std::string& path, const ImageSize& s, uint64_t exr_chunk_bytes,
                         const DecodeLimits& l) {
  if (l.budget_bytes <= 0) return;
  const int64_t one = decode_bytes(s, exr_chunk_bytes);
  // Both factors are bounded (pixels by --max-pixels, workers by 64): no overflow.
  const int64_t all = one * l.workers;
  CK_CHECK(all <= l.budget_bytes, IoError, path, ": header declares ", s.width, "x", s.height,
           s.channels > 0 ? " x " + std::to_string(s.channels) + " channels" : std::string(" (channels unknown: 4 assumed)"),
           "; decoding it would hold ", one / kMiB, " MiB, x ", l.workers, " read worker(s) = ",
           all / kMiB, " MiB, more than the decode budget of ", l.budget_bytes / kMiB, " MiB (",
           l.origin, "); refused before decoding");
}

}  // namespace corridorkey::io
