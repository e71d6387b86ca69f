// A host application's view of the engine: only the public headers, compiled as C++17
// WITHOUT LibTorch's include paths (see tests/CMakeLists.txt). Keys one synthetic frame
// from memory with the bundled checkpoint and checks what it gets back.
#include <corridorkey/clips.h>
#include <corridorkey/colour.h>
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/frame.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>
#include <corridorkey/tune.h>
#include <corridorkey/version.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#if __cplusplus != 201703L
#error "the public headers must be usable from C++17"
#endif

int main() {
  try {
    // Colour spaces from the public header: the built-in names, no config read.
    if (corridorkey::list_colour_spaces("").front().name != "srgb") return 1;
    auto options = corridorkey::load_profile("original");
    options.model.device = "cpu";  // checkpoint left empty: the bundled default
    corridorkey::OriginalEngine engine(options);

    const int w = 160, h = 90;
    std::vector<float> plate(static_cast<size_t>(w) * h * 3), hint(static_cast<size_t>(w) * h);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const bool fg = (x - 80) * (x - 80) + (y - 45) * (y - 45) < 30 * 30;
        float* p = &plate[(static_cast<size_t>(y) * w + x) * 3];
        p[0] = fg ? 0.8f : 0.1f;
        p[1] = fg ? 0.5f : 0.9f;
        p[2] = fg ? 0.3f : 0.1f;
        hint[static_cast<size_t>(y) * w + x] = fg ? 1.f : 0.f;
      }
    const auto r = engine.process_frame(corridorkey::ImageView::f32(plate.data(), w, h, 3),
                                        corridorkey::ImageView::f32(hint.data(), w, h, 1));
    bool ok = r.alpha.width == w && r.alpha.height == h && r.processed.channels == 4 &&
              r.comp.channels == 3 && r.fg.channels == 3;
    float lo = 1e9f, hi = -1e9f;
    for (float a : r.alpha.pixels) {
      ok = ok && std::isfinite(a);
      lo = std::min(lo, a);
      hi = std::max(hi, a);
    }
    // Lanczos may overshoot slightly (like the reference); a real matte spans 0..1.
    ok = ok && lo > -0.2f && lo < 0.2f && hi > 0.8f && hi < 1.2f;
    std::printf("alpha range [%.3f, %.3f]\n", lo, hi);
    std::printf("corridorkey %s: keyed %dx%d on %s with %s in %.1f ms: %s\n",
                corridorkey::version_string(), w, h, engine.info().device.c_str(),
                engine.info().checkpoint.c_str(), r.timings.total_ms, ok ? "ok" : "WRONG");
    // The measured plan is part of the embedding API: what ran and why, and the cache.
    std::printf("plan (%s, cache %s):\n%s", to_string(engine.info().tune.origin),
                corridorkey::tune_cache_path().c_str(), engine.info().tune.summary().c_str());
    return ok ? 0 : 1;
  } catch (const corridorkey::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
