// Engines end to end through the public API, and each optimization toggle's numerical
// effect against the unoptimized path (bounds from the engines issue).
#include <corridorkey/engine.h>
#include <corridorkey/verify.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>
#include <corridorkey/system.h>

#include <catch2/catch.hpp>

#include "model/hiera.h"
#include "model/sample_input.h"
#include "runtime/host_blocks.h"
#include "runtime/model_runner.h"
#include "support/planar.h"
#include "attention_f32_cpu.h"
#include "support/support.h"
#include "support/test_hooks.h"

#include <cmath>
#include <fstream>
#include <iostream>

using namespace corridorkey;
using Catch::Matchers::Contains;

namespace {

Profile tiny(const std::string& profile, int64_t img = 256) {
  auto o = load_profile(profile);
  o.model.checkpoint = ck_test::fixture("tiny256.pth");
  o.engine.img_size = img;
  o.model.device = "cpu";
  return o;
}

std::vector<float> seeded(int64_t S, uint64_t seed) { return ck_test::seeded_planar(S, seed); }
using ck_test::max_diff;

struct Drift {
  double alpha, fg;
};
Drift drift(const Profile& base, const Profile& other, int64_t S) {
  const auto in = seeded(S, 11);
  const auto a = OriginalEngine(base).run_model(in);
  const auto b = OptimizedEngine(other).run_model(in);
  return {max_diff(a.alpha, b.alpha), max_diff(a.fg, b.fg)};
}

}  // namespace

TEST_CASE("flash attention: fp32 alpha/fg within 1e-5 of the 5-D path", "[model]") {
  auto base = tiny("original");
  auto flash = base;
  flash.model.flash_attention = true;
  const auto d = drift(base, flash, 256);
  INFO("alpha " << d.alpha << " fg " << d.fg);
  CHECK(d.alpha <= 1e-5);
  CHECK(d.fg <= 1e-5);
}

TEST_CASE("tiled refiner: fp32 alpha/fg within 1e-4 of the untiled refiner", "[model]") {
  auto base = tiny("original");
  auto tiled = base;
  tiled.engine.tiled_refiner = RefinerTiling::On;
  tiled.engine.tile_size = 64;  // 16 tiles at 256
  const auto d = drift(base, tiled, 256);
  INFO("alpha " << d.alpha << " fg " << d.fg);
  CHECK(d.alpha <= 1e-4);
  CHECK(d.fg <= 1e-4);
}

TEST_CASE("channels-last convolutions: fp32 alpha/fg within 1e-5 of NCHW", "[model]") {
  auto base = tiny("original");
  auto cl = base;
  cl.model.channels_last = true;
  const auto d = drift(base, cl, 256);
  INFO("alpha " << d.alpha << " fg " << d.fg);
  CHECK(d.alpha <= 1e-5);
  CHECK(d.fg <= 1e-5);
}

TEST_CASE("fused refiner GroupNorms: fp32 alpha/fg within 1e-5 of the eager refiner", "[model]") {
  for (bool cl : {false, true}) {
    auto base = tiny("original");
    base.model.channels_last = cl;
    auto fused = base;
    fused.engine.fused_refiner = true;
    OptimizedEngine e(fused);
    CHECK(e.info().refiner == "whole image, fused GroupNorm");
    const auto d = drift(base, fused, 256);
    INFO("channels_last " << cl << ": alpha " << d.alpha << " fg " << d.fg);
    CHECK(d.alpha <= 1e-5);
    CHECK(d.fg <= 1e-5);
  }
}

TEST_CASE("refiner tiling follows the memory budget", "[model]") {
  auto o = tiny("optimized");
  o.model.tune = TuneMode::Off;  // the memory rule alone (with tune on, a trial may choose tiling)
  o.model.model_precision = Precision::Float32;
  o.engine.tiled_refiner = RefinerTiling::Auto;
  o.engine.tile_size = 64;
  o.engine.refiner_memory_budget_mb = 1;  // the whole 256 x 256 refiner needs ~3.7 MiB
  OptimizedEngine small(o);
  CHECK(small.info().refiner == "tiled 64 px");
  CHECK_THAT(small.info().notes, Contains("budget 1 MiB -> tiled"));
  o.engine.refiner_memory_budget_mb = 64;
  OptimizedEngine big(o);
  CHECK(big.info().refiner == "whole image, fused GroupNorm");
  o.engine.refiner_memory_budget_mb = 0;  // auto: half the free host memory
  CHECK(OptimizedEngine(o).info().refiner == "whole image, fused GroupNorm");
  // Forced tiling and the budget's choice give the same matte within the tiling bound.
  auto forced = o;
  forced.engine.tiled_refiner = RefinerTiling::On;
  const auto d = drift(tiny("original"), forced, 256);
  CHECK(d.alpha <= 1e-4);
}

TEST_CASE("model_precision auto resolves per device, never float16 on a CPU", "[unit]") {
  CHECK(resolve_precision(Precision::Auto, "cuda:0") == Precision::Float16);
  CHECK(resolve_precision(Precision::Auto, "mps") == Precision::Float16);
  const auto f = cpu_features();
  CHECK(resolve_precision(Precision::Auto, "cpu") ==
        (f.amx || f.avx512_bf16 ? Precision::BFloat16 : Precision::Float32));
  for (auto p : {Precision::Float32, Precision::Float16, Precision::BFloat16})
    CHECK(resolve_precision(p, "cpu") == p);  // an explicit choice is kept
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  CHECK(f.avx512_bf16 == (flags.find(" avx512_bf16") != std::string::npos));
}

TEST_CASE("native bf16 attention: same matte as LibTorch's bf16 attention within bf16 noise", "[model]") {
  auto base = tiny("original");
  base.model.model_precision = Precision::BFloat16;
  base.model.flash_attention = true;
  auto native = base;
  native.model.native_attention = AutoSwitch::On;
  OptimizedEngine e(native);
  if (e.info().attention.find("native") == std::string::npos) {
    std::cout << "SKIPPED: no AVX-512 BF16 here, the native kernel does not run\n";
    return;
  }
  const auto d = drift(base, native, 256);
  INFO("alpha " << d.alpha << " fg " << d.fg);
  CHECK(d.alpha > 0);  // a different kernel really ran
  CHECK(d.alpha <= 3e-2);
  CHECK(d.fg <= 3e-2);
}

TEST_CASE("native fp32 attention: the matte of LibTorch's SDPA within fp32 rounding", "[model]") {
  auto base = tiny("original");
  base.model.model_precision = Precision::Float32;
  base.model.flash_attention = true;
  auto native = base;
  native.model.native_attention = AutoSwitch::On;
  OptimizedEngine e(native);
  if (!corridorkey::kernels::native_attention_f32_available()) {
    std::cout << "SKIPPED: no AVX2 + FMA here, the native kernel does not run\n";
    CHECK(e.info().attention == "4-D SDPA");
    return;
  }
  CHECK_THAT(e.info().attention, Catch::Matchers::Matches("native fp32 kernel \\((avx2|avx512)\\) in every stage"));
  const auto calls = corridorkey::kernels::native_attention_f32_calls();
  const auto d = drift(base, native, 256);
  // Every block of the tiny encoder ran through it (5 blocks per forward, at least one forward).
  CHECK(corridorkey::kernels::native_attention_f32_calls() >= calls + 5);
  INFO("alpha " << d.alpha << " fg " << d.fg);
  CHECK(d.alpha <= 1e-5);
  CHECK(d.fg <= 1e-5);
}

TEST_CASE("the host block cache moves tensors, not the matte", "[model]") {
  auto off = tiny("optimized");
  off.model.model_precision = Precision::Float32;
  off.model.host_block_cache = false;
  auto on = off;
  on.model.host_block_cache = true;
  const auto before = corridorkey::detail::host_block_stats();
  const auto in = seeded(256, 11);
  const auto a = OptimizedEngine(off).run_model(in);
  OptimizedEngine cached(on);
  const auto b1 = cached.run_model(in);
  const auto mid = corridorkey::detail::host_block_stats();
  const auto b2 = cached.run_model(in);
  const auto after = corridorkey::detail::host_block_stats();
  CHECK(max_diff(a.alpha, b1.alpha) == 0);
  CHECK(max_diff(a.fg, b1.fg) == 0);
  CHECK(max_diff(a.alpha, b2.alpha) == 0);
  CHECK(max_diff(a.fg, b2.fg) == 0);
  // The refiner's 256^2 x 64 float maps (16 MiB) went through the cache, and the second
  // frame reused the first one's blocks instead of mapping new ones.
  CHECK(mid.misses > before.misses);
  CHECK(after.hits - mid.hits >= 9);
  CHECK(after.mapped <= after.high_water);
}

TEST_CASE("token chunks change nothing in the matte", "[model][slow]") {
  // hiera_base_plus at 512: stage 1 (16384 tokens, 448-wide MLP rows: 28 MiB) and stage 2 are
  // where chunking pays, so the chunked path really runs there.
  auto whole = load_profile("original");
  whole.model.random_weights_arch = "hiera_base_plus";
  whole.engine.img_size = 512;
  whole.model.device = "cpu";
  const corridorkey::model::BlockSpec spec{112, 112, 2, 1, 64, true, 448};
  corridorkey::model::HieraBlock stage1(spec);
  REQUIRE(stage1->chunk_pays(16384));
  auto chunked = whole;
  chunked.model.token_chunk = 300;  // leaves a tail chunk
  const auto in = seeded(512, 11);
  const auto a = OriginalEngine(whole).run_model(in);
  const auto b = OriginalEngine(chunked).run_model(in);
  // float32 rounding: GEMM row slices may reduce in another order (test_functional.cpp).
  CHECK(max_diff(a.alpha, b.alpha) <= 1e-5);
  CHECK(max_diff(a.fg, b.fg) <= 1e-5);
}

TEST_CASE("optimized profile at fp32 stays within 1e-4 of original", "[model]") {
  auto opt = tiny("optimized");
  opt.model.model_precision = Precision::Float32;
  opt.engine.tile_size = 64;
  const auto d = drift(tiny("original"), opt, 256);
  CHECK(d.alpha <= 1e-4);
  CHECK(d.fg <= 1e-4);
}

TEST_CASE("half precisions run on CPU and drift boundedly from fp32", "[model]") {
  // bf16 keeps 8 mantissa bits: ~1e-2 drift through 5 blocks + refiner is expected.
  for (auto [prec, mixed] : {std::pair{Precision::BFloat16, false}, std::pair{Precision::BFloat16, true},
                             std::pair{Precision::Float16, false}}) {
    auto o = tiny("original");
    o.model.model_precision = prec;
    o.model.mixed_precision = mixed;
    const auto d = drift(tiny("original"), o, 256);
    INFO(to_string(prec) << (mixed ? " mixed" : "") << ": alpha " << d.alpha << " fg " << d.fg);
    CHECK(d.alpha > 0);  // it really ran in reduced precision
    CHECK(d.alpha <= 0.1);
    CHECK(d.fg <= 0.1);
  }
}

TEST_CASE("compile modes that cannot apply say what runs instead", "[model]") {
  for (auto mode : {CompileMode::ReduceOverhead, CompileMode::MaxAutotune, CompileMode::Default}) {
    auto o = tiny("original");
    o.engine.compile_mode = mode;
    OptimizedEngine e(o);
    CHECK(e.info().compile_mode_effective == "eager");
    CHECK_THAT(e.info().notes, Contains(to_string(mode)) && Contains("running eager"));
  }
  // A package that cannot be loaded falls back to eager with one note, never a crash.
  auto o = tiny("original", 128);
  o.engine.compile_mode = CompileMode::MaxAutotune;
  o.engine.aoti_package = "/nonexistent/model.pt2";
  OptimizedEngine e(o);
  CHECK(e.info().compile_mode_effective == "eager");
  CHECK_THAT(e.info().notes, Contains("/nonexistent/model.pt2") && Contains("running eager"));
  const auto in = seeded(128, 3);
  CHECK(e.run_model(in).alpha.size() == 128 * 128);
}

TEST_CASE("process_frame keys a frame: sizes, ranges, post-processing consistency", "[model]") {
  auto o = tiny("original", 128);
  o.model.track_host_memory = true;
  o.engine.despeckle = false;  // processed alpha must then equal the raw alpha
  o.engine.despill_strength = 0.0;
  OriginalEngine e(o);
  const int W = 96, H = 72;
  std::vector<uint8_t> plate(W * H * 4);
  std::vector<uint16_t> hint(W / 2 * H / 2);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      uint8_t* p = &plate[(y * W + x) * 4];
      p[0] = static_cast<uint8_t>(x * 2), p[1] = 200, p[2] = static_cast<uint8_t>(y * 3), p[3] = 255;
    }
  for (int y = 0; y < H / 2; ++y)
    for (int x = 0; x < W / 2; ++x) hint[y * (W / 2) + x] = (x > 12 && x < 36) ? 65535 : 0;
  ImageView pv{plate.data(), W, H, 4, PixelType::UInt8, 0};
  ImageView hv{hint.data(), W / 2, H / 2, 1, PixelType::UInt16, 0};
  const auto r = e.process_frame(pv, hv);
  CHECK((r.alpha.width == W && r.alpha.height == H && r.alpha.channels == 1));
  CHECK(r.fg.channels == 3);
  CHECK(r.processed.channels == 4);
  CHECK(r.comp.channels == 3);
  for (size_t i = 0; i < r.alpha.pixels.size(); ++i) {
    CHECK(r.processed.pixels[i * 4 + 3] == r.alpha.pixels[i]);
    if (i > 50) break;
  }
  // processed rgb = srgb_to_linear(fg) * alpha (despill off)
  const float a = r.alpha.at(40, 30, 0), f = r.fg.at(40, 30, 1);
  const float lin = f <= 0.04045f ? f / 12.92f : std::pow((f + 0.055f) / 1.055f, 2.4f);
  CHECK(r.processed.pixels[(30 * W + 40) * 4 + 1] == Approx(lin * a).margin(1e-5));
  CHECK(r.timings.infer_ms > 0);
  CHECK(r.memory.host_peak_allocated > 0);
  // Deterministic.
  const auto r2 = e.process_frame(pv, hv);
  CHECK(r2.alpha.pixels == r.alpha.pixels);
}

TEST_CASE("engine errors are typed and name the problem", "[model]") {
  auto o = tiny("original");
  o.model.checkpoint = "/nonexistent/CorridorKey.pth";
  CHECK_THROWS_AS(OriginalEngine(o), IoError);
  o = tiny("original");
  o.model.device = "cuda:3";
  CHECK_THROWS_AS(OriginalEngine(o), DeviceError);
  o = tiny("original");
  o.engine.img_size = 100;
  CHECK_THROWS_WITH(OriginalEngine(o), Contains("img_size 100"));
  OriginalEngine e(tiny("original", 128));
  CHECK_THROWS_AS(e.run_model(std::vector<float>(10)), IoError);
  ImageView empty{};
  CHECK_THROWS_WITH(e.process_frame(empty, empty), Contains("plate"));
}

TEST_CASE("create_engine picks the class by the profile's engine field", "[model]") {
  auto e = create_engine(tiny("original", 128).model, tiny("original", 128).engine);
  CHECK(dynamic_cast<OriginalEngine*>(e.get()) != nullptr);
  auto o = tiny("optimized", 128);
  o.model.model_precision = Precision::Float32;
  auto e2 = create_engine(o.model, o.engine);
  CHECK(dynamic_cast<OptimizedEngine*>(e2.get()) != nullptr);
  CHECK(e2->info().arch == "tiny");
  CHECK(e2->info().img_size == 128);
  // The field decides, not the profile's name.
  auto renamed = tiny("original", 128);
  renamed.engine.profile = "my-studio-profile";
  renamed.engine.engine_kind = EngineKind::Optimized;
  auto e3 = create_engine(renamed.model, renamed.engine);
  CHECK(dynamic_cast<OptimizedEngine*>(e3.get()) != nullptr);
  renamed.engine.engine_kind = EngineKind::Original;
  renamed.engine.profile = "optimized";
  CHECK(dynamic_cast<OriginalEngine*>(create_engine(renamed.model, renamed.engine).get()) != nullptr);
}

TEST_CASE("verify restores the process-global TF32 switches it changes", "[model]") {
  auto& ctx = at::globalContext();
  const bool before = ctx.allowTF32CuBLAS();
  ctx.setAllowTF32CuBLAS(true);
  ctx.setAllowTF32CuDNN(true);
  VerifyOptions v;
  v.checkpoint = ck_test::fixture("tiny128.ts");
  v.device = "cpu";
  const auto rep = verify_checkpoint(v);
  CHECK(rep.passed);
  CHECK(ctx.allowTF32CuBLAS());
  CHECK(ctx.allowTF32CuDNN());
  ctx.setAllowTF32CuBLAS(before);
}

TEST_CASE("execution plan: token routing never runs inside a CUDA graph or a package", "[unit]") {
  using corridorkey::detail::ExecKind;
  using corridorkey::detail::plan_execution;
  Profile o;
  o.engine.compile_mode = CompileMode::ReduceOverhead;
  CHECK(plan_execution(o.engine, /*cuda=*/true, /*routing=*/false).kind == ExecKind::CudaGraph);
  auto routed = plan_execution(o.engine, true, true);
  CHECK(routed.kind == ExecKind::Eager);
  REQUIRE(routed.notes.size() == 1);
  CHECK_THAT(routed.notes[0], Contains("token routing") && Contains("running eager"));
  CHECK(plan_execution(o.engine, false, false).kind == ExecKind::Eager);
  o.engine.compile_mode = CompileMode::Default;  // the experimental profile's mode
  CHECK(plan_execution(o.engine, true, false).kind == ExecKind::CudaGraph);
  CHECK(plan_execution(o.engine, true, true).kind == ExecKind::Eager);
  o.engine.aoti_package = "m.pt2";
  CHECK(plan_execution(o.engine, true, false).kind == ExecKind::Aoti);
  CHECK(plan_execution(o.engine, false, false).kind == ExecKind::Aoti);
  CHECK(plan_execution(o.engine, true, true).kind == ExecKind::Eager);
  // A decoupled backbone: the package is not trusted to hold the resize.
  CHECK(plan_execution(o.engine, true, false, /*decoupled=*/true).kind == ExecKind::CudaGraph);
  const auto dec = plan_execution(o.engine, false, false, true);
  CHECK(dec.kind == ExecKind::Eager);
  REQUIRE(dec.notes.size() == 1);
  CHECK_THAT(dec.notes[0], Contains("not this backbone_size") && Contains("running eager"));
  o.engine.compile_mode = CompileMode::None;
  CHECK(plan_execution(o.engine, true, true).kind == ExecKind::Eager);
  CHECK(plan_execution(o.engine, true, true).notes.empty());
  // The experimental profile on CUDA: routing and a compile mode ask for both.
  auto exp = load_profile("experimental");
  CHECK(exp.model.token_routing);
  CHECK(plan_execution(exp.engine, true, exp.model.token_routing).kind == ExecKind::Eager);
}

TEST_CASE("out of memory: degrade retries the frame tiled, then in half precision", "[model]") {
  auto o = tiny("original");
  o.engine.tiled_refiner = RefinerTiling::Off;
  o.engine.tile_size = 64;
  o.engine.on_oom = OnOom::Degrade;
  OptimizedEngine e(o);
  const auto in = seeded(256, 5);
  const auto clean = e.run_model(in);
  CHECK(e.info().refiner == "whole image");
  corridorkey::detail::inject_out_of_memory(1);
  const auto tiled = e.run_model(in);  // first step: tiled refiner + cache clearing
  CHECK(e.info().refiner == "tiled 64 px");
  CHECK(e.info().precision == "float32");
  CHECK_THAT(e.info().notes, Contains("out of memory") && Contains("refiner tiled (64 px)"));
  CHECK(max_diff(clean.alpha, tiled.alpha) <= 1e-4);  // the tiling bound: same matte
  corridorkey::detail::inject_out_of_memory(1);
  const auto half = e.run_model(in);  // second step: a half precision
  CHECK(e.info().precision == "bfloat16");
  CHECK_THAT(e.info().notes, Contains("float32 -> bfloat16"));
  CHECK(max_diff(clean.alpha, half.alpha) <= 0.1);
  corridorkey::detail::inject_out_of_memory(1);  // nothing left to give
  CHECK_THROWS_AS(e.run_model(in), ModelError);
  CHECK_THROWS_WITH([&] {
    corridorkey::detail::inject_out_of_memory(1);
    e.run_model(in);
  }(), Contains("out of memory") && Contains("even after degrading"));
  // fail: the first out-of-memory fails the frame.
  o.engine.on_oom = OnOom::Fail;
  OptimizedEngine f(o);
  corridorkey::detail::inject_out_of_memory(1);
  CHECK_THROWS_WITH(f.run_model(in), Contains("out of memory at img_size 256"));
  CHECK(f.info().refiner == "whole image");
  corridorkey::detail::inject_out_of_memory(0);
}
