#include "io/plate_metadata.h"

#include "io/exr_attributes.h"
#include "io/image_header.h"

#include <ImfInputFile.h>

#include <ImfFramesPerSecond.h>
#include <ImfRationalAttribute.h>
#include <ImfStandardAttributes.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>

namespace corridorkey::io {

std::shared_ptr<const ExrAttributes> carried_attributes(const Imf::Header& plate) {
  // Pixel layout: the writer sets these for the output's own channels and compression (a
  // plate's dwaCompressionLevel on a PXR24 output, or its `channels`, would misdescribe it);
  // the windows are set from PlateMetadata. Colour: the output's colour space decides it
  // (a plate's ACES primaries on a Rec.709 Processed EXR would be a wrong tag).
  // clang-format off
  static const char* const kLeftOut[] = {
      "channels", "compression", "dataWindow", "displayWindow", "lineOrder", "tiles", "type", "name",
      "chunkCount", "version", "maxSamplesPerPixel", "deepImageState", "preview", "multiView",
      "dwaCompressionLevel", "zipCompressionLevel", "chromaticities", "adoptedNeutral",
      "whiteLuminance", "acesImageContainerFlag"};
  // clang-format on
  auto a = std::make_shared<ExrAttributes>();
  for (auto it = plate.begin(); it != plate.end(); ++it) {
    const std::string name = it.name();
    if (std::find(std::begin(kLeftOut), std::end(kLeftOut), name) != std::end(kLeftOut)) continue;
    a->list.emplace_back(name, std::shared_ptr<const Imf::Attribute>(it.attribute().copy()));
  }
  if (a->list.empty()) return nullptr;
  return a;
}

void add_attributes(const ExrAttributes& a, Imf::Header& out) {
  for (const auto& [name, attr] : a.list) out.insert(name, *attr);
}

std::optional<ExrWindows> exr_windows(const std::string& path) {
  // EXR by its extension, as read_image decides it.
  auto ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext != ".exr") return std::nullopt;
  try {
    check_image_size(path, kDefaultMaxPixels);  // the guard before any EXR is opened
    Imf::InputFile file(path.c_str());
    const auto& d = file.header().displayWindow();
    auto frame = d;
    frame.extendBy(file.header().dataWindow());
    return ExrWindows{{d.min.x, d.min.y, d.max.x, d.max.y},
                      {frame.min.x, frame.min.y, frame.max.x, frame.max.y}};
  } catch (const std::exception&) {  // reading the frame reports the problem
    return std::nullopt;
  }
}

bool has_overscan(const std::string& path) {
  const auto w = exr_windows(path);
  return w && w->frame != w->display;
}

std::shared_ptr<const PlateMetadata> video_metadata(int width, int height, double fps) {
  if (!(fps > 0) || width <= 0 || height <= 0) return nullptr;
  auto m = std::make_shared<PlateMetadata>();
  m->display = m->frame = PixelBox{0, 0, width - 1, height - 1};
  auto a = std::make_shared<ExrAttributes>();
  // 29.97 as 30000/1001, as OpenEXR's framesPerSecond documents it.
  a->list.emplace_back("framesPerSecond",
                       std::make_shared<const Imf::RationalAttribute>(Imf::guessExactFps(fps)));
  m->attributes = std::move(a);
  return m;
}

}  // namespace corridorkey::io
