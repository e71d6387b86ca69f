#include "pipeline/clip_plan.h"
#include "pipeline/frame_stages.h"

#include <corridorkey/check.h>

#include "io/image_io.h"
#include "io/video_writer.h"
#include "post/postprocess.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace corridorkey::pipeline {
namespace fs = std::filesystem;

namespace {
/// Trailing frame number of a file's stem ("plate.0012.exr" -> 12), or -1 when none.
long frame_number(const std::string& path) {
  const auto stem = fs::path(path).stem().string();
  size_t end = stem.size();
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(stem[end - 1]))) --end;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1]))) --begin;
  if (begin == end || end - begin > 9) return -1;
  return std::stol(stem.substr(begin, end - begin));
}

/// The count mismatch, naming the plates without a hint when frame numbers pair them.
std::string mismatch_message(const io::Clip& c, int n, int nh) {
  std::string msg = c.root + ": Input has " + std::to_string(n) + " frames but AlphaHint has " +
                    std::to_string(nh);
  if (c.input.is_video() || c.hint.is_video()) return msg;
  std::vector<long> hints;
  for (const auto& f : c.hint.frames) {
    const long k = frame_number(f);
    if (k < 0) return msg;
    hints.push_back(k);
  }
  std::sort(hints.begin(), hints.end());
  std::vector<std::string> missing;
  for (const auto& f : c.input.frames) {
    const long k = frame_number(f);
    if (k < 0) return msg;
    if (!std::binary_search(hints.begin(), hints.end(), k)) missing.push_back(fs::path(f).filename().string());
  }
  if (missing.empty()) return msg;
  msg += "; no hint numbered like ";
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i) msg += (i ? ", " : "") + missing[i];
  if (missing.size() > 5) msg += " and " + std::to_string(missing.size() - 5) + " more";
  return msg;
}

/// Hints (and mattes) pair with plates by position. When both carry frame numbers and the
/// offset between them changes along the clip (plate 0003 keyed with hint 0004 because hint
/// 0003 is missing and a later one fills the count), the first such pair, for a warning;
/// else "". `noun`: "hint", "garbage matte", ...
std::string numbering_drift(const io::FrameSource& plates, const io::FrameSource& other, int n,
                            const std::string& noun) {
  if (plates.is_video() || other.is_video() || other.frames.size() < 2) return "";
  long offset = 0;
  for (int i = 0; i < n && i < other.count(); ++i) {
    const auto& pf = plates.frames[static_cast<size_t>(i)];
    const auto& hf = other.frames[static_cast<size_t>(i)];
    const long a = frame_number(pf), b = frame_number(hf);
    if (a < 0 || b < 0) return "";
    if (i == 0) offset = b - a;
    else if (b - a != offset)
      return noun + "s pair with plates by position, and their numbering drifts: " +
             fs::path(pf).filename().string() + " is keyed with " + fs::path(hf).filename().string() +
             " (the first " + std::to_string(i) + " pairs differ by " + std::to_string(offset) +
             "); is a " + noun + " frame missing?";
  }
  return "";
}

/// Plates the backing is estimated from (decide_screen): the first, middle and last frame of
/// the clip (a video: its first), whatever --frames selects, so every farm chunk of a clip
/// keys with the same backing colour. A plate that cannot be read is left out (its frame
/// fails later, on its own); when none can be read, the first error is thrown.
std::vector<Image> estimation_plates(const io::Clip& c, int n, bool hint_files,
                                     const io::DecodeLimits& limits, const ClipColour& colour) {
  std::vector<Image> v;
  std::string first_error;
  auto attempt = [&](const std::function<Image()>& read) {
    try {
      v.push_back(read());
    } catch (const IoError& e) {
      if (first_error.empty()) first_error = e.what();
    }
  };
  if (c.input.is_video()) {
    attempt([&] {
      io::VideoReader r(c.input.video, colour.deep_video);
      Image im;
      CK_CHECK(r.next(im), IoError, c.input.video, ": video has no frame");
      return im;
    });
  } else {
    std::vector<int> idx = {0, n / 2, n - 1};
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    io::ImageSize hint_video;  // a hint video's frame size, from its container
    if (hint_files && c.hint.is_video()) try {
        io::VideoReader r(c.hint.video);
        hint_video = {r.width(), r.height()};
      } catch (const IoError&) {  // its frames fail on their own
      }
    for (int i : idx)
      attempt([&] {
        const auto& file = c.input.frames[static_cast<size_t>(i)];
        // A plate of another shape than its hint fails anyway: not decoded here either.
        if (hint_files && !c.hint.is_video() && i < c.hint.count())
          check_shapes_from_headers(file, c.hint.frames[static_cast<size_t>(i)]);
        if (hint_video.width > 0) {
          const auto a = header_size(file);
          check_aspect(file, a.width, a.height, hint_video.width, hint_video.height);
        }
        return io::read_image(file, limits);
      });
  }
  if (v.empty()) throw IoError(first_error);
  return v;
}

/// Decides where the clip's hints come from and which backing it has.
void resolve_hints(ClipPlan& p, const InferenceOptions& job, int& n, Plan& plan,
                   const io::DecodeLimits& limits) {
  const auto& c = p.clip;
  const bool has_files = !c.hint.empty();
  CK_CHECK(has_files || job.hint != HintSource::Files, IoError, c.root,
           ": no AlphaHint/ image sequence or AlphaHint video (--hint chroma, or auto, "
           "generates hints from the plate)");
  p.generate_hint = job.hint == HintSource::Chroma || !has_files;
  p.hint_options.erode = job.hint_erode;
  p.hint_options.blur = job.hint_blur;
  p.backing_check = job.backing_check;
  if (p.generate_hint) {
    plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                           std::string(has_files ? "AlphaHint/ ignored (hint chroma)"
                                                 : "no AlphaHint/") +
                               ": hints generated by a chroma key into " +
                               (p.out / "AlphaHint").string()});
  } else if (n != c.hint.count()) {
    const int nh = c.hint.count();
    CK_CHECK(job.allow_mismatch, IoError, mismatch_message(c, n, nh),
             " (pair by position; --allow-mismatch keys the shorter length, --hint chroma "
             "generates the hints)");
    plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                           "Input has " + std::to_string(n) + " frames, AlphaHint " +
                               std::to_string(nh) + ": keying the first " +
                               std::to_string(std::min(n, nh))});
    n = std::min(n, nh);
  }
  CK_CHECK(n > 0, IoError, c.root, ": no frames in Input");
  if (!p.generate_hint)
    if (auto drift = numbering_drift(c.input, c.hint, n, "hint"); !drift.empty())
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root, std::move(drift)});
  // The backing: needed to generate hints, and (screen auto) to tell green from blue.
  std::vector<std::string> warnings;
  p.screen = decide_screen([&] { return estimation_plates(c, n, !p.generate_hint, limits, p.colour); }, p.colour,
                           job.screen, p.generate_hint, c.root, "--screen green|blue", warnings);
  for (auto& w : warnings) plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root, std::move(w)});
  // Which model keys the clip (and so whether it is swapped) is the pipeline's choice:
  // it knows whether a blue-screen model was given (Pipeline::assign_models).
}

/// Which outputs of the clip also become videos, and at which frame rate.
void resolve_videos(ClipPlan& p, const InferenceOptions& job, Plan& plan) {
  p.videos = job.video_out;
  if (p.videos.auto_) {
    p.videos = VideoOutputs{};
    p.videos.auto_ = false;
    p.videos.comp = p.clip.input.is_video() && job.comp;
  }
  const double src = p.clip.input.video_fps;
  if (job.video_fps > 0) {
    p.fps = job.video_fps;
  } else if (p.clip.input.is_video()) {
    const bool known = std::isfinite(src) && src >= 1 && src <= 1000;
    p.fps = known ? src : 24;
    if (!known && p.videos.any())
      plan.events.push_back({PipelineEvent::Kind::Warning, p.clip.name, "", p.clip.input.video,
                             "the video's frame rate is unknown: deliverables at 24 fps "
                             "(--video-fps sets it)"});
  } else {
    p.fps = 24;
  }
}

/// "a, b, c and 4 more": names in a message, bounded.
std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 5); ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 5) s += " and " + std::to_string(names.size() - 5) + " more";
  return s;
}

fs::path output_folder(const io::Clip& c, const InferenceOptions& job) {
  return io::output_folder(c, job.output_root);
}

/// Two clips of one run writing to one folder would overwrite each other's frames (shots
/// named sh010 in two sequences, under one --output-root): refused before anything is
/// created. Renaming one by order would break --skip-existing when the order changes.
void check_distinct_outputs(const std::vector<io::Clip>& clips, const InferenceOptions& job) {
  std::vector<std::pair<fs::path, const io::Clip*>> seen;
  for (const auto& c : clips) {
    std::error_code ec;
    auto out = fs::weakly_canonical(fs::absolute(output_folder(c, job)), ec);
    if (ec) out = fs::absolute(output_folder(c, job)).lexically_normal();
    for (const auto& [other, oc] : seen)
      CK_CHECK(other != out, ConfigError, "clips '", oc->root, "' and '", c.root,
               "' would both write to ", output_folder(c, job).string(),
               " (outputs of one run need distinct clip names under --output-root; key them "
               "in separate runs or give each its own output root)");
    seen.emplace_back(out, &c);
  }
}

}  // namespace

// Shapes from headers (clip_plan.h): sizes not known (0) are left to the check after decoding.
void check_aspect(const std::string& plate, int64_t pw, int64_t ph, int64_t hw, int64_t hh) {
  if (pw <= 0 || ph <= 0 || hw <= 0 || hh <= 0) return;
  const double ar_p = static_cast<double>(pw) / static_cast<double>(ph);
  const double ar_h = static_cast<double>(hw) / static_cast<double>(hh);
  CK_CHECK(std::fabs(ar_p / ar_h - 1.0) <= 0.01, IoError, plate, ": plate ", pw, "x", ph, " and hint ",
           hw, "x", hh,
           " have different aspect ratios (a hint may differ in size, not in shape; told from "
           "the headers, before decoding)");
}

io::ImageSize header_size(const std::string& file) {
  return io::probe_image_size(file).value_or(io::ImageSize{});
}

void check_shapes_from_headers(const std::string& plate, const std::string& hint) {
  // An overscan plate's hint is the size of its display or its data window, which
  // prepare_frame checks exactly once the plate is read (the header's size is the display's).
  if (io::has_overscan(plate)) return;
  const auto a = header_size(plate), b = header_size(hint);
  check_aspect(plate, a.width, a.height, b.width, b.height);
}

std::vector<std::string> FrameOutputs::all() const {
  std::vector<std::string> v;
  for (const auto* p : {&fg, &matte, &processed, &comp, &layered})
    if (!p->empty()) v.push_back(*p);
  return v;
}

FrameOutputs outputs_for(const ClipPlan& p, const InferenceOptions& job, const std::string& stem) {
  FrameOutputs o;
  if (job.fg) o.fg = (p.out / "FG" / (stem + ".exr")).string();
  if (job.matte) o.matte = (p.out / "Matte" / (stem + ".exr")).string();
  if (job.processed) o.processed = (p.out / "Processed" / (stem + ".exr")).string();
  if (job.comp) o.comp = (p.out / "Comp" / (stem + "." + job.comp_format)).string();
  if (job.layered) o.layered = (p.out / "Layered" / (stem + ".exr")).string();
  return o;
}

namespace {

/// The backing is estimated once per clip, from its first, middle and last plate together.
/// When those plates disagree on their own (green, then blue), frames of the other backing
/// get a hint keyed against the wrong colour: warn, naming them. A plate that cannot be read
/// is left out (its frame fails on its own).
void check_backing_agreement(const ClipPlan& p, int n, Plan& plan, const io::DecodeLimits& limits) {
  const auto& c = p.clip;
  if (!p.generate_hint || c.input.is_video() || n < 2) return;
  std::vector<int> idx = {0, n / 2, n - 1};
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  const char* keyed = p.screen.screen == Screen::Blue ? "blue" : "green";
  std::vector<std::string> odd;
  for (int i : idx) {
    const auto& file = c.input.frames[static_cast<size_t>(i)];
    Image im;
    try {
      im = io::read_image(file, limits);
    } catch (const IoError&) {
      continue;
    }
    if (im.channels < 3) continue;
    decode_plate(p.colour, im);
    if (p.linear) post::linear_to_srgb_inplace(im.pixels.data(), im.pixels.size());
    std::string own;
    try {
      own = estimate_screen({im.view()}, Screen::Auto, file).screen == Screen::Blue ? "blue" : "green";
    } catch (const IoError&) {
      own = "no backing found";
    }
    if (own != keyed) odd.push_back(fs::path(file).filename().string() + " (" + own + ")");
  }
  if (!odd.empty())
    plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                           c.root + ": the sampled plates disagree on the backing: the clip is keyed "
                           "as " + keyed + ", but " + name_list(odd) + "; frames with another "
                           "backing get wrong hints (split the clip, or give it AlphaHint/)"});
}

/// The ffmpeg binary is needed for ProRes; a CORRIDORKEY_FFMPEG naming no program is an
/// error whatever the codec (find_ffmpeg throws). Checked before any folder is created.
void check_video_encoder(const Plan& plan, const InferenceOptions& job) {
  if (std::none_of(plan.clips.begin(), plan.clips.end(), [](const ClipPlan& p) { return p.videos.any(); }))
    return;
  const bool found = !io::find_ffmpeg().empty();
  const char* env = std::getenv("CORRIDORKEY_FFMPEG");
  CK_CHECK(found || job.video_codec != VideoCodec::ProRes, ConfigError,
           "video_codec prores needs the ffmpeg binary (",
           env && *env ? "CORRIDORKEY_FFMPEG=none turns it off" : "none found on PATH; the "
           "environment variable CORRIDORKEY_FFMPEG names one", ")");
}

/// Output folders made and a killed run's temporary files removed.
void make_output_folders(ClipPlan& p, const InferenceOptions& job, Plan& plan, bool& warned_locks) {
  const auto& c = p.clip;
  // The folders of the outputs asked for are made (`--outputs matte` used to leave empty FG/,
  // Processed/ and Comp/ behind); the others, where a run made them, are only swept of a
  // killed run's temporary files.
  std::vector<std::pair<fs::path, bool>> dirs = {{p.out / "FG", job.fg},
                                                 {p.out / "Matte", job.matte},
                                                 {p.out / "Processed", job.processed},
                                                 {p.out / "Comp", job.comp},
                                                 {p.out / "Layered", job.layered},
                                                 {p.out, true}};  // p.out: videos
  if (p.generate_hint) dirs.emplace_back(p.out / "AlphaHint", true);
  for (const auto& [d, wanted] : dirs) {
    std::string sweep = d.string();
    if (plan.pins) {
      // Confined: only the folders this run writes are opened, made and swept, each through
      // its own descriptor (a link under the confining folders is never followed).
      if (!wanted) continue;
      sweep = plan.pins->pin(d.string(), /*create=*/true);
    } else {
      std::error_code ec;
      if (!wanted && !fs::is_directory(d, ec)) continue;
      if (wanted) fs::create_directories(d, ec);
      CK_CHECK(!ec && fs::is_directory(d), IoError, d.string(),
               ": output folder cannot be created (", ec ? ec.message() : "not a folder", ")");
    }
    // Leftovers of a run killed mid-write (SIGKILL, power loss): its temp files.
    const auto tmp = io::remove_stale_temp_files(sweep);
    if (tmp.removed)
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", d.string(),
                             "removed " + std::to_string(tmp.removed) +
                                 " temporary file(s) left by a killed run"});
    if (tmp.locks_refused && !warned_locks) {  // once per run: it is the filesystem's doing
      warned_locks = true;
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", d.string(),
                             d.string() + ": this filesystem refuses file locks, so a live "
                             "writer's temporary file cannot be told from a killed run's: none "
                             "is removed (delete .ck-tmp-l.* files by hand when no run writes here)"});
    }
    if (!tmp.unrecognised.empty())
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", d.string(),
                             d.string() + ": left alone, named like temporary files but not "
                             "written by this engine: " + name_list(tmp.unrecognised)});
  }
}

/// (skip-existing) The frames whose outputs are complete taken out of p.frames.
void select_frames(ClipPlan& p, const InferenceOptions& job, Plan& plan, const io::DecodeLimits& limits) {
  const auto& c = p.clip;
  std::vector<int> todo;
  for (int i : p.frames) {
    if (job.skip_existing) {
      const auto outs = outputs_for(p, job, p.stems[i]).all();
      if (std::all_of(outs.begin(), outs.end(),
                      [&](const std::string& o) { return io::readable_output(o, limits); })) {
        ++plan.frames_skipped;
        plan.events.push_back({PipelineEvent::Kind::FrameSkipped, c.name, p.stems[i],
                               outs.front(), "outputs exist"});
        continue;
      }
    }
    todo.push_back(i);
  }
  p.frames = std::move(todo);
  plan.frames_total += static_cast<int>(p.frames.size());
}

}  // namespace

void make_output_folders(Plan& plan, const InferenceOptions& job) {
  bool warned_locks = false;
  if (!job.confine_writes.empty() && !plan.pins) plan.pins = std::make_shared<io::PinnedFolders>(job.confine_writes);
  for (auto& p : plan.clips) make_output_folders(p, job, plan, warned_locks);
}

Plan plan_job(const InferenceOptions& job) {
  Plan plan;
  // The budget is read once, here (after the model is loaded): a frame is refused or not
  // whatever the memory does during the run. Planning reads one plate at a time.
  plan.decode = io::decode_limits(job.max_pixels, job.decode_budget_mb, job.read_workers);
  io::DecodeLimits one = plan.decode;
  one.workers = 1;
  const auto clips = io::discover_clips(job.paths, &plan.clips_skipped);
  for (const auto& why : plan.clips_skipped)  // a symbolic link loop, an unreadable folder
    plan.events.push_back({PipelineEvent::Kind::Warning, "", "", "", why});
  check_distinct_outputs(clips, job);
  const JobColour colour = resolve_job_colour(job);  // a bad name: exit 2 before any clip
  // Everything that can refuse the run is decided for every clip first; output folders are
  // made later (make_output_folders), once the clips' models have loaded: a refused run, or
  // a blue-screen model that fails to load, leaves no empty Output/ behind.
  for (const auto& c : clips) {
    ClipPlan p;
    p.clip = c;
    for (const auto& w : c.warnings)
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root, w});
    int n = c.input.count();
    const bool exr = !c.input.is_video() && fs::path(c.input.frames[0]).extension() == ".exr";
    std::vector<std::string> colour_warnings;
    p.colour = clip_colour(colour, c, colour_warnings);
    for (const auto& w : colour_warnings)
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root, w});
    p.linear = p.colour.linear;
    if (exr && !p.linear && p.colour.why == "default")
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                             "EXR plates keyed as sRGB (the reference's default); pass --linear "
                             "(or --input-colorspace NAME, or auto) if they are scene-linear"});
    p.out = output_folder(c, job);
    resolve_hints(p, job, n, plan, one);
    std::vector<std::string> matte_warnings;
    p.mattes = resolve_mattes(c, job, n, matte_warnings);
    for (auto [src, noun] : {std::pair{&p.mattes.garbage, "garbage matte"},
                             std::pair{&p.mattes.holdout, "holdout matte"}})
      if (auto drift = numbering_drift(c.input, *src, n, noun); !drift.empty())
        matte_warnings.push_back(std::move(drift));
    for (auto& w : matte_warnings)
      plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root, std::move(w)});
    check_backing_agreement(p, n, plan, one);
    resolve_videos(p, job, plan);
    for (int i = 0; i < n; ++i)
      p.stems.push_back(io::output_stem(c, i));
    if (job.frames.empty()) {
      for (int i = 0; i < n; ++i) p.frames.push_back(i);
    } else {
      int asked = 0;
      p.frames = io::parse_frame_ranges(job.frames, n, &asked);
      CK_CHECK(!p.frames.empty(), ConfigError, "--frames '", job.frames, "' selects no frame of clip '",
               c.name, "', which has ", n, " frames (1-", n, ")");
      if (asked > n)
        plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                               "--frames '" + job.frames + "' reaches position " + std::to_string(asked) +
                                   ", but the clip has " + std::to_string(n) + " frames: positions past " +
                                   std::to_string(n) + " are not keyed"});
      // Positions, not frame numbers: on a sequence numbered from 1001, --frames 1005 is its
      // 1005th file (2005), not 1005. Said once per clip where the two differ.
      if (!c.input.is_video()) {
        const auto& stem = p.stems[static_cast<size_t>(p.frames.front())];
        size_t k = stem.size();
        while (k > 0 && std::isdigit(static_cast<unsigned char>(stem[k - 1]))) --k;
        if (k < stem.size() && stem.size() - k <= 9 && std::stol(stem.substr(k)) != p.frames.front() + 1)
          plan.events.push_back({PipelineEvent::Kind::Warning, c.name, "", c.root,
                                 "--frames counts positions in the sequence (1 = its first file), not the "
                                 "numbers in the file names: position " + std::to_string(p.frames.front() + 1) +
                                     " is " + fs::path(c.input.frames[static_cast<size_t>(p.frames.front())]).filename().string()});
      }
    }
    plan.clips.push_back(std::move(p));
  }
  check_video_encoder(plan, job);
  for (auto& p : plan.clips) select_frames(p, job, plan, one);
  return plan;
}

}  // namespace corridorkey::pipeline
