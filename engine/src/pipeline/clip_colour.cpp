#include "pipeline/clip_colour.h"

#include <corridorkey/check.h>

#include "io/image_io.h"

#include <filesystem>

namespace corridorkey::pipeline {
namespace {

std::shared_ptr<const colour::Conversion> shared(colour::Conversion c) {
  if (c.identity()) return nullptr;
  return std::make_shared<const colour::Conversion>(std::move(c));
}

std::string lower_ext(const std::string& path) {
  auto e = std::filesystem::path(path).extension().string();
  for (auto& ch : e) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return e;
}

/// `auto`: what the first frame's header says, else today's rule (EXR linear, others sRGB).
std::pair<std::string, std::string> detect(const std::string& file, bool video,
                                           std::vector<std::string>& warnings) {
  if (video) return {"srgb", "auto: a video says nothing reliable about its colour space; name it"};
  const auto h = io::read_colour_hints(file);
  if (h.dpx_transfer == 1 || h.dpx_transfer == 3) {
    warnings.push_back(file + ": DPX header says its transfer is " + h.dpx_transfer_name +
                       ", but not which camera: keyed as srgb; name the colour space with "
                       "--input-colorspace (e.g. arri-logc3-ei800-awg)");
    return {"srgb", "auto: DPX, " + h.dpx_transfer_name + " (no camera named)"};
  }
  if (h.has_chromaticities) {
    if (const auto g = colour::match_gamut(h.chromaticities, "ap0,ap1,rec709")) {
      const std::string name = *g == "ap0" ? "aces2065-1" : *g == "ap1" ? "acescg" : "linear-rec709";
      return {name, "auto: EXR chromaticities are " + std::string(colour::gamut(*g).title)};
    }
  }
  if (h.aces_container) return {"aces2065-1", "auto: EXR acesImageContainerFlag"};
  if (lower_ext(file) == ".exr")
    return {"linear-rec709", h.has_chromaticities ? "auto: EXR (chromaticities of no known gamut)"
                                                  : "auto: EXR without chromaticities"};
  return {"srgb", "auto: not an EXR"};
}

ClipColour finish(const JobColour& job, const colour::Space& in, std::string why, bool video) {
  ClipColour c;
  c.input = in.name;
  c.why = std::move(why);
  c.linear = !in.is_srgb();
  if (c.linear) c.decode = shared(colour::to_working(in));
  c.deep_video = video && c.linear;
  const colour::Space& out = job.output_space ? *job.output_space : in;
  c.processed = shared(colour::from_working(out, /*linear_form=*/true));
  c.processed_xy = out.linear_chromaticities();
  c.processed_title = out.linear_title();
  if (job.fg_space && !job.fg_space->is_srgb()) {
    c.fg = std::make_shared<const colour::Conversion>(colour::from_working(*job.fg_space, false));
    c.fg_xy = job.fg_space->linear_chromaticities();
    c.fg_title = job.fg_space->name;
  }
  if (job.comp) {
    c.comp = job.comp;
    c.comp_title = job.comp_view;
  }
  return c;
}

}  // namespace

void decode_plate(const ClipColour& c, Image& im) {
  if (c.decode && im.channels >= 3)
    c.decode->apply(im.pixels.data(), static_cast<int64_t>(im.width) * im.height, im.channels);
}

std::string ClipColour::summary() const {
  std::string s = (linear ? "linear input: " : "sRGB input: ") + input + " (" + why + ")";
  if (decode) s += ", decoded to scene-linear Rec.709 by OCIO";
  if (deep_video) s += ", video decoded at 16 bits";
  s += "; Processed in " + processed_title;
  if (fg_title != "sRGB") s += ", FG in " + fg_title;
  if (comp_title != "sRGB") s += ", Comp through " + comp_title;
  return s;
}

JobColour resolve_frame_colour(const std::string& input_colorspace, ColorSpace color,
                               const std::string& ocio_config, const std::string& output_colorspace,
                               const std::string& fg_colorspace, const std::string& comp_view) {
  JobColour j;
  if (!input_colorspace.empty()) {
    j.input = input_colorspace;
    j.why = "--input-colorspace";
  } else {
    j.input = color == ColorSpace::Linear ? "linear-rec709" : color == ColorSpace::Auto ? "auto" : "srgb";
    j.why = color == ColorSpace::Srgb ? "default" : "color " + std::string(color == ColorSpace::Linear ? "linear" : "auto");
  }
  if (j.input != "auto") j.input_space = colour::resolve(j.input, ocio_config);
  if (!output_colorspace.empty()) j.output_space = colour::resolve(output_colorspace, ocio_config);
  if (!fg_colorspace.empty()) j.fg_space = colour::resolve(fg_colorspace, ocio_config);
  if (!comp_view.empty()) {
    j.comp = std::make_shared<const colour::Conversion>(
        colour::working_to_view(colour::config_file(ocio_config), comp_view));
    j.comp_view = comp_view;
  }
  return j;
}

JobColour resolve_job_colour(const InferenceOptions& job) {
  CK_CHECK(job.input_colorspace.empty() || !job.color_given, ConfigError,
           "input_colorspace '", job.input_colorspace, "' and color (or --linear / --srgb) "
           "both given: color is the deprecated spelling of input_colorspace; give one");
  return resolve_frame_colour(job.input_colorspace, job.color, job.ocio_config, job.output_colorspace,
                              job.fg_colorspace, job.comp_view);
}

ClipColour file_colour(const JobColour& job, const std::string& file, bool video,
                       std::vector<std::string>& warnings) {
  if (job.input_space) return finish(job, *job.input_space, job.why, video);
  auto [name, why] = detect(file, video, warnings);
  return finish(job, colour::resolve(name, ""), why, video);
}

ClipColour clip_colour(const JobColour& job, const io::Clip& c, std::vector<std::string>& warnings) {
  const bool video = c.input.is_video();
  return file_colour(job, video ? c.input.video : c.input.frames.front(), video, warnings);
}

}  // namespace corridorkey::pipeline
