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

// Not run by ctest ([.]): `ck_tests "[.kernel-bench]"` times what attention cannot avoid on
// this machine, at the global blocks' head dim 56: the two products (q k^T, then the weights
// times v) plus one exponential per score, as a kernel runs them: both cores on their own
// query blocks, each block of 128 queries x 512 keys of scores kept in L2, the products
// accumulated (no max, no rescale: that is the kernel's own cost on top). Against LibTorch's
// square GEMM of 2048 in the same precision (the rate bench --roofline uses), its GFLOP/s
// (4 n^2 d per head) is the ceiling attention can approach. A precision whose GEMM runs
// slower than float32's on this machine (bf16 without native dot products) is not timed.
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
  auto gemm_rate = [&](torch::ScalarType dtype) {
    const auto a = torch::randn({2048, 2048}).to(dtype), b = torch::randn({2048, 2048}).to(dtype);
    return 2.0 * 2048 * 2048 * 2048 / (best_of(3, [&] { return torch::mm(a, b); }) * 1e6);
  };
  const double f32_rate = gemm_rate(torch::kFloat);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const char* name = dtype == torch::kFloat ? "float32" : "bfloat16";
    const double rate = dtype == torch::kFloat ? f32_rate : gemm_rate(dtype);
    if (rate < f32_rate) {
      std::cout << name << ": GEMM " << rate << " GFLOP/s, slower than float32's " << f32_rate
                << " here: not timed\n";
      continue;
    }
    for (const int64_t n : {4096, 16384}) {
      const int64_t d = 56, qb = 128, kb = 512;
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
      std::cout << name << " one head, " << n << " tokens: " << ms << " ms, " << gflop / ms * 1e3
                << " GFLOP/s = " << 100 * gflop / ms * 1e3 / rate << "% of the GEMM rate (" << rate
                << " GFLOP/s), " << static_cast<double>(n) * static_cast<double>(n) / ms / 1e6
                << " G exp/s\n";
      CHECK(torch::isfinite(out).all().item<bool>());
    }
  }
}
