// The InferenceOptions table (`inference` flags and job-file keys).
#include "config/inference_fields.h"

#include <regex>
#include <locale>
#include <sstream>

namespace corridorkey::config {
namespace {

using O = InferenceOptions;
constexpr auto I = OptionScope::Inference;

/// `outputs`: a comma-separated subset of fg, matte, comp, processed, layered.
Field<O> outputs_row() {
  Field<O> f;
  f.info = {"outputs", I, "comma-separated subset of fg,matte,comp,processed,layered",
            "a comma-separated subset of fg, matte, comp, processed, layered", "", false, {}, {}};
  f.parse = [](O& o, const std::string& v) {
    bool fg = false, matte = false, comp = false, processed = false, layered = false;
    std::stringstream ss(v);
    ss.imbue(std::locale::classic());  // numbers in every locale
    for (std::string s; std::getline(ss, s, ',');) {
      if (s == "fg") fg = true;
      else if (s == "matte") matte = true;
      else if (s == "comp") comp = true;
      else if (s == "processed") processed = true;
      else if (s == "layered") layered = true;
      else return false;
    }
    if (!(fg || matte || comp || processed || layered)) return false;
    o.fg = fg, o.matte = matte, o.comp = comp, o.processed = processed, o.layered = layered;
    return true;
  };
  f.format = [](const O& o) {
    std::string s;
    for (auto [on, name] : {std::pair{o.fg, "fg"}, {o.matte, "matte"}, {o.comp, "comp"},
                            {o.processed, "processed"}, {o.layered, "layered"}}) {
      if (!on) continue;
      if (!s.empty()) s.push_back(',');
      s.append(name);
    }
    return s;
  };
  return f;
}

/// `video_out`: auto, none, or a comma-separated subset of comp, matte, fg.
Field<O> video_out_row() {
  Field<O> f;
  f.info = {"video_out", I,
            "also encode these outputs as <out>/Comp.mp4 (Matte, FG) once their sequence is "
            "complete; auto = comp for video inputs",
            "auto, none, or a comma-separated subset of comp, matte, fg", "", false, {}, {}};
  f.parse = [](O& o, const std::string& v) {
    VideoOutputs vo;
    vo.auto_ = false;
    if (v == "auto") vo.auto_ = true;
    else if (v != "none") {
      std::stringstream ss(v);
      ss.imbue(std::locale::classic());  // numbers in every locale
      for (std::string s; std::getline(ss, s, ',');) {
        if (s == "comp") vo.comp = true;
        else if (s == "matte") vo.matte = true;
        else if (s == "fg") vo.fg = true;
        else return false;
      }
      if (!vo.any()) return false;
    }
    o.video_out = vo;
    return true;
  };
  f.format = [](const O& o) {
    if (o.video_out.auto_) return std::string("auto");
    std::string s;
    for (auto [on, name] : {std::pair{o.video_out.comp, "comp"}, {o.video_out.matte, "matte"},
                            {o.video_out.fg, "fg"}}) {
      if (!on) continue;
      if (!s.empty()) s.push_back(',');
      s.append(name);
    }
    return s.empty() ? std::string("none") : s;
  };
  return f;
}

/// `color` (deprecated spelling of input_colorspace): srgb, linear or auto, and
/// --linear / --srgb. Remembers that it was given: both it and input_colorspace is an error.
Field<O> color_row() {
  auto f = with_shortcuts(
      choice_row<O, ColorSpace>(
          "color", I, &O::color,
          {{"srgb", ColorSpace::Srgb}, {"linear", ColorSpace::Linear}, {"auto", ColorSpace::Auto}},
          "deprecated, use input_colorspace: plates are srgb (reference default), linear "
          "(linear-rec709) or auto (EXR linear, others sRGB)"),
      {{"--linear", "linear"}, {"--srgb", "srgb"}});
  f.parse = [parse = f.parse](O& o, const std::string& v) {
    if (!parse(o, v)) return false;
    o.color_given = true;
    return true;
  };
  return f;
}

/// A colour space name: printable, no control characters (it is printed in messages).
bool colour_name_syntax(const std::string& v) {
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f) return false;
  return v.size() <= 256;
}

bool frame_ranges_syntax(const std::string& v) {
  static const std::regex re(R"(^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$)");
  return v.empty() || std::regex_match(v, re);
}

std::vector<Field<O>> rows() {
  std::vector<Field<O>> r;
  r.push_back(outputs_row());
  r.push_back(choice_row<O, std::string>(
      "exr_compression", I, &O::exr_compression,
      {{"pxr24", "pxr24"}, {"zip", "zip"}, {"zips", "zips"}, {"piz", "piz"}, {"dwaa", "dwaa"},
       {"dwab", "dwab"}, {"rle", "rle"}, {"none", "none"}},
      "EXR codec of FG, Matte, Processed (half float)"));
  r.push_back(choice_row<O, std::string>("comp_format", I, &O::comp_format,
                                         {{"png", "png"}, {"exr", "exr"}},
                                         "Comp as 8-bit sRGB png or half-float exr"));
  r.push_back(text_row<O>("frames", I, &O::frames, "frame ranges A-B[,C-D], 1-based inclusive",
                          "frame ranges like 1-10,20-30", frame_ranges_syntax));
  r.push_back(switch_row<O>("skip_existing", I, &O::skip_existing,
                            "skip frames whose selected outputs all exist and read back"));
  r.push_back(choice_row<O, OnError>("on_error", I, &O::on_error,
                                     {{"stop", OnError::Stop}, {"skip", OnError::Skip}},
                                     "a failed frame stops the run, or is skipped (exit 5)"));
  r.push_back(switch_row<O>("allow_mismatch", I, &O::allow_mismatch,
                            "plate/hint counts differ: key the shorter length, with a warning; more "
                            "garbage/holdout mattes than frames: use the first ones"));
  r.push_back(color_row());
  r.push_back(text_row<O>("input_colorspace", I, &O::input_colorspace,
                          "colour space of the plates: a built-in name (`colorspaces` lists "
                          "them), a colour space of the OCIO config, or auto (EXR headers); "
                          "default: from color (srgb)",
                          "a colour space name or auto", colour_name_syntax));
  r.push_back(text_row<O>("output_colorspace", I, &O::output_colorspace,
                          "colour space of the Processed EXR (linear premultiplied; a log name "
                          "means its linear gamut); default: the input's scene-linear space",
                          "a colour space name", colour_name_syntax));
  r.push_back(text_row<O>("fg_colorspace", I, &O::fg_colorspace,
                          "colour space of the FG EXR; default: sRGB-encoded, as the model "
                          "predicts it", "a colour space name", colour_name_syntax));
  r.push_back(text_row<O>("comp_view", I, &O::comp_view,
                          "Comp through this DISPLAY/VIEW of the OCIO config instead of the sRGB "
                          "preview", "DISPLAY/VIEW of the OCIO config",
                          [](const std::string& v) {
                            const auto k = v.find('/');
                            return v.empty() || (colour_name_syntax(v) && k != std::string::npos &&
                                                 k > 0 && k + 1 < v.size());
                          }));
  r.push_back(path_row<O>("ocio_config", I, &O::ocio_config,
                          "OpenColorIO config for colour space names that are not built in "
                          "(default: $OCIO; never consulted for built-in names)",
                          "a config file"));
  r.push_back(choice_row<O, HintSource>(
      "hint", I, &O::hint,
      {{"auto", HintSource::Auto}, {"files", HintSource::Files}, {"chroma", HintSource::Chroma}},
      "alpha hints from AlphaHint/ (files), a chroma key of the plate written to "
      "<out>/AlphaHint/ (chroma), or auto (files when the clip has AlphaHint/)"));
  r.push_back(choice_row<O, Screen>(
      "screen", I, &O::screen,
      {{"auto", Screen::Auto}, {"green", Screen::Green}, {"blue", Screen::Blue}},
      "backing colour; blue plates are keyed with green and blue swapped around the model"));
  r.push_back(real_row<O>("hint_erode", I, &O::hint_erode,
                          [](double x) { return x >= 0 && x <= 200; },
                          "generated hints: erosion in pixels of a 1080-line frame",
                          "pixels in 0..200"));
  r.push_back(real_row<O>("hint_blur", I, &O::hint_blur,
                          [](double x) { return x >= 0 && x <= 200; },
                          "generated hints: blur radius in pixels of a 1080-line frame",
                          "pixels in 0..200"));
  r.push_back(switch_row<O>("backing_check", I, &O::backing_check,
                            "generated hints: fail a frame whose hint is almost all foreground "
                            "(mean >= 0.99: no backing found in it)"));
  r.push_back(path_row<O>("garbage_matte", I, &O::garbage_matte,
                          "garbage matte for every clip (white: surely background, alpha 0): a "
                          "folder of frames, one image, or a video; default: the clip's "
                          "GarbageMatte/", "a folder, image or video"));
  r.push_back(path_row<O>("holdout_matte", I, &O::holdout_matte,
                          "holdout matte for every clip (white: surely foreground, alpha 1): a "
                          "folder of frames, one image, or a video; default: the clip's "
                          "HoldoutMatte/", "a folder, image or video"));
  r.push_back(video_out_row());
  r.push_back(choice_row<O, VideoCodec>(
      "video_codec", I, &O::video_codec,
      {{"h264", VideoCodec::H264}, {"prores", VideoCodec::ProRes}},
      "video deliverables as H.264 .mp4 or ProRes 4444 .mov (FG with alpha; needs ffmpeg)"));
  r.push_back(real_row<O>("video_fps", I, &O::video_fps,
                          [](double x) { return x == 0 || (x >= 1 && x <= 240); },
                          "frame rate of the videos; 0 = the source video's (24 for sequences)",
                          "0 or a rate in 1..240"));
  r.push_back(int_row<O, int>("read_workers", I, &O::read_workers, 1, 64,
                              "decode + pre-process threads"));
  r.push_back(int_row<O, int>("write_workers", I, &O::write_workers, 1, 64,
                              "post-process + encode threads"));
  r.push_back(int_row<O, int64_t>("max_pixels", I, &O::max_pixels, 1, int64_t{1} << 36,
                                  "refuse frames whose header declares more pixels (before decoding)",
                                  "a pixel count in 1..68719476736"));
  r.push_back(int_row<O, int64_t>("decode_budget_mb", I, &O::decode_budget_mb, 0, int64_t{1} << 24,
                                  "refuse frames whose decoding, summed over the read workers, would "
                                  "hold more MiB (before decoding); 0 = half the available memory",
                                  "0 (auto) or MiB in 1..16777216"));
  r.push_back(int_row<O, int>("io_nice", I, &O::io_nice, 0, 19,
                              "nice level of reader/writer threads, so inference keeps the cores"));
  r.push_back(path_row<O>("output_root", I, &O::output_root,
                          "write <output_root>/<clip>/ instead of <clip>/Output/", "a folder"));
  return r;
}

}  // namespace

const Table<InferenceOptions>& inference_table() {
  static const Table<InferenceOptions> t([] {
    auto r = rows();
    for (auto& f : r) f.info.owner = OptionOwner::Inference;  // the custom rows too
    return r;
  }());
  return t;
}

}  // namespace corridorkey::config
