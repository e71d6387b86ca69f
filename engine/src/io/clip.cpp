#include "io/clip.h"

#include "io/image_io.h"

#include <corridorkey/check.h>
#include <corridorkey/version.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <set>
#include <locale>
#include <sstream>
#include <utility>

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

/// Files that tools leave in every folder (Finder, Explorer) and dotfiles: never frames,
/// never worth a warning.
bool silently_ignored(const std::string& n) {
  std::string l = n;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  return n.empty() || n[0] == '.' || l == "thumbs.db";
}

/// A path that cannot be listed or followed: a symbolic link loop, a folder without read
/// permission, a dangling link. Given directly it is an input error; in a clips root, the
/// clip it belongs to is skipped and named.
class Unreachable : public IoError {
 public:
  using IoError::IoError;
};

[[noreturn]] void unreachable(const fs::path& p, const std::error_code& ec) {
  if (ec.value() == ELOOP) throw Unreachable(p.string() + ": symbolic link loop (" + ec.message() + ")");
  throw Unreachable(p.string() + ": cannot be read (" + ec.message() + ")");
}

/// The type of `p` (links followed). A loop, a permission error or a dangling link throws
/// Unreachable; a path that simply does not exist is file_type::not_found.
fs::file_type type_of(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (!ec || st.type() != fs::file_type::not_found) {
    if (ec) unreachable(p, ec);
    return st.type();
  }
  std::error_code lec;
  if (fs::is_symlink(fs::symlink_status(p, lec)))
    // A frame that is a dangling link would only show as a short count (and pair frames
    // wrongly under --allow-mismatch): name it.
    throw Unreachable(p.string() + ": broken symbolic link (its target does not exist)");
  return fs::file_type::not_found;
}

/// The entries of a folder; Unreachable when it cannot be listed (permissions, a loop).
std::vector<fs::path> list_dir(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  if (ec) unreachable(dir, ec);
  return out;
}

/// "a, b, c and 4 more".
std::string name_list(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(), natural_less);
  std::string s;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 8); ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += " and " + std::to_string(names.size() - 8) + " more";
  return s;
}

/// Input/ or AlphaHint/: an image sequence, or one video inside; or <name>.<video ext>.
/// Every entry with a frame extension is a frame, whatever it is: a FIFO, folder, device or
/// broken symbolic link named frame_0002.png then fails when read, as that one frame and by
/// its path, instead of vanishing from the count or stopping the clip. Other entries are
/// named in one warning.
bool find_source(const fs::path& clip, const std::string& name, FrameSource& src,
                 std::vector<std::string>& warnings) {
  const auto dir = clip / name;
  const auto dir_type = type_of(dir);
  // Something else by that name (a FIFO, a file, a device) is a mistake to name, not a clip
  // without that folder: an AlphaHint that is not a folder would have the hints generated.
  CK_CHECK(dir_type == fs::file_type::directory || dir_type == fs::file_type::not_found, IoError,
           dir.string(), ": is ",
           dir_type == fs::file_type::fifo ? "a FIFO (named pipe)"
           : dir_type == fs::file_type::regular ? "a file"
           : dir_type == fs::file_type::socket ? "a socket" : "a device",
           ", not a folder of frames; remove or rename it");
  if (dir_type == fs::file_type::directory) {
    std::vector<std::string> images, videos, others;
    for (const auto& p : list_dir(dir)) {
      const auto n = p.filename().string();
      if (silently_ignored(n)) continue;
      if (is_image_file(n)) {  // whatever it is, a dangling link too: it fails as its frame
        images.push_back(p.string());
        continue;
      }
      auto t = fs::file_type::unknown;  // a dangling link that is no frame: named as ignored
      try {
        t = type_of(p);
      } catch (const Unreachable&) {
      }
      if (is_video_file(n) && t == fs::file_type::regular) videos.push_back(p.string());
      else others.push_back(n + (t == fs::file_type::directory ? "/" : ""));
    }
    std::sort(images.begin(), images.end(), [](const auto& a, const auto& b) {
      return natural_less(fs::path(a).filename().string(), fs::path(b).filename().string());
    });
    if (!others.empty())
      warnings.push_back(dir.string() + ": " + std::to_string(others.size()) +
                         " file(s) ignored, not frames by their extension (docs/clips.md \"Frames\" "
                         "lists them): " + name_list(others));
    if (!images.empty()) {
      if (!videos.empty()) {  // a reference movie dropped beside the plates, say
        std::vector<std::string> names;
        for (const auto& v : videos) names.push_back(fs::path(v).filename().string());
        warnings.push_back(dir.string() + ": " + std::to_string(videos.size()) +
                           " video(s) ignored beside the image sequence: " + name_list(names));
      }
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
  for (const auto& p : list_dir(clip))
    if (p.stem() == name && is_video_file(p.string()) && type_of(p) == fs::file_type::regular) {
      src.video = p.string();
      return true;
    }
  return false;
}

bool looks_like_clip(const fs::path& p) {
  if (type_of(p / "Input") == fs::file_type::directory) return true;
  for (const auto& e : list_dir(p))
    if (e.stem() == "Input" && is_video_file(e.string()) && type_of(e) == fs::file_type::regular)
      return true;
  return false;
}

Clip load_clip(const fs::path& p) {
  Clip c;
  c.root = p.string();
  c.name = fs::path(p).filename().string();
  CK_CHECK(find_source(p, "Input", c.input, c.warnings), IoError, p.string(),
           ": no Input/ image sequence or Input video found");
  find_source(p, "AlphaHint", c.hint, c.warnings);  // optional: hints can be generated
  // A matte folder with no frames is a render that never landed: keying the clip unmatted
  // would pass a wrong key without a word, so it is an input error naming the folder.
  for (auto [name, src] : {std::pair{"GarbageMatte", &c.garbage}, std::pair{"HoldoutMatte", &c.holdout}})
    CK_CHECK(find_source(p, name, *src, c.warnings) || type_of(p / name) != fs::file_type::directory,
             IoError, (p / name).string(),
             ": no image sequence or video in this folder (its clip would be keyed without the "
             "matte); fill it or remove it");
  if (c.input.is_video()) {
    VideoReader v(c.input.video);
    c.input.video_frames = v.frame_count();
    c.input.video_fps = v.fps();
  }
  for (auto* src : {&c.hint, &c.garbage, &c.holdout})
    if (src->is_video()) src->video_frames = VideoReader(src->video).frame_count();
  return c;
}

/// The clips of a clips root. A clip that cannot be read (Unreachable) is skipped and named
/// in `skipped` when the caller reports it; without `skipped` it is an error.
std::vector<Clip> root_clips(const std::string& raw, const fs::path& p, std::vector<std::string>* skipped) {
  const fs::path root = type_of(p / "clips") == fs::file_type::directory ? p / "clips" : p;
  std::vector<std::string> passed;
  auto skip = [&](const Unreachable& u) {
    if (!skipped) throw u;
    passed.push_back(std::string(u.what()) + ": clip skipped");
  };
  std::vector<fs::path> subs;
  for (const auto& e : list_dir(root)) {
    if (hidden(e)) continue;
    try {
      if (type_of(e) == fs::file_type::directory && looks_like_clip(e)) subs.push_back(e);
    } catch (const Unreachable& u) {
      skip(u);
    }
  }
  std::sort(subs.begin(), subs.end(), [](const auto& a, const auto& b) {
    return natural_less(a.filename().string(), b.filename().string());
  });
  std::vector<Clip> clips;
  for (const auto& s : subs) {
    try {
      clips.push_back(load_clip(s));
    } catch (const Unreachable& u) {
      skip(u);
    }
  }
  std::sort(passed.begin(), passed.end());
  CK_CHECK(!clips.empty() || passed.empty(), IoError, raw, ": no clip could be read: ", passed.front(),
           passed.size() > 1 ? " (and " + std::to_string(passed.size() - 1) + " more)" : "");
  CK_CHECK(!clips.empty(), IoError, raw, ": no clips found (a clip folder has Input/ and "
           "optionally AlphaHint/; a clips root has clips/<name>/ or <name>/ subfolders)");
  if (skipped) skipped->insert(skipped->end(), passed.begin(), passed.end());
  return clips;
}

}  // namespace

std::vector<Clip> discover_clips(const std::vector<std::string>& paths, std::vector<std::string>* skipped) {
  std::vector<Clip> clips;
  for (const auto& raw : paths) {
    fs::path p = fs::path(raw).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    const auto type = type_of(p);
    CK_CHECK(type != fs::file_type::not_found, IoError, raw, ": does not exist (expected a clip folder or a "
             "folder of clips)");
    CK_CHECK(type == fs::file_type::directory, IoError, raw, ": not a folder (expected a clip "
             "folder or a folder of clips)");
    if (looks_like_clip(p)) {
      clips.push_back(load_clip(p));
      continue;
    }
    for (auto& c : root_clips(raw, p, skipped)) clips.push_back(std::move(c));
  }
  return clips;
}

FrameSource matte_source(const std::string& path, const std::string& what) {
  FrameSource src;
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const auto type = type_of(p);
  CK_CHECK(type != fs::file_type::not_found, IoError, path, ": does not exist (", what,
           ": a folder of matte frames, an image or a video)");
  if (type == fs::file_type::directory) {
    std::vector<std::string> warnings;
    CK_CHECK(find_source(p.parent_path(), p.filename().string(), src, warnings), IoError, path, ": ",
             what, ": no image sequence or video in this folder");
    return src;
  }
  CK_CHECK(type == fs::file_type::regular, IoError, path, ": ", what, ": not a file or a folder");
  const auto n = p.filename().string();
  if (is_video_file(n)) {
    src.video = p.string();
    src.video_frames = VideoReader(src.video).frame_count();
  } else {
    CK_CHECK(is_image_file(n), IoError, path, ": ", what, ": not an image or a video by its extension");
    src.frames = {p.string()};
  }
  return src;
}

std::string output_folder(const Clip& c, const std::string& output_root) {
  return (output_root.empty() ? fs::path(c.root) / "Output" : fs::path(output_root) / c.name).string();
}

std::string output_stem(const Clip& c, int index) {
  if (!c.input.is_video()) return fs::path(c.input.frames[static_cast<size_t>(index)]).stem().string();
  const auto s = std::to_string(index);
  return std::string(s.size() < 5 ? 5 - s.size() : 0, '0') + s;
}

std::vector<int> parse_frame_ranges(const std::string& spec, int count, int* requested_max) {
  std::set<int> out;
  if (requested_max) *requested_max = 0;
  std::stringstream ss(spec);
  ss.imbue(std::locale::classic());  // numbers in every locale
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
      if (requested_max) *requested_max = std::max(*requested_max, b);
      for (int i = a; i <= b && i <= count; ++i) out.insert(i - 1);
    } catch (const std::logic_error&) {
      bad("'" + part + "' is not a number range");
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace corridorkey::io
