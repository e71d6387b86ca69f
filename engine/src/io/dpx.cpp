#include "io/dpx.h"

#include "io/exr_attributes.h"
#include "io/image_integrity.h"

#include <corridorkey/check.h>

#include <ImfFloatAttribute.h>
#include <ImfFramesPerSecond.h>
#include <ImfRationalAttribute.h>
#include <ImfTimeCodeAttribute.h>
#include <OpenImageIO/imageio.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

namespace corridorkey::io {
namespace {

// SMPTE 268M: the generic file header is 768 bytes; the image information header follows
// with the orientation (u16), the element count (u16), pixels per line and lines per
// element (u32 each), then eight 72-byte image element records. In the first element,
// byte 20 is the descriptor (50 RGB, 51 RGBA, 6 luma, ...), 21 the transfer
// characteristic, 23 the bit size.
constexpr size_t kImageInfo = 768, kElement = 780;

uint32_t u32(const unsigned char* p, bool be) {
  return be ? (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]
            : (uint32_t{p[3]} << 24) | (p[2] << 16) | (p[1] << 8) | p[0];
}

}  // namespace

std::string DpxHeader::transfer_name() const {
  static const char* names[] = {"user-defined", "printing density", "linear", "logarithmic",
                                "unspecified video", "SMPTE 274M", "ITU-R 709-4",
                                "ITU-R 601-5 B/G", "ITU-R 601-5 M", "composite NTSC",
                                "composite PAL", "Z linear", "Z homogeneous"};
  return transfer >= 0 && transfer < 13 ? names[transfer] : "code " + std::to_string(transfer);
}

bool has_dpx_magic(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // never open a FIFO
  std::ifstream f(path, std::ios::binary);
  std::array<char, 4> m{};
  if (!f.read(m.data(), m.size())) return false;
  const std::string s(m.data(), m.size());
  return s == "SDPX" || s == "XPDS";
}

std::optional<DpxHeader> read_dpx_header(const std::string& path) {
  if (!has_dpx_magic(path)) return std::nullopt;
  try {
    std::ifstream f(path, std::ios::binary);
    std::array<unsigned char, kElement + 24> h{};
    if (!f.read(reinterpret_cast<char*>(h.data()), h.size())) return std::nullopt;
    const bool be = h[0] == 'S';
    DpxHeader d;
    d.size.width = u32(&h[kImageInfo + 4], be);
    d.size.height = u32(&h[kImageInfo + 8], be);
    const int descriptor = h[kElement + 20];
    d.transfer = h[kElement + 21];
    const int bits = h[kElement + 23];
    d.size.channels = descriptor == 51 || descriptor == 52 ? 4 : descriptor == 50 ? 3 : 1;
    d.size.bytes_per_sample = 4;     // decoded as float
    d.size.decoder_copies = 1;       // OpenImageIO's packed buffer of the file's samples
    if (bits != 1 && bits != 8 && bits != 10 && bits != 12 && bits != 16 && bits != 32 && bits != 64)
      return std::nullopt;
    return d;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

/// The DPX header's timecode, frame rate and pixel aspect as the EXR attributes an output
/// carries (timeCode, framesPerSecond, pixelAspectRatio); null when it has none.
std::shared_ptr<const PlateMetadata> dpx_metadata(const OIIO::ImageSpec& spec) {
  auto a = std::make_shared<ExrAttributes>();
  // smpte:TimeCode is the SMPTE 12M packed time and user bits, the layout Imf::TimeCode
  // takes (01:00:00:01 is 0x01000001 in both).
  if (const auto* tc = spec.find_attribute("smpte:TimeCode", OIIO::TypeTimeCode)) {
    const auto* v = static_cast<const unsigned int*>(tc->data());
    a->list.emplace_back("timeCode",
                         std::make_shared<const Imf::TimeCodeAttribute>(Imf::TimeCode(v[0], v[1])));
  }
  const float fps =
      spec.get_float_attribute("dpx:FrameRate", spec.get_float_attribute("FramesPerSecond", 0.f));
  if (fps > 0 && std::isfinite(fps))
    a->list.emplace_back("framesPerSecond",
                         std::make_shared<const Imf::RationalAttribute>(Imf::guessExactFps(fps)));
  const float par = spec.get_float_attribute("PixelAspectRatio", 0.f);
  if (par > 0 && std::isfinite(par) && par != 1.f)
    a->list.emplace_back("pixelAspectRatio", std::make_shared<const Imf::FloatAttribute>(par));
  if (a->list.empty()) return nullptr;
  auto m = std::make_shared<PlateMetadata>();
  m->display = m->frame = PixelBox{0, 0, spec.width - 1, spec.height - 1};
  m->attributes = std::move(a);
  return m;
}

}  // namespace

Image read_dpx(const std::string& path, std::shared_ptr<const PlateMetadata>* metadata) {
  {  // OIIO returns what it has of a DPX cut in its pixel data, without an error: told here.
    std::ifstream f(path, std::ios::binary);
    std::vector<uint8_t> header(kElement + 40);
    f.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size()));
    header.resize(static_cast<size_t>(std::max<std::streamsize>(f.gcount(), 0)));
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const uint64_t need = dpx_bytes_needed(header);
    CK_CHECK(ec || need == 0 || size >= need, IoError, path, ": truncated DPX: its header declares pixel data "
             "to byte ", need, ", the file has ", size, " bytes");
  }
  // OIIO's DPX reader only: ImageInput::open(path) would try every format plugin on a file
  // the DPX reader refuses, widening what a hostile frame can reach.
  auto in = OIIO::ImageInput::create("dpx");
  OIIO::ImageSpec opened;
  CK_CHECK(in && in->open(path, opened), IoError, path, ": cannot read DPX (OpenImageIO: ",
           in ? in->geterror() : OIIO::geterror(), ")");
  const auto& spec = in->spec();
  Image im;
  im.width = spec.width;
  im.height = spec.height;
  im.channels = spec.nchannels >= 4 ? 4 : spec.nchannels >= 3 ? 3 : 1;
  CK_CHECK(im.width > 0 && im.height > 0, IoError, path, ": DPX declares an empty image");
  im.pixels.resize(static_cast<size_t>(im.width) * im.height * im.channels);
  const bool ok = in->read_image(0, 0, 0, im.channels, OIIO::TypeDesc::FLOAT, im.pixels.data());
  // has_error: a reader may log a failure (a short read) and still return true.
  CK_CHECK(ok && !in->has_error(), IoError, path, ": cannot decode DPX (OpenImageIO: ", in->geterror(), ")");
  if (metadata) *metadata = dpx_metadata(spec);
  in->close();
  return im;
}

}  // namespace corridorkey::io
