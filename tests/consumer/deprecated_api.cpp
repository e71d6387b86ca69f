// The API deprecated for one release (options.h): the combined EngineOptions given to
// Model::load and create_engine. A host written against 0.1 still builds (with deprecation
// warnings, not errors) and keys the same frame as the current API.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <cstdio>
#include <vector>

int main() {
  try {
    corridorkey::EngineOptions options = corridorkey::load_profile("original");
    options.checkpoint = CK_CHECKPOINT;
    options.device = "cpu";
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
    const auto pv = corridorkey::ImageView::f32(plate.data(), w, h, 3);
    const auto hv = corridorkey::ImageView::f32(hint.data(), w, h, 1);
    auto old_model = corridorkey::Model::load(options);            // deprecated
    auto old_engine = corridorkey::create_engine(old_model, options);  // deprecated
    auto whole = corridorkey::create_engine(options);                  // deprecated
    auto current = corridorkey::create_engine(corridorkey::Model::load(options.model(), options.engine()),
                                              options.engine());
    const auto a = old_engine->process_frame(pv, hv).alpha.pixels;
    const auto b = whole->process_frame(pv, hv).alpha.pixels;
    const auto c = current->process_frame(pv, hv).alpha.pixels;
    const bool same = a == b && a == c;
    // A Model half of another key is refused, naming both keys, as in 0.1.
    auto other = options;
    other.fused_decoder = !options.fused_decoder;
    bool refused = false;
    try {
      corridorkey::create_engine(old_model, other);
    } catch (const corridorkey::ConfigError&) {
      refused = true;
    }
    std::printf("deprecated API: mattes %s, another key %s: %s\n", same ? "identical" : "DIFFER",
                refused ? "refused" : "ACCEPTED", same && refused ? "ok" : "WRONG");
    return same && refused ? 0 : 1;
  } catch (const corridorkey::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
