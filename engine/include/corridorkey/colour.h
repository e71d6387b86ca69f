// Colour spaces the engine can read plates in and write outputs in (docs/colour.md): the
// built-in names, made from OpenColorIO's built-in transforms and the same whatever $OCIO
// says, and the colour spaces of an OCIO config; and the conversions a viewer needs to show
// plates and outputs on a display (`corridorkey-engine review`). Torch-free.
//
// Thread-safety: every function may be called from any thread; a ColourConversion is
// immutable once made, and apply() may run on several threads at once (on different images).
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/image.h>
#include <corridorkey/version.h>

#include <memory>
#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct ColourSpaceInfo {
  std::string name;
  std::string source;      // "built-in", or the config file it comes from
  std::string transforms;  // the OCIO transforms a built-in name is made of; "" for a config's
  std::string linear;      // its scene-linear form ("linear ARRI Wide Gamut 3"); "" for a config's
};

/// The built-in names, then the colour spaces of the config (`ocio_config`, else $OCIO)
/// when there is one. ConfigError naming the file and OCIO's message when it cannot be read.
CORRIDORKEY_API std::vector<ColourSpaceInfo> list_colour_spaces(const std::string& ocio_config);

/// A conversion of float RGB pixels through OpenColorIO's CPU processor, made once (a config
/// read, a processor built: milliseconds) and applied to many images. Copies share it.
class CORRIDORKEY_API ColourConversion {
 public:
  ColourConversion();  // the identity
  ~ColourConversion();
  ColourConversion(const ColourConversion&);
  ColourConversion& operator=(const ColourConversion&);
  /// Exactly the identity: apply() changes nothing.
  bool identity() const;
  /// In place on an RGB or RGBA image (a 4th channel passes through; a grey image is left
  /// alone), over `threads` threads (the same result for any count).
  void apply(Image& image, int threads = 1) const;
  /// What it does ("sRGB -> Rec.709 linear", "Rec.709 -> sRGB - Display/ACES 1.0 - SDR Video").
  std::string description() const;

  struct Impl;
  explicit ColourConversion(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

/// How `inference` takes a plate file's colour: `input_colorspace` as its flag ("" = the
/// default, srgb; "auto" = told from the file's header as the pipeline tells it; a built-in
/// or config name), with `ocio_config` (else $OCIO) for names that are not built in.
struct PlateColour {
  std::string name;  // the resolved name: "srgb", "linear-rec709", "arri-logc3-ei800-awg", ...
  std::string why;   // "default", "--input-colorspace", "auto: EXR without chromaticities", ...
  bool srgb = true;  // sRGB-encoded: keyed as it is, shown as it is on an sRGB display
  /// The plate's values to scene-linear Rec.709 (the sRGB decode for an sRGB plate).
  ColourConversion to_linear;
};
/// ConfigError for an unknown name or a config that cannot be read.
CORRIDORKEY_API PlateColour plate_colour(const std::string& plate_file, const std::string& input_colorspace,
                                         const std::string& ocio_config);

/// sRGB-encoded values (FG outputs, Comp PNGs, sRGB plates) to scene-linear Rec.709.
CORRIDORKEY_API ColourConversion srgb_to_linear();
/// Scene-linear Rec.709 to a display: `display_view` "" is sRGB (the built-in encoding, no
/// config needed); "DISPLAY/VIEW" is a display and view of the OCIO config (`ocio_config`,
/// else $OCIO). ConfigError naming the config or the display/view it lacks.
CORRIDORKEY_API ColourConversion linear_to_display(const std::string& ocio_config,
                                                   const std::string& display_view);
/// The displays and views of the config (`ocio_config`, else $OCIO) as "DISPLAY/VIEW", in
/// the config's order; empty without a config. ConfigError when it cannot be read.
CORRIDORKEY_API std::vector<std::string> display_views(const std::string& ocio_config);

CORRIDORKEY_NAMESPACE_END
