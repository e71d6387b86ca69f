// ck_colour_apply decode|encode|linear NAME [OCIO_CONFIG]: RGB triples on stdin (text), the
// engine's colour conversion of each on stdout. decode: NAME to scene-linear Rec.709 (a
// plate's decode); encode: back to NAME's values; linear: Rec.709 to NAME's linear form (the
// Processed EXR). For tests/unit/colour_science.py, which checks it against colour-science.
#include <corridorkey/errors.h>

#include "colour/conversion.h"

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace corridorkey::colour;
  if (argc < 3) {
    std::fprintf(stderr, "usage: ck_colour_apply decode|encode|linear NAME [OCIO_CONFIG]\n");
    return 2;
  }
  try {
    const std::string mode = argv[1];
    const auto space = resolve(argv[2], argc > 3 ? argv[3] : "");
    const Conversion c = mode == "decode" ? to_working(space) : from_working(space, mode == "linear");
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::vector<float> v;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) ++p;
      if (p == end) break;
      float x = 0;
      const auto r = std::from_chars(p, end, x);
      if (r.ec != std::errc()) {
        std::fprintf(stderr, "ck_colour_apply: not a number at '%.20s'\n", p);
        return 2;
      }
      v.push_back(x);
      p = r.ptr;
    }
    if (v.size() % 3) {
      std::fprintf(stderr, "ck_colour_apply: %zu values, not RGB triples\n", v.size());
      return 2;
    }
    c.apply(v.data(), static_cast<int64_t>(v.size() / 3), 3);
    std::string out;
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
      const auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
      out.append(buf, r.ptr);
      out.push_back(i % 3 == 2 ? '\n' : ' ');
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  } catch (const corridorkey::Error& e) {
    std::fprintf(stderr, "ck_colour_apply: %s\n", e.what());
    return 2;
  }
  return 0;
}
