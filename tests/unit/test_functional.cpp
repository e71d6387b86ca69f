#include "model/functional.h"
#include "model/hiera.h"
#include "support/support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

namespace F = corridorkey::model::functional;

TEST_CASE("unroll puts tokens in Hiera's order (model.md formula)", "[unit]") {
  const int64_t G = 32, M = G / 8;
  const auto pos = F::unrolled_positions(G, G, 3, 2, 2);
  const auto p = pos.accessor<int64_t, 1>();
  for (int64_t y = 0; y < G; ++y)
    for (int64_t x = 0; x < G; ++x) {
      const int64_t s = (((((y & 1) * 2 + (x & 1)) * 2 + ((y >> 1) & 1)) * 2 + ((x >> 1) & 1)) * 2 +
                         ((y >> 2) & 1)) * 2 + ((x >> 2) & 1);
      const int64_t n = s * M * M + (y >> 3) * M + (x >> 3);
      REQUIRE(p[n] == y * G + x);
    }
}

TEST_CASE("reroll inverts unroll at every feature tap", "[unit]") {
  const int64_t G = 32, C = 5;
  auto spatial = torch::randn({2, G, G, C});
  auto tokens = F::unroll(spatial.view({2, G * G, C}), G, G, 3, 2, 2);
  CHECK(torch::equal(F::reroll(tokens, G, G, 3, 2, 2), spatial));
  // After one q-pool the grid halves and one unroll level is consumed: max-pooling the
  // outermost 2x2 sub-grid of the unrolled tokens is a spatial 2x2 max-pool.
  auto pooled = tokens.view({2, 4, -1, C}).amax(1);
  auto expect = std::get<0>(spatial.view({2, G / 2, 2, G / 2, 2, C}).max(4)).amax(2);
  CHECK(torch::equal(F::reroll(pooled, G / 2, G / 2, 2, 2, 2), expect));
}

TEST_CASE("4-D SDPA layout matches the 5-D layout for global attention", "[unit]") {
  for (int64_t q_stride : {1, 4}) {
    auto qkv = torch::randn({2, 256, 3 * 4 * 8});
    auto a = F::mask_unit_attention(qkv, 4, 1, q_stride, false);
    auto b = F::mask_unit_attention(qkv, 4, 1, q_stride, true);
    REQUIRE(a.sizes() == b.sizes());
    CHECK(a.size(1) == 256 / q_stride);
    CHECK(ck_test::max_abs_diff(a, b) < 1e-5);
  }
}

TEST_CASE("windowed attention only mixes tokens of the same mask unit", "[unit]") {
  // 4 windows of 16 tokens, window index fastest: changing window 1's tokens must leave the
  // outputs of windows 0, 2, 3 untouched.
  const int64_t nw = 4, T = 16, H = 2, d = 8;
  auto qkv = torch::randn({1, nw * T, 3 * H * d});
  auto base = F::mask_unit_attention(qkv, H, nw, 1, false);
  auto qkv2 = qkv.clone();
  for (int64_t t = 0; t < T; ++t) qkv2[0][t * nw + 1] += 1.0;
  auto out = F::mask_unit_attention(qkv2, H, nw, 1, false);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t w = 0; w < nw; ++w) {
      const bool same = torch::equal(out[0][t * nw + w], base[0][t * nw + w]);
      REQUIRE(same == (w != 1));
    }
}

TEST_CASE("token-chunked blocks equal whole-row blocks to float32 rounding", "[unit]") {
  // hiera_base_plus's stage-1 block (112 wide, 2 heads, 64-token mask units) and a global
  // stage-3 block, at small token counts; chunks that divide the rows and chunks that leave
  // a tail, in float32 and bfloat16. Every op is row-wise, so only the GEMMs' reduction
  // order may move: MKL's sgemm picks its kernel by the row count on Intel CPUs (a Xeon
  // 6/207: differences of a few ulp), and not on the Zen 3 measured (bit-identical there).
  namespace M = corridorkey::model;
  M::BlockSpec windowed{112, 112, 2, 1, 64, true, 448};
  M::BlockSpec global{448, 448, 8, 1, 0, false, 1792};
  for (const auto& [spec, tokens] : {std::pair{windowed, int64_t{4096}}, std::pair{global, int64_t{256}}}) {
    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      M::HieraBlock blk(spec);
      blk->chunk_always = true;  // these sizes are below where chunking pays (chunk_pays)
      blk->eval();
      blk->to(dtype);
      torch::NoGradGuard ng;
      auto x = torch::randn({1, tokens, spec.dim}).to(dtype);
      const auto whole = blk->forward(x);
      for (int64_t chunk : {int64_t{512}, int64_t{100}}) {
        blk->token_chunk = chunk;
        const auto chunked = blk->forward(x);
        INFO("tokens " << tokens << " dim " << spec.dim << " chunk " << chunk << " " << dtype);
        const double scale = 1.0 + whole.abs().max().item<double>();
        if (dtype == torch::kFloat) CHECK(ck_test::max_abs_diff(whole, chunked) <= 1e-6 * scale);
        else CHECK(ck_test::max_abs_diff(whole.to(torch::kFloat), chunked.to(torch::kFloat)) <= 0.05);
      }
      blk->token_chunk = 0;
    }
  }
}

TEST_CASE("float32 Linear through oneDNN equals at::linear to float32 rounding", "[unit]") {
  // OnednnLinearScope (functional.h): the encoder's Linear layers through oneDNN's matmul.
  // Another GEMM, so sums in another order: bounded here at the encoder's shapes, relative
  // to the outputs' size. GELU fused into the matmul must be the exact (erf) GELU.
  if (!F::onednn_linear_available()) {
    WARN("SKIPPED: this LibTorch has no oneDNN matmul");
    return;
  }
  torch::manual_seed(3);
  struct Shape {
    int64_t rows, in, out;
  };
  for (const auto s : {Shape{4096, 112, 336}, Shape{1024, 448, 1792}, Shape{256, 1792, 448}, Shape{7, 3, 5}}) {
    INFO(s.rows << "x" << s.in << "x" << s.out);
    torch::nn::Linear m(s.in, s.out);
    m->eval();
    torch::NoGradGuard ng;
    const auto x = torch::randn({2, s.rows, s.in});
    const auto xt = torch::randn({s.in, s.rows}).t();  // a transposed (non-contiguous) input
    const auto want = at::linear(x, m->weight, m->bias);
    const auto want_t = at::linear(xt, m->weight, m->bias);
    const auto want_gelu = at::gelu(want);
    CHECK_FALSE(F::onednn_linear_active(x));
    torch::Tensor got, got_t, got_gelu;
    {
      F::OnednnLinearScope on(true);
      REQUIRE(F::onednn_linear_active(x));
      CHECK_FALSE(F::onednn_linear_active(x.to(torch::kBFloat16)));  // float32 only
      got = F::linear(m, x);
      got_t = F::linear(m, xt);
      got_gelu = F::linear_gelu(m, x);
      F::OnednnLinearScope off(false);  // nests
      CHECK_FALSE(F::onednn_linear_active(x));
    }
    CHECK_FALSE(F::onednn_linear_active(x));
    const double scale = std::max(1.0, ck_test::max_abs(want));
    CHECK(got.sizes() == want.sizes());
    CHECK(ck_test::max_abs_diff(got, want) <= 2e-6 * scale * std::sqrt(static_cast<double>(s.in)));
    CHECK(ck_test::max_abs_diff(got_t, want_t) <= 2e-6 * scale * std::sqrt(static_cast<double>(s.in)));
    CHECK(ck_test::max_abs_diff(got_gelu, want_gelu) <= 2e-6 * scale * std::sqrt(static_cast<double>(s.in)));
    // tanh-approximated GELU differs by ~1e-3 near |x| = 2: the bound above tells them apart.
    if (s.in > 3) CHECK(ck_test::max_abs_diff(at::gelu(want, "tanh"), want_gelu) > 1e-4);
  }
}

TEST_CASE("encoder blocks with their Linear layers through oneDNN, whole and token-chunked",
          "[unit]") {
  // The block's paths that call the Linear layers: whole rows (qkv, proj, MLP with fused
  // GELU) and token chunks (qkv copied into its slice). Against the MKL path: fp32 rounding.
  if (!F::onednn_linear_available()) {
    WARN("SKIPPED: this LibTorch has no oneDNN matmul");
    return;
  }
  namespace M = corridorkey::model;
  torch::manual_seed(5);
  M::BlockSpec global{448, 448, 8, 1, 0, false, 1792};
  M::HieraBlock blk(global);
  blk->chunk_always = true;
  blk->eval();
  const auto x = torch::randn({1, 512, global.dim});
  {
    F::OnednnLinearScope on(true);
    CHECK_FALSE(F::onednn_linear_active(x));  // autograd on: the op has no backward
  }
  torch::NoGradGuard ng;
  const auto mkl = blk->forward(x);
  const double scale = 1.0 + mkl.abs().max().item<double>();
  for (int64_t chunk : {int64_t{0}, int64_t{200}}) {
    blk->token_chunk = chunk;
    const auto calls = F::onednn_linear_calls();
    F::OnednnLinearScope on(true);
    const auto got = blk->forward(x);
    INFO("chunk " << chunk);
    CHECK(F::onednn_linear_calls() > calls);  // the oneDNN path really ran
    CHECK(ck_test::max_abs_diff(mkl, got) <= 1e-5 * scale);
  }
}
