// Colour decisions of a run (docs/colour.md): which colour space each clip's plates are
// in and why, how they are decoded to the scene-linear Rec.709 the --linear path keys, and
// the spaces of the Processed, FG and Comp outputs. Names are resolved once per run (an
// unknown name or a broken config is a usage error before any clip is read); `auto` is
// decided per clip from its first frame's header. Torch-free.
#pragma once

#include <corridorkey/image.h>
#include <corridorkey/options.h>

#include "colour/conversion.h"
#include "io/clip.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

struct ClipColour {
  std::string input = "srgb";  // the resolved input name
  std::string why = "default"; // "--input-colorspace", "EXR chromaticities are AP0", ...
  /// Plate values to scene-linear Rec.709; null when there is nothing to do (srgb plates
  /// go to the model as they are; linear-rec709 is exactly the identity).
  std::shared_ptr<const colour::Conversion> decode;
  bool linear = false;       // keyed through the --linear path (every input but srgb)
  bool deep_video = false;   // a video input decoded at 16 bits (input not srgb)
  /// Scene-linear Rec.709 to the Processed EXR's space / the FG EXR's / Comp's view; null =
  /// as today (Processed scene-linear Rec.709, FG sRGB-encoded, Comp the sRGB preview).
  std::shared_ptr<const colour::Conversion> processed, fg, comp;
  std::optional<colour::Chromaticities> processed_xy, fg_xy;
  std::string processed_title = "scene-linear Rec.709", fg_title = "sRGB", comp_title = "sRGB";
  /// The one line per clip: what was chosen and why.
  std::string summary() const;
};

/// The names of a run, resolved (ConfigError, exit 2, for a bad one).
struct JobColour {
  std::string input;  // a name or "auto"
  std::string why;
  std::optional<colour::Space> input_space, output_space, fg_space;
  std::shared_ptr<const colour::Conversion> comp;
  std::string comp_view;
};
JobColour resolve_job_colour(const InferenceOptions& job);
/// The same names for one frame (key_frame's FrameSettings): the input's, then the outputs'.
JobColour resolve_frame_colour(const std::string& input_colorspace, ColorSpace color,
                               const std::string& ocio_config, const std::string& output_colorspace = "",
                               const std::string& fg_colorspace = "", const std::string& comp_view = "");

/// A clip's colour: `auto` decided from its first plate; warnings (a log DPX under auto)
/// appended to `warnings`.
ClipColour clip_colour(const JobColour& job, const io::Clip& clip,
                       std::vector<std::string>& warnings);
/// Decodes a plate (RGB or RGBA; grey is left alone) to scene-linear Rec.709 in place.
void decode_plate(const ClipColour& c, Image& plate);
/// The same for one plate file (key_frame).
ClipColour file_colour(const JobColour& job, const std::string& plate_file, bool video,
                       std::vector<std::string>& warnings);

}  // namespace corridorkey::pipeline
