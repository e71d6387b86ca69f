// The API deprecated for one release (options.h, engine/src/compat): the EngineOptions name
// (now an alias of Profile, whose halves are members), the combined-struct create_engine on
// a loaded Model, and the two text setters set_option replaced. A host that moves from
// `o.checkpoint` to `o.model.checkpoint` builds with deprecation warnings, not errors, and
// keys the same frame as the current API.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include <cstdio>
#include <vector>

int main() {
  try {
    corridorkey::EngineOptions options = corridorkey::load_profile("original");  // deprecated name
    options.model.checkpoint = CK_CHECKPOINT;
    corridorkey::set_engine_option(options, "device", "cpu");            // deprecated setter
    corridorkey::set_profile_field(options, "fused_refiner", "false");   // deprecated setter
    const bool setters = corridorkey::engine_option_value(options, "device") == "cpu";  // deprecated
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
    auto model = corridorkey::Model::load(options.model, options.engine);
    auto old_engine = corridorkey::create_engine(model, options);  // deprecated: checks the key
    auto current = corridorkey::create_engine(model, options.engine);
    const auto a = old_engine->process_frame(pv, hv).alpha.pixels;
    const auto c = current->process_frame(pv, hv).alpha.pixels;
    const bool same = a == c;
    // A Model half of another key is refused, naming both keys, as in 0.1.
    auto other = options;
    other.model.fused_decoder = !options.model.fused_decoder;
    bool refused = false;
    try {
      corridorkey::create_engine(model, other);
    } catch (const corridorkey::ConfigError&) {
      refused = true;
    }
    const bool ok = same && refused && setters;
    std::printf("deprecated API: mattes %s, another key %s, setters %s: %s\n", same ? "identical" : "DIFFER",
                refused ? "refused" : "ACCEPTED", setters ? "ok" : "WRONG", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
  } catch (const corridorkey::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
