#include "io/clip.h"

#include "io/image_io.h"

#include <corridorkey/errors.h>
#include <corridorkey/version.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

namespace corridorkey::io {
namespace fs = std::filesystem;

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      auto na = a.substr(i, i2 - i), nb = b.substr(j, j2 - j);
      na.erase(0, std::min(na.find_first_not_of('0'), na.size()));
      nb.erase(0, std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i2;
      j = j2;
    } else {
      const int ca = std::tolower(static_cast<unsigned char>(a[i]));
      const int cb = std::tolower(static_cast<unsigned char>(b[j]));
      if (ca != cb) return ca < cb;
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;  // deterministic tie-break (e.g. leading zeros)
}

namespace {

bool hidden(const fs::path& p) {
  const auto n = p.filename().string();
  return n.empty() || n[0] == '.' || n[0] == '_';
}

/// Input/ or AlphaHint/: an image sequence, or one video inside; or <name>.<video ext>.
bool find_source(const fs::path& clip, const std::string& name, FrameSource& src) {
  std::error_code ec;
  const auto dir = clip / name;
  if (fs::is_directory(dir, ec)) {
    std::vector<std::string> images, videos;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (hidden(e.path())) continue;
      std::error_code lec;
      // A frame that is a dangling link would only show as a short count (and pair frames
      // wrongly under --allow-mismatch): name it.
      CK_CHECK(!(e.is_symlink(lec) && !fs::exists(e.path(), lec)), IoError, e.path().string(),
               ": broken symbolic link (its target does not exist)");
      if (!e.is_regular_file()) continue;
      const auto p = e.path().string();
      if (is_image_file(p)) images.push_back(p);
      else if (is_video_file(p)) videos.push_back(p);
    }
    std::sort(images.begin(), images.end(), [](const auto& a, const auto& b) {
      return natural_less(fs::path(a).filename().string(), fs::path(b).filename().string());
    });
    if (!images.empty()) {
      src.frames = std::move(images);
      return true;
    }
    if (videos.size() == 1) {
      src.video = videos[0];
      return true;
    }
    CK_CHECK(videos.size() <= 1, IoError, dir.string(), ": ", videos.size(),
             " videos found; expected one video or an image sequence");
    return false;
  }
  for (const auto& e : fs::directory_iterator(clip, ec))
    if (e.is_regular_file() && e.path().stem() == name && is_video_file(e.path().string())) {
      src.video = e.path().string();
      return true;
    }
  return false;
}

bool looks_like_clip(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p / "Input", ec)) return true;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_regular_file() && e.path().stem() == "Input" && is_video_file(e.path().string()))
      return true;
  return false;
}

Clip load_clip(const fs::path& p) {
  Clip c;
  c.root = p.string();
  c.name = fs::path(p).filename().string();
  CK_CHECK(find_source(p, "Input", c.input), IoError, p.string(),
           ": no Input/ image sequence or Input video found");
  find_source(p, "AlphaHint", c.hint);  // optional: hints can be generated
  if (c.input.is_video()) {
    VideoReader v(c.input.video);
    c.input.video_frames = v.frame_count();
    c.input.video_fps = v.fps();
  }
  if (c.hint.is_video()) c.hint.video_frames = VideoReader(c.hint.video).frame_count();
  return c;
}

}  // namespace

std::vector<Clip> discover_clips(const std::vector<std::string>& paths) {
  std::vector<Clip> clips;
  for (const auto& raw : paths) {
    std::error_code ec;
    fs::path p = fs::path(raw).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    CK_CHECK(fs::is_directory(p, ec), IoError, raw, ": not a folder (expected a clip folder or a "
             "folder of clips)");
    if (looks_like_clip(p)) {
      clips.push_back(load_clip(p));
      continue;
    }
    fs::path root = fs::is_directory(p / "clips", ec) ? p / "clips" : p;
    std::vector<fs::path> subs;
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory() && !hidden(e.path()) && looks_like_clip(e.path())) subs.push_back(e.path());
    std::sort(subs.begin(), subs.end(), [](const auto& a, const auto& b) {
      return natural_less(a.filename().string(), b.filename().string());
    });
    CK_CHECK(!subs.empty(), IoError, raw, ": no clips found (a clip folder has Input/ and "
             "optionally AlphaHint/; a clips root has clips/<name>/ or <name>/ subfolders)");
    for (const auto& s : subs) clips.push_back(load_clip(s));
  }
  return clips;
}

std::vector<int> parse_frame_ranges(const std::string& spec, int count) {
  std::set<int> out;
  std::stringstream ss(spec);
  std::string part;
  auto bad = [&](const std::string& why) {
    throw ConfigError("--frames '" + spec + "': " + why + " (expected A-B[,C-D] or N, 1-based)");
  };
  while (std::getline(ss, part, ',')) {
    if (part.empty()) bad("empty range");
    const auto dash = part.find('-');
    try {
      size_t used = 0;
      const int a = std::stoi(part.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? part.size() : dash)) bad("'" + part + "' is not a number range");
      int b = a;
      if (dash != std::string::npos) {
        b = std::stoi(part.substr(dash + 1), &used);
        if (used != part.size() - dash - 1) bad("'" + part + "' is not a number range");
      }
      if (a < 1 || b < a) bad("'" + part + "' must satisfy 1 <= A <= B");
      for (int i = a; i <= b && i <= count; ++i) out.insert(i - 1);
    } catch (const std::logic_error&) {
      bad("'" + part + "' is not a number range");
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace corridorkey::io
