// The plate's header read with it (read_plate) and written into an output (write_exr):
// windows kept, overscan read whole, attributes carried but for the pixel- and colour-
// describing ones, and a union of windows too large for memory refused before allocating.
#include <corridorkey/errors.h>
#include <corridorkey/frame.h>

#include <catch2/catch.hpp>

#include "io/image_io.h"
#include "io/plate_metadata.h"
#include "pipeline/frame_colour.h"
#include "support/support.h"

#include <ImfChannelList.h>
#include <ImfChromaticities.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfInputFile.h>
#include <ImfOutputFile.h>
#include <ImfStandardAttributes.h>
#include <ImfStringAttribute.h>

#include <fstream>

using namespace corridorkey;

namespace {
using B = Imath::Box2i;
using V = Imath::V2i;

/// A float Y EXR (value 0.5 + 0.01 * index in its data window) with a custom string, a
/// pixel aspect, chromaticities and DWAA compression.
void write_plate(const std::string& path, const B& disp, const B& data) {
  const int w = data.max.x - data.min.x + 1, h = data.max.y - data.min.y + 1;
  Imf::Header header(disp, data, 2.f);
  header.compression() = Imf::ZIP_COMPRESSION;
  header.insert("capturedShot", Imf::StringAttribute("sh010"));
  Imf::addChromaticities(header, Imf::Chromaticities({0.7347f, 0.2653f}, {0.f, 1.f},
                                                     {0.0001f, -0.077f}, {0.32168f, 0.33767f}));
  header.channels().insert("Y", Imf::Channel(Imf::FLOAT));
  std::vector<float> px(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < px.size(); ++i) px[i] = 0.5f + 0.01f * static_cast<float>(i);
  Imf::FrameBuffer fb;
  fb.insert("Y", Imf::Slice::Make(Imf::FLOAT, px.data(), data, sizeof(float), sizeof(float) * w));
  Imf::OutputFile out(path.c_str(), header);
  out.setFrameBuffer(fb);
  out.writePixels(h);
}
}  // namespace

TEST_CASE("a plate EXR is read in its data and display windows together; outputs keep them",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("plate_metadata");
  struct Case {
    const char* name;
    B disp, data, frame;
  };
  for (const Case& c :
       {Case{"same", B(V(0, 0), V(4, 2)), B(V(0, 0), V(4, 2)), B(V(0, 0), V(4, 2))},
        Case{"overscan", B(V(0, 0), V(4, 2)), B(V(-2, -1), V(6, 3)), B(V(-2, -1), V(6, 3))},
        Case{"bbox", B(V(0, 0), V(9, 5)), B(V(3, 2), V(7, 4)), B(V(0, 0), V(9, 5))},
        Case{"outside", B(V(0, 0), V(4, 2)), B(V(-16, 7), V(-12, 9)), B(V(-16, 0), V(4, 9))}}) {
    INFO(c.name);
    const auto path = (root / (std::string(c.name) + ".exr")).string();
    write_plate(path, c.disp, c.data);
    std::shared_ptr<const io::PlateMetadata> meta;
    const auto im = io::read_plate(path, io::DecodeLimits{}, meta);
    REQUIRE(meta);
    const int fw = c.frame.max.x - c.frame.min.x + 1, fh = c.frame.max.y - c.frame.min.y + 1;
    REQUIRE((im.width == fw && im.height == fh && im.channels == 1));
    CHECK(meta->frame == io::PixelBox{c.frame.min.x, c.frame.min.y, c.frame.max.x, c.frame.max.y});
    CHECK(meta->display == io::PixelBox{c.disp.min.x, c.disp.min.y, c.disp.max.x, c.disp.max.y});
    CHECK(meta->overscan() == (c.frame != c.disp));
    CHECK(io::has_overscan(path) == (c.frame != c.disp));
    const int w = c.data.max.x - c.data.min.x + 1;
    for (int y = 0; y < fh; ++y)
      for (int x = 0; x < fw; ++x) {
        const int ax = x + c.frame.min.x, ay = y + c.frame.min.y;
        const bool has =
            ax >= c.data.min.x && ax <= c.data.max.x && ay >= c.data.min.y && ay <= c.data.max.y;
        const float want =
            has ? 0.5f + 0.01f * static_cast<float>((ay - c.data.min.y) * w + (ax - c.data.min.x))
                : 0.f;
        CHECK(im.pixels[static_cast<size_t>(y) * fw + x] == want);
      }
    // Written back: the windows, the aspect and the custom string; not the plate's
    // compression or chromaticities (the output's own decide them).
    const auto out = (root / (std::string(c.name) + "_out.exr")).string();
    io::write_exr(out, im, "Y", io::ExrCompression::Pxr24, nullptr, meta.get());
    Imf::InputFile f(out.c_str());
    const auto& h = f.header();
    CHECK(h.displayWindow() == c.disp);
    CHECK(h.dataWindow() == c.frame);
    CHECK(h.pixelAspectRatio() == 2.f);
    CHECK(h.compression() == Imf::PXR24_COMPRESSION);
    CHECK_FALSE(Imf::hasChromaticities(h));
    const auto* s = h.findTypedAttribute<Imf::StringAttribute>("capturedShot");
    REQUIRE(s);
    CHECK(s->value() == "sh010");
    // The hint reader still crops to the display window.
    const auto hint = io::read_image(path);
    CHECK((hint.width == c.disp.max.x - c.disp.min.x + 1 &&
           hint.height == c.disp.max.y - c.disp.min.y + 1));
  }
}

TEST_CASE("a plate whose windows together exceed the pixel limit is refused before allocating",
          "[pipeline]") {
  // Each window is 5 x 3 pixels; together they span 10^8 x 10^8.
  const auto root = ck_test::temp_dir("plate_metadata_far");
  const auto path = (root / "far.exr").string();
  write_plate(path, B(V(0, 0), V(4, 2)), B(V(100000000, 100000000), V(100000004, 100000002)));
  std::shared_ptr<const io::PlateMetadata> meta;
  CHECK_THROWS_WITH(io::read_plate(path, io::DecodeLimits{}, meta),
                    Catch::Matchers::Contains("far.exr") &&
                        Catch::Matchers::Contains("data and display windows"));
  CHECK(io::read_image(path).width == 5);  // the display window alone, as a hint is read
}

TEST_CASE("a plate without metadata writes the header it always did", "[pipeline]") {
  const auto root = ck_test::temp_dir("plate_metadata_none");
  Image im;
  im.width = 4, im.height = 3, im.channels = 1;
  im.pixels.assign(12, 0.25f);
  const auto a = (root / "a.exr").string(), b = (root / "b.exr").string();
  io::write_exr(a, im, "Y", io::ExrCompression::Zip);
  io::PlateMetadata none;  // a PNG plate's: no attributes, windows at the origin
  none.display = none.frame = io::PixelBox{0, 0, 3, 2};
  io::write_exr(b, im, "Y", io::ExrCompression::Zip, nullptr, &none);
  CHECK(ck_test::read_file(a) == ck_test::read_file(b));
}

TEST_CASE("display_window and plate_display_window place the display window in the keyed frame",
          "[pipeline]") {
  const auto root = ck_test::temp_dir("plate_display_window");
  auto same = [](const FrameWindow& a, const FrameWindow& b) {
    return a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height &&
           a.frame_width == b.frame_width && a.frame_height == b.frame_height;
  };
  // Overscan: display 0..4 x 0..2 inside data -2..6 x -1..3 (a 9 x 5 keyed frame).
  const auto over = (root / "over.exr").string();
  write_plate(over, B(V(0, 0), V(4, 2)), B(V(-2, -1), V(6, 3)));
  const FrameWindow want{2, 1, 5, 3, 9, 5};
  CHECK(same(plate_display_window(over), want));
  CHECK_FALSE(plate_display_window(over).whole());
  // A data window inside the display window: the keyed frame is the display window.
  const auto bbox = (root / "bbox.exr").string();
  write_plate(bbox, B(V(0, 0), V(9, 5)), B(V(3, 2), V(7, 4)));
  CHECK(same(plate_display_window(bbox), FrameWindow{0, 0, 10, 6, 10, 6}));
  CHECK(plate_display_window(bbox).whole());
  // Another format: the whole image; no readable header: all zero.
  const auto png = (root / "plate.png").string();
  Image im;
  im.width = 7, im.height = 4, im.channels = 3;
  im.pixels.assign(7 * 4 * 3, 0.5f);
  io::write_png8(png, im);
  CHECK(same(plate_display_window(png), FrameWindow{0, 0, 7, 4, 7, 4}));
  CHECK(same(plate_display_window((root / "missing.exr").string()), FrameWindow{}));
  std::ofstream((root / "junk.exr").string()) << "not an exr";
  CHECK(same(plate_display_window((root / "junk.exr").string()), FrameWindow{}));

  // A RawFrame: from its plate header when the images are the keyed frame's size.
  RawFrame raw;
  raw.alpha.width = 9, raw.alpha.height = 5, raw.alpha.channels = 1;
  raw.alpha.pixels.assign(45, 1.f);
  CHECK(same(display_window(raw), FrameWindow{0, 0, 9, 5, 9, 5}));  // no header: whole
  auto colour = std::make_shared<FrameColour>();
  std::shared_ptr<const io::PlateMetadata> meta;
  io::read_plate(over, io::DecodeLimits{}, meta);
  colour->plate = meta;
  raw.colour = colour;
  CHECK(same(display_window(raw), want));
}
