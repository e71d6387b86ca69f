// Table-driven check of kernels/ ops against their plain-torch references. The CPU half
// checks the reference itself against torch's GroupNorm; the [cuda] half compares the
// CUDA kernel with the reference and is skipped (visibly) without a GPU.
#include "group_norm_apply.h"
#include "group_norm_cpu.h"
#include "attention_cpu.h"
#include "attention_f32_cpu.h"
#include "upsample_add_cpu.h"
#include "winograd_conv_cpu.h"
#include "model/conv.h"
#include "model/functional.h"
#include "runtime/memory.h"
#include "support/support.h"

#include <corridorkey/system.h>

#include <catch2/catch.hpp>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace K = corridorkey::kernels;

namespace {
struct Stats {
  torch::Tensor mean, rstd;
};
Stats group_stats(const torch::Tensor& x, int64_t groups, double eps = 1e-5) {
  auto v = x.to(torch::kFloat).view({x.size(0), groups, -1});
  auto mean = v.mean(-1);
  auto var = v.var(-1, /*unbiased=*/false);
  return {mean, torch::rsqrt(var + eps)};
}
}  // namespace

TEST_CASE("group_norm_apply reference equals GroupNorm (+ residual, ReLU)", "[unit]") {
  auto x = torch::randn({2, 16, 9, 13});
  auto r = torch::randn({2, 16, 9, 13});
  auto g = torch::rand({16}) + 0.5, b = torch::randn({16});
  const auto s = group_stats(x, 8);
  auto want = torch::relu(torch::group_norm(x, 8, g, b, 1e-5) + r);
  auto got = K::group_norm_apply(x, s.mean, s.rstd, g, b, 8, r, true);
  CHECK(ck_test::max_abs_diff(got, want) < 1e-5);
  auto plain = K::group_norm_apply(x, s.mean, s.rstd, g, b, 8, std::nullopt, false);
  CHECK(ck_test::max_abs_diff(plain, torch::group_norm(x, 8, g, b, 1e-5)) < 1e-5);
}

TEST_CASE("group_norm_apply CUDA kernel matches the reference", "[cuda]") {
  if (!torch::cuda::is_available()) {
    std::cout << "SKIPPED: no CUDA device\n";
    return;
  }
  REQUIRE(K::cuda_kernels_enabled());
  struct Case {
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    double tol;
  };
  for (const auto& c : {Case{torch::kFloat, {1, 64, 512, 512}, 1e-5},
                        Case{torch::kHalf, {2, 64, 129, 77}, 1e-2},
                        Case{torch::kBFloat16, {1, 64, 96, 96}, 5e-2}}) {
    auto opts = torch::TensorOptions().device(torch::kCUDA);
    auto x = torch::randn(c.shape, opts).to(c.dtype);
    auto r = torch::randn(c.shape, opts).to(c.dtype);
    auto g = torch::rand({64}, opts) + 0.5, b = torch::randn({64}, opts);
    const auto s = group_stats(x, 8);
    auto want = K::group_norm_apply_reference(x, s.mean, s.rstd, g, b, 8, r, true);
    auto got = K::group_norm_apply(x, s.mean, s.rstd, g, b, 8, r, true);
    INFO("dtype " << c.dtype);
    CHECK(ck_test::max_abs_diff(got, want) <= c.tol);
  }
}

TEST_CASE("CPU GroupNorm kernels match torch (layouts, dtypes, residual, ReLU, in place)", "[unit]") {
  REQUIRE(K::cpu_kernels_enabled());  // the start-up self-test passed on this CPU
  for (auto dt : {torch::kFloat, torch::kBFloat16})
    for (bool cl : {false, true})
      for (bool res : {false, true}) {
        INFO("dtype " << dt << " channels_last " << cl << " residual " << res);
        // Channel means large against the spread: the statistics must not cancel.
        auto x = (torch::randn({2, 64, 37, 53}) * 0.05 + torch::linspace(-4, 4, 64).view({1, 64, 1, 1})).to(dt);
        auto r = torch::randn({2, 64, 37, 53}).to(dt);
        if (cl) {
          x = x.contiguous(at::MemoryFormat::ChannelsLast);
          r = r.contiguous(at::MemoryFormat::ChannelsLast);
        }
        auto g = torch::rand({64}) + 0.5, b = torch::randn({64});
        // float64 truth (torch's own float32 channels-last GroupNorm is off by ~5e-4 when a
        // group's mean is large against its spread).
        auto want = torch::group_norm(x.to(torch::kDouble).contiguous(), 8, g.to(torch::kDouble),
                                      b.to(torch::kDouble), 1e-5);
        if (res) want = want + r.to(torch::kDouble);
        want = torch::relu(want);
        // Statistics alone: mean and variance per (sample, group).
        const auto m = K::group_moments(x, 8);
        const auto v = x.to(torch::kFloat).reshape({2, 8, -1});
        CHECK(ck_test::max_abs_diff(m.mean, v.mean(-1)) < 1e-5);
        CHECK(ck_test::max_abs_diff(m.m2 / m.count, v.var(-1, /*unbiased=*/false)) < 1e-4);
        auto copy = x.clone();
        auto got = K::group_norm_fused(copy, 8, g, b, 1e-5,
                                       res ? std::optional<torch::Tensor>(r) : std::nullopt, true,
                                       /*in_place=*/true);
        CHECK(got.data_ptr() == copy.data_ptr());  // written in place, layout kept
        CHECK(got.is_contiguous(cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
        const double tol = dt == torch::kFloat ? 1e-5 : 4e-2;
        CHECK(ck_test::max_abs_diff(got, want) <= tol);
      }
}

TEST_CASE("CPU GroupNorm ReLU lets NaN through like torch::relu", "[unit]") {
  auto x = torch::randn({1, 8, 4, 4});
  auto mean = torch::zeros({1, 8}), rstd = torch::ones({1, 8});
  auto g = torch::ones({8}), b = torch::zeros({8});
  x[0][3][1][1] = std::nanf("");
  auto y = K::group_norm_apply(x, mean, rstd, g, b, 8, std::nullopt, true);
  CHECK(std::isnan(y[0][3][1][1].item<float>()));
  CHECK((y.nan_to_num(0) >= 0).all().item<bool>());
}

// Not run by ctest ([.]): `ck_tests "[.kernel-bench]"` times the native attention kernel
// against LibTorch's SDPA on the shapes of the global blocks.
TEST_CASE("native attention speed against LibTorch's SDPA", "[.kernel-bench]") {
  if (!K::native_attention_available()) return;
  for (auto [h, n] : {std::pair<int64_t, int64_t>{8, 4096}, {16, 1024}, {8, 16384}}) {
    auto q = torch::randn({1, h, n, 56}).to(torch::kBFloat16);
    auto k = torch::randn({1, h, n, 56}).to(torch::kBFloat16);
    auto v = torch::randn({1, h, n, 56}).to(torch::kBFloat16);
    auto time = [&](auto&& f) {
      f();
      std::vector<double> t;
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      return t[1];
    };
    const double ours = time([&] { return K::native_attention_bf16(q, k, v); });
    const double torch_ms = time([&] { return at::scaled_dot_product_attention(q, k, v); });
    const double gflop = 4.0 * h * n * n * 56 / 1e9;
    std::cout << "heads " << h << " tokens " << n << ": native " << ours << " ms ("
              << gflop / ours * 1e3 << " GFLOP/s), LibTorch " << torch_ms << " ms\n";
  }
}

TEST_CASE("native bf16 attention matches float32 SDPA as closely as LibTorch's bf16 kernel", "[unit]") {
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (flags.find("avx512_bf16") == std::string::npos) {
    std::cout << "SKIPPED: no AVX-512 BF16 on this CPU; the kernel is not used\n";
    CHECK_FALSE(K::native_attention_available());
    return;
  }
  REQUIRE(K::native_attention_available());
  // Global-block shapes (d = 56), a pooled query (Nq < Nk, block 21), odd tails, another d.
  for (auto [h, nq, nk, d] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{8, 512, 512, 56},
                              {16, 64, 256, 56}, {2, 333, 1000, 56}, {3, 17, 45, 64}, {1, 5, 7, 10}}) {
    INFO("heads " << h << " nq " << nq << " nk " << nk << " d " << d);
    auto q = (torch::randn({1, h, nq, d}) * 1.5).to(torch::kBFloat16);
    auto k = (torch::randn({1, h, nk, d}) * 1.5).to(torch::kBFloat16);
    auto v = torch::randn({1, h, nk, d}).to(torch::kBFloat16);
    REQUIRE(K::native_attention_supported(q, k, v));
    const auto truth = at::scaled_dot_product_attention(q.to(torch::kFloat), k.to(torch::kFloat),
                                                        v.to(torch::kFloat));
    const double ours = ck_test::max_abs_diff(K::native_attention_bf16(q, k, v), truth);
    const double libtorch = ck_test::max_abs_diff(at::scaled_dot_product_attention(q, k, v), truth);
    CHECK(ours <= 2 * libtorch + 2e-3);
    CHECK(ours < 2e-2);
  }
  // What it does not take stays with LibTorch.
  auto f32 = torch::randn({1, 2, 8, 56});
  CHECK_FALSE(K::native_attention_supported(f32, f32, f32));
  auto odd = torch::randn({1, 2, 8, 55}).to(torch::kBFloat16);
  CHECK_FALSE(K::native_attention_supported(odd, odd, odd));
}

TEST_CASE("native fp32 attention matches float64 attention to fp32 rounding, in Hiera's layouts", "[unit]") {
  namespace F = corridorkey::model::functional;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::cout << "SKIPPED: no AVX2 + FMA on this CPU; the kernel is not used\n";
    CHECK_FALSE(K::native_attention_f32_available());
    return;
  }
  REQUIRE(K::native_attention_f32_available());
  // hiera_base_plus's attention shapes (d 56) at a small size, straight on qkv as the blocks
  // hand it over: windowed stages 1-2 (64- and 16-token mask units, pooled q at the widening
  // blocks), global stages 3-4 (pooled q at block 21), plus odd tails and another d.
  struct Case {
    int64_t tokens, heads, windows, q_stride, d;
  };
  // Both variants, whichever the timed choice runs: a CPU that lacks AVX-512 runs only AVX2.
  std::cout << "native fp32 attention runs " << K::native_attention_f32_isa() << " ("
            << K::native_attention_f32_timing() << ")\n";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    CHECK(K::native_attention_f32_isa() == "avx512");  // fixed per machine, not raced per process
  for (const std::string isa : {"avx2", "avx512"}) {
  if (!K::native_attention_f32_use_isa(isa)) {
    std::cout << "SKIPPED the " << isa << " variant: not available on this CPU\n";
    CHECK((isa == "avx512" && !__builtin_cpu_supports("avx512f")));
    continue;
  }
  INFO("variant " << isa);
  for (const Case c : {Case{4096, 2, 64, 1, 56}, Case{4096, 4, 64, 4, 56}, Case{1024, 4, 64, 1, 56},
                       Case{1024, 8, 64, 4, 56}, Case{256, 8, 1, 1, 56}, Case{256, 16, 1, 4, 56},
                       Case{333, 3, 1, 1, 64}, Case{300, 2, 3, 1, 24}, Case{17, 1, 1, 1, 8},
                       Case{150, 2, 1, 1, 88}, Case{70, 1, 1, 1, 200}}) {
    INFO("tokens " << c.tokens << " heads " << c.heads << " windows " << c.windows << " q_stride "
                   << c.q_stride << " d " << c.d);
    auto qkv = torch::randn({2, c.tokens, 3 * c.heads * c.d}) * 1.5;
    const auto truth = F::mask_unit_attention(qkv.to(torch::kDouble), c.heads, c.windows, c.q_stride,
                                              c.windows == 1).to(torch::kFloat);
    const auto sdpa = F::mask_unit_attention(qkv, c.heads, c.windows, c.q_stride, c.windows == 1);
    const auto calls = K::native_attention_f32_calls();
    const auto ours = F::mask_unit_attention(qkv, c.heads, c.windows, c.q_stride, c.windows == 1, {}, true);
    REQUIRE(K::native_attention_f32_calls() == calls + 1);  // the kernel ran, not a fallback
    REQUIRE(ours.sizes() == truth.sizes());
    const double e_ours = ck_test::max_abs_diff(ours, truth), e_sdpa = ck_test::max_abs_diff(sdpa, truth);
    INFO("max abs error: native " << e_ours << ", LibTorch SDPA " << e_sdpa);
    CHECK(e_ours <= 4 * e_sdpa + 1e-6);
    CHECK(e_ours < 1e-5);
  }
  }
  REQUIRE(K::native_attention_f32_use_isa("auto"));
  // What it does not take stays with SDPA: a mask, bf16, d not a multiple of 8.
  const auto calls = K::native_attention_f32_calls();
  auto qkv = torch::randn({1, 64, 3 * 2 * 56});
  auto mask = torch::ones({1, 1, 1, 64}, torch::kBool);
  CHECK(ck_test::max_abs_diff(F::mask_unit_attention(qkv, 2, 1, 1, true, mask, true),
                              F::mask_unit_attention(qkv, 2, 1, 1, true, mask, false)) == 0);
  F::mask_unit_attention(qkv.to(torch::kBFloat16), 2, 1, 1, true, {}, true);
  F::mask_unit_attention(torch::randn({1, 64, 3 * 2 * 12}), 2, 1, 1, true, {}, true);
  CHECK(K::native_attention_f32_calls() == calls);
}

namespace {
uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/// The digest tests/golden/attention_f32.txt records for `isa`: the kernel on 15 seeded
/// problems (Hiera's d 56 windowed and global shapes, every tail, d 8 to 256, scaled
/// inputs) in Hiera's interleaved [N, 3, H, d] layout, each output hashed, the hashes folded.
uint64_t attention_f32_digest() {
  struct C {
    int64_t heads, nq, nk, d;
    float amp;
  };
  const C cases[] = {{2, 64, 64, 56, 1.f},  {8, 300, 300, 56, 1.f}, {2, 77, 77, 56, 2.f},   {1, 21, 300, 56, 2.f},
                     {2, 130, 17, 64, 1.f}, {1, 5, 33, 8, 3.f},     {3, 40, 150, 88, 1.f},  {1, 13, 45, 120, 1.f},
                     {1, 9, 20, 200, 1.f},  {1, 97, 129, 24, 1.f},  {2, 3, 1, 16, 1.f},     {1, 50, 257, 256, 0.5f},
                     {2, 100, 100, 40, 8.f}, {1, 190, 260, 48, 1.f}, {4, 64, 64, 112, 1.f}};
  uint64_t all = 1469598103934665603ull;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const auto& c : cases) {
    const int64_t H = c.heads, row = 3 * H * c.d, n = std::max(c.nq, c.nk);
    std::vector<float> qkv(static_cast<size_t>(n * row));
    for (auto& x : qkv) x = c.amp * nd(rng);
    std::vector<float> out(static_cast<size_t>(c.nq * H * c.d), 0.f);
    K::native_attention_f32({1, 1, H, c.nq, c.nk, c.d}, {qkv.data(), 0, 0, c.d, row},
                            {qkv.data() + H * c.d, 0, 0, c.d, row}, {qkv.data() + 2 * H * c.d, 0, 0, c.d, row},
                            {out.data(), 0, 0, c.d, H * c.d});
    const uint64_t h = fnv1a(out.data(), out.size() * sizeof(float));
    all = fnv1a(&h, sizeof h, all);
  }
  return all;
}
}  // namespace

namespace {
/// tests/golden/attention_f32.txt: "ISA DIGEST CPU" per line, the CPU (family/model) the
/// record was made on; '#' lines are comments.
struct AttentionRecord {
  std::string digest, cpu;
};
std::map<std::string, AttentionRecord> attention_records() {
  const char* src = std::getenv("CK_SOURCE_DIR");
  REQUIRE(src);
  std::map<std::string, AttentionRecord> out;
  std::ifstream f(std::string(src) + "/tests/golden/attention_f32.txt");
  REQUIRE(f);
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string isa;
    AttentionRecord r;
    in >> isa >> r.digest;
    std::getline(in >> std::ws, r.cpu);
    out[isa] = r;
  }
  return out;
}
std::string attention_digest_hex() {
  char got[17];
  std::snprintf(got, sizeof got, "%016llx", static_cast<unsigned long long>(attention_f32_digest()));
  return got;
}
}  // namespace

// Each variant's bits against a record made on real hardware of its ISA (never emulated:
// issue 46 found an emulated AVX-512 record that real AVX-512 hardware did not reproduce).
// A variant this CPU runs but nobody has recorded on real hardware is skipped, saying so;
// `ck_tests "[.attention-record]"` prints the lines to record on such a machine.
TEST_CASE("the fp32 attention kernel gives each variant's recorded bits", "[unit]") {
  const auto record = attention_records();
  REQUIRE(record.count("avx2"));
  for (const std::string isa : {"avx2", "avx512"}) {
    if (!K::native_attention_f32_use_isa(isa)) {
      std::cout << "SKIPPED the " << isa << " variant's record: no " << isa << " on this CPU\n";
      continue;
    }
    INFO("variant " << isa);
    const auto it = record.find(isa);
    if (it == record.end()) {
      std::cout << "SKIPPED the " << isa << " variant's record: none made on real " << isa
                << " hardware yet; on this CPU (" << corridorkey::cpu_features().identity() << ") it gives "
                << attention_digest_hex() << " (record it: ck_tests \"[.attention-record]\")\n";
      continue;
    }
    INFO("recorded on " << it->second.cpu);
    CHECK(it->second.digest == attention_digest_hex());
  }
  REQUIRE(K::native_attention_f32_use_isa("auto"));
}

// Not run by ctest ([.]): the record lines of every variant this CPU runs, to paste into
// tests/golden/attention_f32.txt on a machine whose ISA has no record yet.
TEST_CASE("print the fp32 attention kernel's record lines", "[.attention-record]") {
  const auto cpu = corridorkey::cpu_features();
  for (const std::string isa : {"avx2", "avx512"}) {
    if (!K::native_attention_f32_use_isa(isa)) continue;
    std::cout << isa << ' ' << attention_digest_hex() << ' ' << cpu.model_name << " (family " << cpu.family
              << " model " << cpu.model << " stepping " << cpu.stepping << ")\n";
  }
  REQUIRE(K::native_attention_f32_use_isa("auto"));
}

// Not run by ctest ([.]): `ck_tests "[.kernel-bench]"` times each fp32 attention variant
// this CPU runs at hiera_base_plus's shapes at 1024 (d 56): stage 3 global (8 heads x 4096
// tokens), stage 4 global (16 x 1024) and stage 2's 16-token mask units (4 heads, 256 windows).
TEST_CASE("native fp32 attention speed per variant", "[.kernel-bench]") {
  struct Shape {
    int64_t heads, windows, tokens;
  };
  for (const std::string isa : {"avx2", "avx512"}) {
    if (!K::native_attention_f32_use_isa(isa)) {
      std::cout << isa << ": not on this CPU\n";
      continue;
    }
    for (const Shape s : {Shape{8, 1, 4096}, Shape{16, 1, 1024}, Shape{4, 256, 16}}) {
      const int64_t d = 56, row = 3 * s.heads * d, n = s.windows * s.tokens;
      std::vector<float> qkv(static_cast<size_t>(n * row)), out(static_cast<size_t>(n * s.heads * d));
      for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
      // Windows are the fastest index of N (Hiera's mask units): window stride 1 row.
      const K::AttentionF32Shape shape{1, s.windows, s.heads, s.tokens, s.tokens, d};
      auto view = [&](int64_t part) {
        return K::AttentionF32View{qkv.data() + part * s.heads * d, 0, row, d, s.windows * row};
      };
      const K::AttentionF32Out o{out.data(), 0, s.heads * d, d, s.windows * s.heads * d};
      // Wall time, and the process's CPU time (all threads): on a shared machine the second
      // moves less with what else runs.
      std::vector<double> t, cpu;
      auto cpu_ms = [] {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
      };
      for (int i = 0; i < 6; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = cpu_ms();
        K::native_attention_f32(shape, view(0), view(1), view(2), o);
        if (i > 0) {
          t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
          cpu.push_back(cpu_ms() - c0);
        }
      }
      std::sort(t.begin(), t.end());
      std::sort(cpu.begin(), cpu.end());
      const double gflop = 4.0 * s.heads * s.windows * s.tokens * s.tokens * d / 1e9;
      std::printf("%s heads %lld windows %lld tokens %lld: median %.2f ms, best %.2f ms (%.1f GFLOP/s), cpu best %.2f ms\n",
                  isa.c_str(), static_cast<long long>(s.heads), static_cast<long long>(s.windows),
                  static_cast<long long>(s.tokens), t[t.size() / 2], t[0], gflop / t[t.size() / 2] * 1e3, cpu[0]);
    }
  }
  REQUIRE(K::native_attention_f32_use_isa("auto"));
}

#if defined(__x86_64__)
TEST_CASE("the fp32 attention kernel flushes subnormals inside; both kernels leave the caller's floating-point mode", "[unit]") {
  // A row whose best key (value 0) outscores the other 199 (values 0.5) by ~200 nats: their
  // probabilities sit at the kernel's floor, 2^-126, and each product with 0.5 is subnormal.
  // Flushed (flush_denormals.h) the output is exactly 0; with gradual underflow it would be
  // 199 x 2^-127 = 1.2e-36, and an Intel core would take a microcode assist per product.
  if (!K::native_attention_f32_available()) {
    std::cout << "SKIPPED: no AVX2 + FMA on this CPU; the kernel is not used\n";
    return;
  }
  const int64_t nk = 200, d = 8;
  std::vector<float> q(d, 0.f), k(static_cast<size_t>(nk * d), 0.f), v(static_cast<size_t>(nk * d), 0.5f);
  q[0] = 24.f;
  k[0] = 24.f;                               // score 24 * 24 / sqrt(8) = 204 against 0
  for (int64_t t = 0; t < d; ++t) v[t] = 0.f;  // the best key's value
  // The control bits only: the exception flags are sticky and raised outside the tasks too.
  const unsigned ftz_daz = 0x8040u, control = ~0x3Fu;
  struct Restore {  // the caller's mode and the timed ISA choice, even if a check throws
    unsigned csr = _mm_getcsr();
    ~Restore() {
      _mm_setcsr(csr);
      K::native_attention_f32_use_isa("auto");
    }
  } restore;
  const unsigned caller = restore.csr;
  for (const std::string isa : {"avx2", "avx512"}) {
    if (!K::native_attention_f32_use_isa(isa)) continue;
    INFO("variant " << isa);
    for (const bool caller_flushes : {false, true}) {
      _mm_setcsr(caller_flushes ? (caller | ftz_daz) : (caller & ~ftz_daz));
      const unsigned before = _mm_getcsr() & control;
      std::vector<float> out(d, -1.f);
      K::native_attention_f32({1, 1, 1, 1, nk, d}, {q.data(), 0, 0, 0, d}, {k.data(), 0, 0, 0, d},
                              {v.data(), 0, 0, 0, d}, {out.data(), 0, 0, 0, d});
      CHECK((_mm_getcsr() & control) == before);  // the caller's mode, whichever it was, is restored
      if (!caller_flushes) {
        volatile float tiny = 1e-38f;  // and gradual underflow is back on this thread
        CHECK(tiny * 0.5f > 0.0f);
      }
      for (const float x : out) CHECK(x == 0.0f);
    }
  }
  if (K::native_attention_available()) {  // the bf16 kernel restores the mode too
    _mm_setcsr(caller & ~ftz_daz);
    auto qb = torch::randn({1, 2, 40, 56}).to(torch::kBFloat16);
    K::native_attention_bf16(qb * 8, qb * 8, qb);
    CHECK((_mm_getcsr() & control) == ((caller & ~ftz_daz) & control));
  }
}
#endif

TEST_CASE("fused bilinear upsample-add equals interpolate + add_ to float32 rounding", "[unit]") {
  namespace F = torch::nn::functional;
  // The decoders' shapes at 1024 (32^2, 64^2, 128^2 -> 256^2, 256 channels), odd sizes, a
  // downscale, N = 2, and the write (first scale) and add (later scales) forms.
  struct Case {
    int64_t n, c, hi, wi, ho, wo;
  };
  for (const Case k : {Case{1, 256, 32, 32, 256, 256}, Case{1, 256, 64, 64, 256, 256},
                       Case{1, 256, 128, 128, 256, 256}, Case{2, 24, 7, 11, 20, 33},
                       Case{1, 5, 9, 9, 4, 6}, Case{1, 3, 16, 16, 16, 16}}) {
    INFO("n " << k.n << " c " << k.c << " " << k.hi << "x" << k.wi << " -> " << k.ho << "x" << k.wo);
    const auto cl = torch::MemoryFormat::ChannelsLast;
    const auto z = torch::randn({k.n, k.c, k.hi, k.wi}).contiguous(cl);
    const auto base = torch::randn({k.n, k.c, k.ho, k.wo}).contiguous(cl);
    const auto up = F::interpolate(z, F::InterpolateFuncOptions()
                                          .size(std::vector<int64_t>{k.ho, k.wo})
                                          .mode(torch::kBilinear)
                                          .align_corners(false));
    for (bool accumulate : {false, true}) {
      auto ours = accumulate ? base.clone(cl) : torch::full_like(base, 7.0f);
      K::upsample_bilinear_add_nhwc(z.data_ptr<float>(), k.n, k.hi, k.wi, k.c, ours.data_ptr<float>(), k.ho,
                                    k.wo, accumulate);
      const auto want = accumulate ? base + up : up;
      const double err = ck_test::max_abs_diff(ours, want);
      INFO("accumulate " << accumulate << " max abs diff " << err);
      CHECK(err <= 1e-6 * (1.0 + want.abs().max().item<double>()));
    }
  }
}

// Not run by ctest ([.]): `ck_tests "Winograd convolution speed*"` times the refiner's
// 64 -> 64 convolution at 1024^2 (channels-last, 2 threads as docs/performance.md's rows, outputs
// from the host block cache as in the optimized profile, not fresh pages) by Winograd,
// by oneDNN's direct convolution and by LibTorch's NNPACK F(6x6, 3x3), with each one's error
// against a float64 convolution: docs/performance.md's numbers.
TEST_CASE("Winograd convolution speed against oneDNN and NNPACK", "[.kernel-bench]") {
  namespace F = corridorkey::model::functional;
  REQUIRE(K::winograd_conv_f32_available());
  c10::InferenceMode inference;
  at::set_num_threads(2);
  corridorkey::detail::set_host_block_cache(true);
  struct CacheOff {
    ~CacheOff() { corridorkey::detail::set_host_block_cache(false); }
  } cache_off;
  torch::manual_seed(0);
  const int64_t S = 1024;
  const auto cl = torch::MemoryFormat::ChannelsLast;
  auto time = [](auto&& f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[2];
  };
  const auto x = torch::randn({1, 64, S, S});
  const auto xc = x.contiguous(cl);
  for (const int64_t d : {1, 2, 4, 8}) {
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(64, 64, 3).padding(d).dilation(d));
    conv->weight.mul_(0.5);
    const auto truth = at::conv2d(x.to(torch::kDouble), conv->weight.to(torch::kDouble),
                                  conv->bias.to(torch::kDouble), 1, d, d);
    torch::Tensor direct, wino;
    const double t_direct = time([&] { direct = conv->forward(xc); });
    const double t_wino = time([&] {
      F::WinogradConvScope on(true);
      wino = F::conv2d(conv, xc);
    });
    std::string nnpack = "n/a (dilation)";
    if (d == 1 && at::_nnpack_available()) {
      torch::Tensor nn;
      const double t_nn = time([&] { nn = at::_nnpack_spatial_convolution(x, conv->weight, conv->bias, {1, 1}, {1, 1}); });
      nnpack = std::to_string(t_nn) + " ms, error " + std::to_string(ck_test::max_abs_diff(nn, truth));
    }
    const double gemm_gflop = 2.0 * (S / 2) * (S / 2) * 16 * 64 * 64 / 1e9;
    std::cout << "dilation " << d << ": Winograd " << t_wino << " ms (error " << ck_test::max_abs_diff(wino, truth)
              << "; its GEMMs " << gemm_gflop << " GFLOP), oneDNN direct " << t_direct << " ms (error "
              << ck_test::max_abs_diff(direct, truth) << "), NNPACK " << nnpack << "; output scale "
              << truth.abs().max().item<double>() << "\n";
    CHECK(ck_test::max_abs_diff(wino, truth) <= 4 * ck_test::max_abs_diff(direct, truth) + 1e-6);
  }
}

TEST_CASE("Winograd F(2x2,3x3) convolution matches float64 as closely as oneDNN's direct one", "[unit]") {
  namespace F = corridorkey::model::functional;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::cout << "SKIPPED: no AVX2 + FMA on this CPU; the kernel is not used\n";
    CHECK_FALSE(K::winograd_conv_f32_available());
    return;
  }
  REQUIRE(K::winograd_conv_f32_available());
  if (__builtin_cpu_supports("avx512f")) CHECK(K::winograd_conv_f32_isa() == "avx512");
  // The refiner's convolutions: 64 -> 64 at dilations 1, 2, 4, 8 with padding = dilation
  // (whole image) and 0 (the tiler's halo regions); odd sizes (partial 2x2 tiles, taps in
  // the padding), two images, 16 -> 16 (tiny / small models), 32 -> 80 (both GEMM widths),
  // no bias, and maps smaller than one dilated tile.
  struct Case {
    int64_t n, cin, cout, h, w, d, pad;
    bool bias;
  };
  const auto cl = torch::MemoryFormat::ChannelsLast;
  c10::InferenceMode inference;  // as the engine runs (the path keeps out of autograd)
  struct IsaReset {  // a failed REQUIRE must not leave a variant forced for later tests
    ~IsaReset() { K::winograd_conv_f32_use_isa("auto"); }
  } reset;
  std::vector<torch::Tensor> outs[2];  // AVX2 and AVX-512 give the same bits
  int variant = 0;
  for (const std::string isa : {"avx2", "avx512"}) {
    if (!K::winograd_conv_f32_use_isa(isa)) {
      std::cout << "SKIPPED the " << isa << " variant: not available on this CPU\n";
      CHECK((isa == "avx512" && !__builtin_cpu_supports("avx512f")));
      ++variant;
      continue;
    }
    INFO("variant " << isa);
    torch::manual_seed(7);
    for (const Case c : {Case{1, 64, 64, 64, 64, 1, 1, true}, Case{1, 64, 64, 37, 45, 2, 2, true},
                         Case{1, 64, 64, 41, 39, 4, 4, true}, Case{2, 64, 64, 35, 50, 8, 8, true},
                         Case{1, 64, 64, 30, 31, 8, 0, true}, Case{1, 64, 64, 13, 9, 1, 0, true},
                         Case{1, 16, 16, 23, 17, 2, 2, true}, Case{1, 32, 80, 19, 21, 1, 1, false},
                         Case{1, 16, 32, 3, 5, 4, 4, true}, Case{1, 16, 16, 1, 1, 1, 1, true}}) {
      INFO("n " << c.n << " " << c.cin << " -> " << c.cout << " " << c.h << "x" << c.w << " dilation " << c.d
                << " pad " << c.pad << " bias " << c.bias);
      torch::nn::Conv2d conv(torch::nn::Conv2dOptions(c.cin, c.cout, 3).padding(c.d).dilation(c.d).bias(c.bias));
      const auto x = torch::randn({c.n, c.cin, c.h, c.w}).contiguous(cl);
      const auto b = c.bias ? conv->bias.to(torch::kDouble) : torch::Tensor();
      const auto truth = at::conv2d(x.to(torch::kDouble), conv->weight.to(torch::kDouble), b, 1, c.pad, c.d);
      const auto direct = at::conv2d(x, conv->weight, conv->bias, 1, c.pad, c.d);
      const auto calls = K::winograd_conv_f32_calls();
      torch::Tensor ours;
      {
        F::WinogradConvScope on(true);
        REQUIRE(F::winograd_conv_active(conv, x));
        ours = F::conv2d(conv, x, c.pad);
      }
      REQUIRE(K::winograd_conv_f32_calls() == calls + 1);  // the kernel ran, not a fallback
      REQUIRE(ours.sizes() == truth.sizes());
      CHECK(ours.is_contiguous(cl));
      const double e_ours = ck_test::max_abs_diff(ours, truth), e_direct = ck_test::max_abs_diff(direct, truth);
      const double scale = truth.abs().max().item<double>();
      INFO("max abs error: Winograd " << e_ours << ", direct " << e_direct << ", output scale " << scale);
      CHECK(std::isfinite(e_ours));
      CHECK(e_ours <= 4 * e_direct + 1e-6 * scale);
      CHECK(e_ours <= 2e-6 * scale);
      outs[variant].push_back(ours);
    }
    ++variant;
  }
  REQUIRE(K::winograd_conv_f32_use_isa("auto"));
  if (!outs[0].empty() && !outs[1].empty())
    for (size_t i = 0; i < outs[0].size(); ++i) CHECK(torch::equal(outs[0][i], outs[1][i]));

  // What it does not take stays with at::conv2d, bit for bit: outside a scope, NCHW input,
  // 7 input channels (the stem), a stride, groups, bfloat16, unequal dilations, "same"
  // padding, reflect padding, and (below) weights that record autograd history.
  const auto calls = K::winograd_conv_f32_calls();
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(16, 16, 3).padding(1));
  const auto x = torch::randn({1, 16, 20, 20});
  const auto xc = x.contiguous(cl);
  CHECK(torch::equal(F::conv2d(conv, xc), conv->forward(xc)));
  {
    F::WinogradConvScope on(true);
    torch::nn::Conv2d uneven(torch::nn::Conv2dOptions(16, 16, 3).padding(2).dilation({1, 2}));
    CHECK(torch::equal(F::conv2d(uneven, xc), uneven->forward(xc)));
    torch::nn::Conv2d same(torch::nn::Conv2dOptions(16, 16, 3).padding(torch::kSame));
    CHECK(torch::equal(F::conv2d(same, xc), same->forward(xc)));
    torch::nn::Conv2d reflect(torch::nn::Conv2dOptions(16, 16, 3).padding(1).padding_mode(torch::kReflect));
    CHECK(torch::equal(F::conv2d(reflect, xc), reflect->forward(xc)));
    CHECK(torch::equal(F::conv2d(conv, x), conv->forward(x)));
    torch::nn::Conv2d stem(torch::nn::Conv2dOptions(7, 16, 3).padding(1));
    const auto x7 = torch::randn({1, 7, 20, 20}).contiguous(cl);
    CHECK(torch::equal(F::conv2d(stem, x7), stem->forward(x7)));
    torch::nn::Conv2d strided(torch::nn::Conv2dOptions(16, 16, 3).padding(1).stride(2));
    CHECK(torch::equal(F::conv2d(strided, x.contiguous(cl)), strided->forward(x.contiguous(cl))));
    torch::nn::Conv2d grouped(torch::nn::Conv2dOptions(16, 16, 3).padding(1).groups(2));
    CHECK(torch::equal(F::conv2d(grouped, x.contiguous(cl)), grouped->forward(x.contiguous(cl))));
    torch::nn::Conv2d half(torch::nn::Conv2dOptions(16, 16, 3).padding(1));
    half->to(torch::kBFloat16);
    const auto xb = x.to(torch::kBFloat16).contiguous(cl);
    CHECK(torch::equal(F::conv2d(half, xb), half->forward(xb)));
  }
  CHECK(K::winograd_conv_f32_calls() == calls);
  {
    // Outside inference mode, with weights that require grad: at::conv2d's autograd graph.
    c10::InferenceMode off(false);
    F::WinogradConvScope on(true);
    torch::nn::Conv2d trained(torch::nn::Conv2dOptions(16, 16, 3).padding(1));
    const auto y = F::conv2d(trained, x.clone().contiguous(cl));
    CHECK(y.requires_grad());
  }
  CHECK(K::winograd_conv_f32_calls() == calls);
}
