// ck_make_clip: the shared synthetic clip generator (engine/src/devtools/synthetic_clip.h)
// for the CLI test scripts.
//   ck_make_clip DIR [--frames N] [--size WxH] [--plate exr|png|png16|tif]
//                [--hint png16|png|exr|none] [--prefix P] [--digits D] [--soft-edge PX]
//                [--screen green|blue|swapped] [--noise A]
#include "devtools/synthetic_clip.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  using corridorkey::devtools::SyntheticClip;
  // DIR must not look like an option: `ck_make_clip --help` once wrote a clip into a folder
  // named --help, which was committed at the repository root. Options come in pairs.
  if (argc < 2 || argv[1][0] == '-' || argc % 2 != 0) {
    std::fprintf(stderr, "usage: ck_make_clip DIR [--frames N] [--size WxH] [--plate F] [--hint F] "
                         "[--prefix P] [--digits D] [--soft-edge PX] [--screen S] [--noise A]\n");
    return 2;
  }
  SyntheticClip c;
  c.plate_prefix = c.hint_prefix = "";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--frames") c.frames = std::atoi(v.c_str());
    else if (k == "--size") std::sscanf(v.c_str(), "%dx%d", &c.width, &c.height);
    else if (k == "--plate") c.plate_format = v;
    else if (k == "--hint" && v == "none") c.hints = false;
    else if (k == "--hint") c.hint_format = v;
    else if (k == "--screen") c.screen = v;
    else if (k == "--noise") c.noise = std::atof(v.c_str());
    else if (k == "--prefix") c.plate_prefix = c.hint_prefix = v;
    else if (k == "--digits") c.digits = std::atoi(v.c_str());
    else if (k == "--soft-edge") c.soft_edge_px = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "ck_make_clip: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    corridorkey::devtools::write_synthetic_clip(argv[1], c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ck_make_clip: %s\n", e.what());
    return 1;
  }
  return 0;
}
