// The public colour conversions for looking at frames (corridorkey/colour.h): a plate's
// colour decided exactly as the clip pipeline decides it (clip_colour.cpp), the sRGB decode
// of the sRGB-encoded outputs, and scene-linear to a display or a config's view.
#include <corridorkey/colour.h>
#include <corridorkey/errors.h>

#include "colour/conversion.h"
#include "colour/spaces.h"
#include "io/image_io.h"
#include "pipeline/clip_colour.h"

CORRIDORKEY_NAMESPACE_BEGIN

struct ColourConversion::Impl {
  colour::Conversion conversion;
};

ColourConversion::ColourConversion() : impl_(std::make_shared<const Impl>()) {}
ColourConversion::ColourConversion(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ColourConversion::~ColourConversion() = default;
ColourConversion::ColourConversion(const ColourConversion&) = default;
ColourConversion& ColourConversion::operator=(const ColourConversion&) = default;
bool ColourConversion::identity() const { return impl_->conversion.identity(); }
std::string ColourConversion::description() const {
  return identity() ? "identity" : impl_->conversion.description();
}
void ColourConversion::apply(Image& image, int threads) const {
  impl_->conversion.apply(image.pixels.data(), static_cast<int64_t>(image.width) * image.height,
                          image.channels, threads);
}

namespace {
ColourConversion wrap(colour::Conversion c) {
  return ColourConversion(std::make_shared<const ColourConversion::Impl>(ColourConversion::Impl{std::move(c)}));
}
const colour::Space& srgb_space() {
  static const colour::Space s = colour::resolve("srgb", "");
  return s;
}
}  // namespace

PlateColour plate_colour(const std::string& plate_file, const std::string& input_colorspace,
                         const std::string& ocio_config) {
  const auto job = pipeline::resolve_frame_colour(input_colorspace, ColorSpace::Srgb, ocio_config);
  std::vector<std::string> warnings;  // a log DPX under auto: the pipeline warns; a viewer shows `why`
  const auto c = pipeline::file_colour(job, plate_file, io::is_video_file(plate_file), warnings);
  PlateColour p;
  p.name = c.input;
  p.why = c.why;
  p.srgb = !c.linear;
  p.to_linear = p.srgb ? srgb_to_linear() : c.decode ? wrap(*c.decode) : ColourConversion();
  return p;
}

ColourConversion srgb_to_linear() {
  static const ColourConversion c = wrap(colour::to_working(srgb_space()));
  return c;
}

ColourConversion linear_to_display(const std::string& ocio_config, const std::string& display_view) {
  if (display_view.empty()) {
    static const ColourConversion c = wrap(colour::from_working(srgb_space(), /*linear_form=*/false));
    return c;
  }
  return wrap(colour::working_to_view(colour::config_file(ocio_config), display_view));
}

std::vector<std::string> display_views(const std::string& ocio_config) {
  const auto file = colour::config_file(ocio_config);
  return file.empty() ? std::vector<std::string>{} : colour::config_display_views(file);
}

CORRIDORKEY_NAMESPACE_END
