// libFuzzer target: the frame readers (EXR through OpenEXR, PNG / TIFF / JPEG / BMP through
// OpenCV, DPX through OpenImageIO, our header probe and the truncation checks) on arbitrary bytes. The first byte picks the extension, the rest
// is the file. Anything but a corridorkey::Error (or a clean read) is a finding.
#include <corridorkey/errors.h>

#include "io/image_header.h"
#include "io/image_io.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* exts[] = {".exr", ".png", ".tif", ".jpg", ".bmp", ".dpx"};
  const std::string path = "/tmp/ck_fuzz_image_" + std::to_string(::getpid()) + exts[data[0] % 6];
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  // A small pixel limit keeps a hostile header from turning into a large allocation (the
  // behaviour under test), and the fuzzer within its memory limit.
  try {
    (void)corridorkey::io::probe_image_size(path);
    (void)corridorkey::io::read_image(path, 4096 * 4096);
  } catch (const corridorkey::Error&) {
  }
  (void)corridorkey::io::readable_output(path, 4096 * 4096);
  std::remove(path.c_str());
  return 0;
}
