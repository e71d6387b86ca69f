// Embedding CorridorKey Engine in a host application (docs/embedding.md's example):
// one engine, shared by a pool of worker threads that prepare frames and write results.
// The engine is not re-entrant, so calls into it are serialised with a mutex; everything
// around the call (building the views, consuming results) runs in parallel.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

int main() {
  try {
    // A profile fills both halves; the host keeps the weights' options apart from the
    // engine's settings, as llama.cpp's model and context params.
    const corridorkey::Profile profile = corridorkey::load_profile("original");
    corridorkey::ModelOptions model_options = profile.model;
    model_options.checkpoint = CK_CHECKPOINT;  // the installed bundled model
    model_options.device = "auto";             // CUDA, then MPS, then CPU
    corridorkey::EngineSettings settings = profile.engine;
    auto model = corridorkey::Model::load(model_options, settings);  // the plan is made for `settings`
    corridorkey::OriginalEngine engine(model, settings);
    std::mutex engine_mutex;

    const int width = 192, height = 108, frames = 4;
    std::vector<double> coverage(frames, 0.0);
    std::vector<std::thread> workers;
    for (int f = 0; f < frames; ++f) {
      workers.emplace_back([&, f] {
        // A host's own frame buffers: an 8-bit RGB plate and a float hint.
        std::vector<unsigned char> plate(static_cast<size_t>(width) * height * 3);
        std::vector<float> hint(static_cast<size_t>(width) * height);
        for (int y = 0; y < height; ++y)
          for (int x = 0; x < width; ++x) {
            const bool inside = std::hypot(x - 80 - 5 * f, y - 54) < 30;
            unsigned char* p = &plate[(static_cast<size_t>(y) * width + x) * 3];
            p[0] = inside ? 190 : 25;
            p[1] = inside ? 110 : 200;
            p[2] = inside ? 80 : 40;
            hint[static_cast<size_t>(y) * width + x] = inside ? 1.f : 0.f;
          }
        corridorkey::ImageView pv{plate.data(), width, height, 3, corridorkey::PixelType::UInt8, 0};
        const auto hv = corridorkey::ImageView::f32(hint.data(), width, height, 1);
        corridorkey::FrameResult r;
        {
          std::lock_guard<std::mutex> lock(engine_mutex);
          r = engine.process_frame(pv, hv);
        }
        double sum = 0;
        for (float a : r.alpha.pixels) sum += a;
        coverage[static_cast<size_t>(f)] = sum / r.alpha.pixels.size();
      });
    }
    for (auto& t : workers) t.join();
    bool ok = true;
    for (int f = 0; f < frames; ++f) {
      std::printf("frame %d: matte coverage %.3f\n", f, coverage[static_cast<size_t>(f)]);
      // The disc covers ~14% of the frame; a working matte says so.
      ok = ok && coverage[static_cast<size_t>(f)] > 0.05 && coverage[static_cast<size_t>(f)] < 0.4;
    }
    std::printf("corridorkey %s via find_package on %s: %s\n", corridorkey::version_string(),
                engine.info().device.c_str(), ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
  } catch (const corridorkey::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
