// bench --roofline's encoder split (model/encoder_parts.h): the clock sees the linear layers
// and both kinds of attention, only while it runs, and never changes what the model
// computes. And, not run by ctest, attention's own ceiling on this machine.
#include <catch2/catch.hpp>

#include "model/encoder_parts.h"
#include "model/green_former.h"
#include "model/random_weights.h"
#include "model/sample_input.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <vector>

using namespace corridorkey;

namespace {

model::GreenFormer tiny_net(int64_t size) {
  model::GreenFormer net(model::GreenFormerConfig::tiny(size));
  model::randomize_weights(*net, 11);
  net->eval();
  return net;
}

}  // namespace

TEST_CASE("the encoder part clock times linear layers and both attentions, and changes nothing", "[model]") {
  torch::InferenceMode guard;
  auto net = tiny_net(128);
  const auto x = model::seeded_input(1, 128, 3, 0.2);
  const auto plain = net->forward(x);

  model::EncoderPartTimes parts;
  model::GreenFormerOutput timed;
  {
    model::EncoderPartClock clock(parts);
    timed = net->forward(x);
  }
  // tiny has mask-unit stages (1, 2) and global ones (3, 4), like every Hiera here.
  CHECK(parts.calls > 0);
  CHECK(parts.linear_ms > 0);
  CHECK(parts.global_attention_ms > 0);
  CHECK(parts.windowed_attention_ms > 0);
  CHECK(torch::equal(plain.alpha, timed.alpha));
  CHECK(torch::equal(plain.fg, timed.fg));

  // Gone with its scope: a later forward adds nothing.
  const auto before = parts.calls;
  net->forward(x);
  CHECK(parts.calls == before);
}

// Not run by ctest ([.]): `ck_tests "[.kernel-bench]"` measures attention's own ceiling on
// this machine at the global blocks' head dim 56. Each score costs 4 d = 224 counted FLOPs
// (q k^T, then the weights times v) and one exponential that no FLOP count includes, so even
// a perfect kernel runs at most at 4d / (4d / GEMM rate + 1 / exp rate): the GEMM rate is
// LibTorch's square GEMM of 2048 (the rate bench --roofline uses), the exp rate LibTorch's
// vectorised exp over a block of scores kept in L2 on both cores. The max, the scale, the
// row sums and the online rescale come on top. For comparison it also times the same work
// composed from LibTorch calls, tile by tile (128 queries x 512 keys per tile, both cores on
// their own query blocks). A precision whose GEMM runs slower than float32's here (bf16
// without native dot products) is not timed.
TEST_CASE("attention's ceiling: two GEMMs and one exponential per score at d = 56", "[.kernel-bench]") {
  torch::InferenceMode guard;
  auto best_of = [](int reps, auto&& f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return *std::min_element(t.begin(), t.end());
  };
  auto gemm_rate = [&](torch::ScalarType dtype, int64_t side) {
    const auto a = torch::randn({side, side}).to(dtype), b = torch::randn({side, side}).to(dtype);
    return 2.0 * static_cast<double>(side * side * side) / (best_of(3, [&] { return torch::mm(a, b); }) * 1e6);
  };
  // A 512 probe first: where bf16 is emulated, one GEMM of 2048 takes minutes.
  const double f32_probe = gemm_rate(torch::kFloat, 512);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const char* name = dtype == torch::kFloat ? "float32" : "bfloat16";
    if (dtype != torch::kFloat) {
      const double probe = gemm_rate(dtype, 512);
      if (probe < f32_probe) {
        std::cout << name << ": GEMM of 512 at " << probe << " GFLOP/s, slower than float32's " << f32_probe
                  << " here: not timed\n";
        continue;
      }
    }
    const double rate = gemm_rate(dtype, 2048);
    const int64_t d = 56, qb = 128, kb = 512;
    // Exponentials per second: one 128 x 512 block of scores per core, in L2, 100 passes.
    const int threads = at::get_num_threads();
    const auto in = (torch::rand({threads, qb * kb}) - 1).to(dtype);
    auto ex = torch::empty_like(in);
    const double exp_ms = best_of(3, [&] {
      for (int i = 0; i < 100; ++i) at::exp_out(ex, in);
      return ex;
    });
    const double exp_rate = 100.0 * static_cast<double>(in.numel()) / exp_ms / 1e6;  // G exp/s
    const double ceiling = 4.0 * d / (4.0 * d / rate + 1.0 / exp_rate);
    std::cout << name << ": GEMM " << rate << " GFLOP/s, exp " << exp_rate << " G/s: attention's ceiling "
              << ceiling << " GFLOP/s = " << 100 * ceiling / rate << "% of the GEMM rate\n";
    CHECK(ceiling < rate);
    for (const int64_t n : {4096, 16384}) {
      const auto q = torch::randn({n, d}).to(dtype), k = torch::randn({n, d}).to(dtype) * 0.1;
      const auto v = torch::randn({n, d}).to(dtype);
      auto out = torch::zeros({n, d}, q.options());
      const double ms = best_of(n > 8192 ? 1 : 3, [&] {
        at::parallel_for(0, n / qb, 1, [&](int64_t b0, int64_t b1) {
          auto s = torch::empty({qb, kb}, q.options());
          for (int64_t b = b0; b < b1; ++b) {
            auto o = out.narrow(0, b * qb, qb);
            o.zero_();
            for (int64_t c = 0; c < n; c += kb) {
              at::mm_out(s, q.narrow(0, b * qb, qb), k.narrow(0, c, kb).t());
              s.exp_();
              o.addmm_(s, v.narrow(0, c, kb));
            }
          }
        });
        return out;
      });
      const double gflop = 4.0 * static_cast<double>(n) * static_cast<double>(n) * d / 1e9;
      std::cout << name << "   composed from LibTorch calls, one head of " << n << " tokens: " << ms << " ms, "
                << gflop / ms * 1e3 << " GFLOP/s = " << 100 * gflop / ms * 1e3 / rate << "% of the GEMM rate\n";
      CHECK(torch::isfinite(out).all().item<bool>());
    }
  }
}
