// One Model, many engines: the weights are read once and held once, engines on several
// threads key concurrently on them, and their mattes are the single engine's, bit for bit.
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/model.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "io/image_io.h"
#include "runtime/model_factory.h"
#include "runtime/model_runner.h"
#include "support/test_hooks.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <unistd.h>

using namespace corridorkey;

namespace {

/// A /proc/self/status field in bytes (VmRSS: resident now, VmHWM: the peak so far). Free
/// heap memory is handed back first, so RSS counts live memory, not what earlier frames
/// left in the allocator (which a new allocation would reuse without growing RSS).
uint64_t status_bytes(const char* field) {
  malloc_trim(0);
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string want = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.rfind(want, 0) == 0) {
      std::istringstream in(line.substr(want.size()));
      uint64_t kb = 0;
      in >> kb;
      return kb << 10;
    }
  return 0;
}

std::string source_dir() {
  const char* src = std::getenv("CK_SOURCE_DIR");
  REQUIRE(src);
  return src;
}

/// The bundled checkpoint as users' training writes it (torch.save of a state dict).
Profile bundled(const std::string& profile = "original") {
  auto o = load_profile(profile);
  o.model.checkpoint = source_dir() + "/checkpoints/greenformer_small_synthetic384.pth";
  o.model.device = "cpu";
  o.model.model_precision = Precision::Float32;
  return o;
}

struct Frame {
  Image plate, hint;
};
std::vector<Frame> sample_frames(int n) {
  const auto clip = source_dir() + "/samples/greenscreen_demo/";
  std::vector<Frame> v;
  for (int i = 1; i <= n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%04d.png", i * 5 - 4);
    v.push_back({io::read_image(clip + "Input/" + name), io::read_image(clip + "AlphaHint/" + name)});
  }
  return v;
}

}  // namespace

TEST_CASE("two engines on one Model: one load, one copy, the single engine's mattes", "[model][embedding]") {
  const auto frames = sample_frames(3);
  const auto opt = bundled();
  // The reference: one engine with its own Model, keyed one frame after another.
  std::vector<Image> expected;
  {
    OriginalEngine single(opt);
    for (const auto& f : frames) expected.push_back(single.process_frame(f.plate.view(), f.hint.view()).alpha);
  }

  const auto loads = corridorkey::detail::checkpoint_loads();
  const uint64_t rss0 = status_bytes("VmRSS");
  auto model = Model::load(opt.model, opt.engine);
  const uint64_t rss_model = status_bytes("VmRSS");
  auto a = create_engine(model);
  (void)a->process_frame(frames[0].plate.view(), frames[0].hint.view());  // A's buffers exist
  const uint64_t rss_a = status_bytes("VmRSS");
  auto b = create_engine(model);
  const uint64_t rss_b = status_bytes("VmRSS");
  CHECK(corridorkey::detail::checkpoint_loads() == loads + 1);  // the file was read once
  CHECK(a->model() == b->model());
  CHECK(b->info().checkpoint == a->info().checkpoint);

  // Both threads key every frame at once, several times over.
  std::vector<std::vector<Image>> got(2);
  auto work = [&](BaseEngine& e, std::vector<Image>& out) {
    for (int round = 0; round < 2; ++round)
      for (const auto& f : frames) out.push_back(e.process_frame(f.plate.view(), f.hint.view()).alpha);
  };
  std::thread ta(work, std::ref(*a), std::ref(got[0]));
  std::thread tb(work, std::ref(*b), std::ref(got[1]));
  ta.join();
  tb.join();
  const uint64_t hwm_shared = status_bytes("VmHWM");
  for (const auto& out : got) {
    REQUIRE(out.size() == 2 * frames.size());
    for (size_t i = 0; i < out.size(); ++i) {
      INFO("frame " << i);
      CHECK(out[i].pixels == expected[i % frames.size()].pixels);
    }
  }

  // What a copy of the weights costs, measured the same way: a second Model under the same
  // key is a second load (Model::load never shares; hosts keep the shared_ptr).
  const uint64_t before_copy = status_bytes("VmRSS");
  auto copy = Model::load(opt.model, opt.engine);
  const uint64_t copy_growth = status_bytes("VmRSS") - before_copy;
  CHECK(corridorkey::detail::checkpoint_loads() == loads + 2);

  const uint64_t w = model->weight_bytes();
  const int64_t engine_b_growth = static_cast<int64_t>(rss_b) - static_cast<int64_t>(rss_a);
  INFO("weights " << w << " B; RSS: before " << rss0 << ", +Model " << (rss_model - rss0)
                  << ", +engine A with a frame " << (rss_a - rss_model) << ", +engine B "
                  << engine_b_growth << ", a second Model::load +" << copy_growth
                  << "; peak after both threads " << hwm_shared);
  REQUIRE(w > (4u << 20));  // the bundled small model: ~8 MB of float32 weights
  CHECK(engine_b_growth < static_cast<int64_t>(w / 4));  // no second copy
  CHECK(copy_growth > w / 2);  // the measurement sees a copy when there is one
  WARN("model sharing (bundled small, 384): weights " << (w >> 10) << " KiB, engine B +"
       << (engine_b_growth >> 10) << " KiB, second Model::load +" << (copy_growth >> 10) << " KiB");
}

TEST_CASE("an engine on a Model: per-engine options may differ, the Model's may not", "[model][embedding]") {
  auto opt = bundled();
  auto model = Model::load(opt.model, opt.engine);
  CHECK(model->key() == model_key(opt.model));
  CHECK(model->key().find("model_precision=float32") != std::string::npos);

  auto post = opt;  // post-processing and the refiner are an engine's own
  post.engine.despill_strength = 0.1;
  post.engine.despeckle = false;
  post.engine.tiled_refiner = RefinerTiling::On;
  post.engine.tile_size = 128;
  auto e = create_engine(model, post.engine);
  CHECK(e->settings().despill_strength == Approx(0.1));
  CHECK_FALSE(e->settings().despeckle);
  CHECK(e->info().refiner.find("tiled") != std::string::npos);
  CHECK(create_engine(model)->info().refiner.find("tiled") == std::string::npos);

  auto other = opt;  // another precision is other weights: another key
  other.model.model_precision = Precision::BFloat16;
  CHECK(model_key(other.model) != model->key());
  // The combined struct (deprecated for one release) carries a Model half: one of another
  // key is a ConfigError that says so, as before the split.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK_THROWS_WITH(create_engine(model, other),
                    Catch::Matchers::Contains("Model::load() those options (a second copy"));
#pragma GCC diagnostic pop
  CHECK_THROWS_AS(create_engine(nullptr), ConfigError);

  // The Model outlives the host's reference: engines hold it.
  auto keep = create_engine(model);
  std::weak_ptr<const Model> weak = model;
  model.reset();
  CHECK_FALSE(weak.expired());
  const auto frames = sample_frames(1);
  CHECK_NOTHROW(keep->process_frame(frames[0].plate.view(), frames[0].hint.view()));
  keep.reset();
  e.reset();
  CHECK(weak.expired());
}

TEST_CASE("Model::load from several threads at once: each load whole, each keys as a single engine",
          "[model][embedding]") {
  // model.h promises concurrent Model::load is safe. Three threads load at once: two under
  // one key (two copies: load never shares) and one under another layout (channels-last),
  // while a fourth thread keys on an already loaded Model.
  const auto frames = sample_frames(1);
  auto plain = bundled();
  auto cl = bundled();
  cl.model.channels_last = true;
  REQUIRE(model_key(plain.model) != model_key(cl.model));
  Image expected, expected_cl;
  {
    OriginalEngine single(plain), single_cl(cl);
    expected = single.process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha;
    expected_cl = single_cl.process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha;
  }
  auto ready = Model::load(plain.model, plain.engine);
  const auto loads = corridorkey::detail::checkpoint_loads();
  const std::vector<Profile> asks = {plain, plain, cl};
  std::vector<std::shared_ptr<const Model>> got(asks.size());
  std::vector<Image> mattes(asks.size() + 1);
  std::vector<std::string> errors(asks.size() + 1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < asks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        got[i] = Model::load(asks[i].model, asks[i].engine);
        mattes[i] = create_engine(got[i])->process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  threads.emplace_back([&] {
    try {
      mattes.back() = create_engine(ready)->process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha;
    } catch (const std::exception& e) {
      errors.back() = e.what();
    }
  });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK(e.empty());
  CHECK(corridorkey::detail::checkpoint_loads() == loads + asks.size());
  REQUIRE(got[0]);
  REQUIRE(got[1]);
  REQUIRE(got[2]);
  CHECK(got[0] != got[1]);  // two loads, two Models
  CHECK(got[0]->key() == ready->key());
  CHECK(got[2]->key() == model_key(cl.model));
  CHECK(mattes[0].pixels == expected.pixels);
  CHECK(mattes[1].pixels == expected.pixels);
  CHECK(mattes[2].pixels == expected_cl.pixels);
  CHECK(mattes[3].pixels == expected.pixels);
}

TEST_CASE("on_oom's precision step casts the engine's own copy, not the shared weights", "[model][embedding]") {
  auto opt = bundled("original");
  opt.engine.on_oom = OnOom::Degrade;
  auto model = Model::load(opt.model, opt.engine);
  auto a = create_engine(model), b = create_engine(model);
  const auto frames = sample_frames(1);
  const auto before = b->process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha;
  corridorkey::detail::inject_out_of_memory(2);  // A: tiled refiner, then bfloat16
  (void)a->process_frame(frames[0].plate.view(), frames[0].hint.view());
  CHECK(a->info().precision == "bfloat16");
  CHECK(b->info().precision == "float32");
  CHECK(b->process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha.pixels == before.pixels);
}

// docs/embedding.md's measurement (hidden: a minute on 2 cores). One process per mode, so each peak
// is its own: CK_MEASURE_MODE=shared (one Model, two engines), separate (two Models), two
// threads keying one frame each at once, or one (one engine, one frame: the baseline). CK_MEASURE_ARCH / CK_MEASURE_SIZE pick the random
// weights (hiera_base_plus, 512 by default): the architecture users run, without a download.
TEST_CASE("measure: peak RSS of two engines on one Model vs two loads", "[.][measure]") {
  const char* mode_env = std::getenv("CK_MEASURE_MODE");
  const std::string mode = mode_env ? mode_env : "shared";
  auto o = load_profile("original");
  o.model.device = "cpu";
  o.model.model_precision = Precision::Float32;
  o.model.random_weights_arch = std::getenv("CK_MEASURE_ARCH") ? std::getenv("CK_MEASURE_ARCH") : "hiera_base_plus";
  o.engine.img_size = std::getenv("CK_MEASURE_SIZE") ? std::atoll(std::getenv("CK_MEASURE_SIZE")) : 512;
  const uint64_t base = status_bytes("VmRSS");
  auto m1 = Model::load(o.model, o.engine);
  auto m2 = mode == "separate" ? Model::load(o.model, o.engine) : m1;
  const uint64_t loaded = status_bytes("VmRSS");
  auto a = create_engine(m1);
  auto b = mode == "one" ? nullptr : create_engine(m2);  // one: a single engine, for its activations
  const int64_t S = a->info().img_size;
  std::vector<float> in(static_cast<std::size_t>(4 * S * S));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
  std::thread ta([&] { (void)a->run_model(in); });
  std::thread tb([&] { if (b) (void)b->run_model(in); });
  ta.join();
  tb.join();
  WARN("measure " << mode << " " << o.model.random_weights_arch << " " << S << ": weights "
       << (m1->weight_bytes() >> 20) << " MiB; RSS before " << (base >> 20) << " MiB, after loading "
       << (loaded >> 20) << " MiB; peak (VmHWM) after keying "
       << (status_bytes("VmHWM") >> 20) << " MiB");
}

TEST_CASE("engines at several sizes on one Model: their own pos_embed, the Model's weights, the "
          "mattes of a Model loaded at their size", "[model][embedding]") {
  // Issue 21: the size is an engine's. A host keying 1080p proxies at 1024 and finals at
  // 2048 holds one copy of the weights; each engine holds pos_embed at its size.
  const auto frames = sample_frames(1);
  auto at = [](int64_t size, int64_t backbone = 0) {
    auto o = bundled();
    o.engine.img_size = size;  // 0: the checkpoint's own (384)
    o.engine.backbone_size = backbone;
    return o;
  };
  auto key = [&](BaseEngine& e) { return e.process_frame(frames[0].plate.view(), frames[0].hint.view()); };
  // What each size gives on a Model of its own (Model::load resizes pos_embed from the file).
  FrameResult want256, want384, want_decoupled;
  {
    OriginalEngine e256(at(256)), e384(at(0)), ed(at(384, 256));
    want256 = key(e256);
    want384 = key(e384);
    want_decoupled = key(ed);
  }
  REQUIRE(want256.alpha.pixels != want384.alpha.pixels);  // the sizes do differ
  CHECK(model_key(at(256).model) == model_key(at(0).model));          // one key: the size is not baked

  // The Model holds pos_embed at 256 only: the 384 engine resizes the checkpoint's own
  // (read again from the file), not the Model's 256 one, so it matches bit for bit.
  auto model = Model::load(at(256).model, at(256).engine);
  const uint64_t rss0 = status_bytes("VmRSS");
  auto e384 = create_engine(model, at(0).engine);
  const uint64_t grown = status_bytes("VmRSS") - rss0;
  auto e256 = create_engine(model);
  auto ed = create_engine(model, at(384, 256).engine);
  CHECK(e384->info().img_size == 384);
  CHECK(e384->info().backbone_size == 384);
  CHECK(e256->info().img_size == 256);
  CHECK(ed->info().img_size == 384);
  CHECK(ed->info().backbone_size == 256);
  CHECK(e384->info().notes.find("uses its own pos_embed") != std::string::npos);
  CHECK(e256->info().notes.find("on a Model loaded at") == std::string::npos);
  // Another img_size on the Model's encoder grid: no pos_embed of its own.
  CHECK(ed->info().notes.find("uses the Model's pos_embed") != std::string::npos);
  const uint64_t w = model->weight_bytes();
  INFO("weights " << w << " B, the 384 engine grew RSS by " << grown << " B");
  CHECK(grown < w / 2);  // its pos_embed (1.2 MB), not a copy of the weights (8 MB)

  // All three at once on the shared weights.
  FrameResult got384, got256, got_d;
  std::thread t1([&] { got384 = key(*e384); });
  std::thread t2([&] { got256 = key(*e256); });
  std::thread t3([&] { got_d = key(*ed); });
  t1.join();
  t2.join();
  t3.join();
  CHECK(got384.alpha.pixels == want384.alpha.pixels);
  CHECK(got384.fg.pixels == want384.fg.pixels);
  CHECK(got256.alpha.pixels == want256.alpha.pixels);
  CHECK(got_d.alpha.pixels == want_decoupled.alpha.pixels);
  CHECK(got_d.fg.pixels == want_decoupled.fg.pixels);

  // A size the checkpoint cannot run at names it.
  CHECK_THROWS_WITH(create_engine(model, at(256, 384).engine),
                    Catch::Matchers::Contains("greenformer_small_synthetic384.pth") &&
                        Catch::Matchers::Contains("larger than img_size 256"));
  CHECK_THROWS_AS(create_engine(model, at(100).engine), ConfigError);  // off the grid: the option's check

  // The backbone alone differs (the Model at the checkpoint's own 384): pos_embed at the
  // backbone's grid, from the file.
  auto native = Model::load(at(0).model, at(0).engine);
  auto eb = create_engine(native, at(384, 256).engine);
  CHECK(eb->info().backbone_size == 256);
  CHECK(eb->info().notes.find("uses its own pos_embed") != std::string::npos);
  const auto got_b = key(*eb);
  CHECK(got_b.alpha.pixels == want_decoupled.alpha.pixels);
  CHECK(got_b.fg.pixels == want_decoupled.fg.pixels);
}

TEST_CASE("an engine at another size degrades on out of memory as a Model at its size does",
          "[model][embedding]") {
  // on_oom degrade's last step casts the engine's own copy of the weights to bfloat16: its
  // own pos_embed must follow, or the encoder mixes types.
  const auto frames = sample_frames(1);
  auto at = [](int64_t size) {
    auto o = bundled();
    o.engine.img_size = size;
    o.engine.on_oom = OnOom::Degrade;
    return o;
  };
  auto key = [&](BaseEngine& e) { return e.process_frame(frames[0].plate.view(), frames[0].hint.view()); };
  FrameResult want;
  {
    OriginalEngine alone(at(384));
    corridorkey::detail::inject_out_of_memory(2);  // both steps: tiled refiner, then bfloat16
    want = key(alone);
    REQUIRE(alone.info().precision == "bfloat16");
  }
  auto model = Model::load(at(256).model, at(256).engine);
  auto e = create_engine(model, at(384).engine);
  corridorkey::detail::inject_out_of_memory(2);
  const auto got = key(*e);
  CHECK(e->info().precision == "bfloat16");
  CHECK(got.alpha.pixels == want.alpha.pixels);
  CHECK(got.fg.pixels == want.fg.pixels);
}

TEST_CASE("an engine at another size refuses a checkpoint whose pos_embed changed since its Model "
          "read it", "[model][embedding]") {
  // The other size's pos_embed is read from the file again. A retrained checkpoint saved
  // under the same name would give a matte of neither; a file only touched is still fine.
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("ck_resize_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto file = (dir / "weights.safetensors").string();  // the official format
  const auto ck = model::read_checkpoint(bundled().model.checkpoint);
  auto write = [&](double pos_scale) {
    auto tensors = ck.tensors;
    for (auto& [k, t] : tensors)
      if (k == "encoder.model.pos_embed") t = t * pos_scale;
    model::safetensors::write_file(file, tensors, {});
  };
  write(1.0);
  auto o = bundled();
  o.model.checkpoint = file;
  o.engine.img_size = 256;
  auto model = Model::load(o.model, o.engine);
  CHECK_FALSE(model->checkpoint_changed());
  auto other = o;
  other.engine.img_size = 320;

  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later modification time
  write(1.0);  // rewritten with the same weights (a copy, a touch): still the Model's
  CHECK(model->checkpoint_changed());
  CHECK(create_engine(model, other.engine)->info().img_size == 320);

  write(1.5);  // retrained
  CHECK_THROWS_WITH(create_engine(model, other.engine),
                    Catch::Matchers::Contains("weights.safetensors") &&
                        Catch::Matchers::Contains("its pos_embed differs"));
  // The Model's own size reads nothing: it still keys.
  const auto frames = sample_frames(1);
  auto same = create_engine(model, o.engine);
  CHECK(same->info().img_size == 256);
  CHECK(same->process_frame(frames[0].plate.view(), frames[0].hint.view()).alpha.width == 320);
  fs::remove(file);
  CHECK(model->checkpoint_changed());
  CHECK_THROWS_AS(create_engine(model, other.engine), IoError);  // gone: named, not a crash
  fs::remove_all(dir);
}

TEST_CASE("token routing at another size than the Model routes the engine's own token grid",
          "[model][embedding]") {
  // Routing plans its index sets on the grid where the encoder runs: an engine at another
  // size builds its router for its own grid on the Model's routing weights.
  const auto frames = sample_frames(1);
  auto at = [](int64_t size) {
    auto o = bundled("experimental");
    o.model.model_precision = Precision::Float32;
    o.model.tune = TuneMode::Off;  // the same kernels on both sides
    o.engine.backbone_size = 0;
    o.engine.backbone_percent = 0;
    o.engine.img_size = size;
    return o;
  };
  REQUIRE(at(0).model.token_routing);
  auto key = [&](BaseEngine& e) { return e.process_frame(frames[0].plate.view(), frames[0].hint.view()); };
  FrameResult want;
  {
    OptimizedEngine alone(at(384));
    want = key(alone);
  }
  auto model = Model::load(at(256).model, at(256).engine);
  auto e = create_engine(model, at(384).engine);
  CHECK(e->info().img_size == 384);
  const auto got = key(*e);
  CHECK(got.alpha.pixels == want.alpha.pixels);
  CHECK(got.fg.pixels == want.fg.pixels);
}
