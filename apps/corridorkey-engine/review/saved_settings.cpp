// Save settings: the tweak's post-processing and every engine field the review keys with,
// as a job file beside the clip's outputs (docs/review.md), and the command lines that
// apply it. Nothing applies it on its own.
#include "review/key_jobs.h"

#include <corridorkey/base/atomic_write.h>
#include <corridorkey/errors.h>
#include <corridorkey/job.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>
#include <corridorkey/version.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>

namespace corridorkey::review {
namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-+=:,") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

/// Text for a `#` comment line: a control character (a newline in a folder name) would end
/// the comment and start YAML of the name's choosing.
std::string comment_text(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}

/// A YAML double-quoted scalar: a JSON string is one.
std::string yaml_string(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

/// The engine fields a key runs with that its profile does not give (the review's own flags:
/// checkpoint, checkpoint_blue, img_size, precision, device, ...), as job-file lines (Run
/// fields at the top level, profile fields under `overrides:`) and as `inference` flags.
/// The tweak's post-processing is written by the caller. Paths are made absolute: a job
/// file reads relative paths from its own folder.
struct ModelFields {
  std::string top, overrides, flags;
};
ModelFields model_fields(const Profile& o, const Profile& profile) {
  ModelFields m;
  for (const auto& f : engine_option_fields()) {
    if (f.key == "despill" || f.key == "despeckle" || f.key == "despeckle_size") continue;
    std::string v = option_value(o, f.key);
    if (v == option_value(profile, f.key)) continue;
    if (!v.empty() && f.allowed.find("path") != std::string::npos) {
      const bool folder = v.back() == '/';  // tune_cache: a trailing '/' names a folder cache
      v = fs::absolute(v).lexically_normal().string();
      if (folder && v.back() != '/') v += '/';
    }
    (f.scope == OptionScope::Profile ? m.overrides : m.top) +=
        (f.scope == OptionScope::Profile ? "  " : "") + f.key + ": " + yaml_string(v) + "\n";
    std::string flag = "--" + f.key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (f.is_switch) m.flags += v == "true" ? " " + flag : " --no-" + flag.substr(2);
    else m.flags += " " + flag + " " + shell_quote(v);
  }
  return m;
}

}  // namespace

json Keying::save_settings(const ClipEntry& c, const PostTweak& t, const std::string& profile) {
  Profile o = cfg_.engine_for(profile);
  o.engine = with_post(o.engine, t);
  const ModelFields model = model_fields(o, load_profile(profile));
  // The folder as checked, held open: the file is written and renamed through it, so a link
  // swapped in for Output/ after the check is not written through.
  const int dirfd = lib_.open_writable_folder(c.clip.output);
  struct CloseDir {
    int fd;
    ~CloseDir() { ::close(fd); }
  } close_dir{dirfd};
  const std::string folder = fs::read_symlink("/proc/self/fd/" + std::to_string(dirfd)).string();
  const auto path = (fs::path(folder) / "review-settings.yaml").string();
  std::string name = "review_";
  for (char ch : c.clip.name) name += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ? ch : '_';
  std::string inference = cfg_.cli + " inference " + shell_quote(c.clip.root) + " --profile " + shell_quote(profile) +
                          " --despill " + number_text(t.despill) + (t.despeckle ? " --despeckle" : " --no-despeckle") +
                          " --despeckle-size " + std::to_string(t.despeckle_size);
  if (!cfg_.output_root.empty()) inference += " --output-root " + shell_quote(cfg_.output_root);
  inference += model.flags;
  const std::string job_run = cfg_.cli + " job run " + shell_quote(path);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
  std::string y;
  y += "# Saved by `corridorkey-engine review` (" + std::string(version_string()) + ") on " + when + ":\n";
  y += "# the post-processing chosen for clip " + comment_text(c.clip.name) + ". Nothing applies it on its own.\n";
  y += "# A job file; to key the clip with it:\n#   " + comment_text(job_run) + "\n";
  y += "# (job run keys frames whose outputs are missing: remove Processed/ and Comp/ to redo\n";
  y += "# keyed frames), or with the same settings as flags:\n#   " + comment_text(inference) + "\n";
  y += "version: 1\nname: " + name + "\nclips:\n  - path: " + yaml_string(c.clip.root) + "\n";
  y += "profile: " + yaml_string(profile) + "\n";
  y += model.top;
  if (!model.overrides.empty()) y += "overrides:\n" + model.overrides;
  if (!cfg_.output_root.empty()) y += "output_root: " + yaml_string(cfg_.output_root) + "\n";
  y += "despill: " + number_text(t.despill) + "\ndespeckle: " + (t.despeckle ? "true" : "false") +
       "\ndespeckle_size: " + std::to_string(t.despeckle_size) + "\n";
  // Whole or not at all: a temporary name in the folder, read back as a job (what `job run`
  // will read), then renamed, both by name relative to the held folder (O_EXCL | O_NOFOLLOW:
  // nothing followed; renameat replaces a link at the final name rather than writing through it).
  base::AtomicWriteOptions w;
  w.dir_fd = dirfd;
  w.exact_mode = false;  // 0644 under the user's umask, as any file they write
  w.temp_name = [] { return ".review-settings.yaml." + std::to_string(::getpid()) + "." + base::random_name_part(); };
  w.validate = [&](const base::TempFile& t) { (void)load_job((fs::path(folder) / t.name()).string()); };
  if (const auto why = base::atomic_write("review-settings.yaml", y, w); !why.empty())
    throw HttpError(500, path + ": not written: " + why);
  return {{"path", path}, {"job_run", job_run}, {"inference", inference}};
}

}  // namespace corridorkey::review
