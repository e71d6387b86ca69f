// Native GreenFormer vs the reference: the TorchScript forward of the same archive (traced
// from tools/greenformer_ref.py on timm) and the eager Python outputs saved as fixtures.
#include "model/checkpoint.h"
#include "model/sample_input.h"
#include "support/support.h"

#include <catch2/catch.hpp>
#include <torch/csrc/jit/serialization/import.h>

using namespace corridorkey::model;

namespace {

std::vector<torch::Tensor> reference_forward(const std::string& ts, const torch::Tensor& x) {
  auto m = torch::jit::load(ts);
  m.eval();
  std::vector<torch::Tensor> out;
  const auto result = m.forward({x});  // keep the tuple alive while reading its elements
  for (const auto& v : result.toTupleRef().elements()) out.push_back(v.toTensor());
  return out;
}

bool is_feature(const std::string& n) { return n.size() == 2 && n[0] == 'c'; }

// Final alpha/fg and coarse outputs: absolute 1e-4. Features and logits: 1e-4 relative to
// the tensor's scale (the bound); every output is reported.
void check_outputs(const GreenFormerOutput& got, const std::vector<torch::Tensor>& want,
                   const std::string& what) {
  const auto& names = GreenFormerOutput::names();
  REQUIRE(want.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const auto t = got.get(names[i]);
    REQUIRE(t.sizes() == want[i].sizes());
    const double d = ck_test::max_abs_diff(t, want[i]);
    const double scale = std::max(1.0, ck_test::max_abs(want[i]));
    const bool relative = is_feature(names[i]) || names[i].find("logits") != std::string::npos;
    UNSCOPED_INFO(what << " " << names[i] << " max|diff| " << d << " (scale " << scale << ")");
    CHECK(d <= (relative ? 1e-4 * scale : 1e-4));
  }
}

void parity(const std::string& ts, const std::string& fixture_file, bool flash) {
  torch::NoGradGuard ng;
  auto net = load_green_former(ts);
  net->set_flash_attention(flash);
  const auto fx = ck_test::load_tensors(fixture_file);
  const auto x = fx.at("input");
  const auto got = net->forward(x);
  check_outputs(got, reference_forward(ts, x), "vs TorchScript");
  std::vector<torch::Tensor> eager;
  for (const auto& n : GreenFormerOutput::names()) eager.push_back(fx.at(n));
  check_outputs(got, eager, "vs eager Python");
  // The seeded input is not degenerate: alpha spans a real range.
  CHECK(got.alpha.max().item<double>() - got.alpha.min().item<double>() > 0.1);
}

}  // namespace

TEST_CASE("tiny GreenFormer matches the reference (5-D and 4-D attention)", "[model]") {
  for (bool flash : {false, true}) {
    INFO("flash_attention " << flash);
    parity(ck_test::fixture("tiny128.ts"), ck_test::fixture("tiny128_fixture.pt"), flash);
  }
}

TEST_CASE("hiera_base_plus GreenFormer at 256 matches the reference", "[model][slow]") {
  for (bool flash : {false, true}) {
    INFO("flash_attention " << flash);
    parity(ck_test::fixture("base_plus256.ts"), ck_test::fixture("base_plus256_fixture.pt"),
           flash);
  }
}

TEST_CASE("hiera_base_plus parameter count", "[model]") {
  // 70,341,560 + 112 * (S/4)^2: the timm encoder with a 4-channel patch embed plus the two
  // decoder heads and the refiner (model.md's 68,646,592 counts the stock encoder only).
  GreenFormer net(GreenFormerConfig::hiera_base_plus(128));
  int64_t n = 0;
  for (const auto& p : net->parameters()) n += p.numel();
  CHECK(n == 70341560 + 112 * 32 * 32);
}

TEST_CASE("forward without intermediates returns the same alpha/fg", "[model]") {
  torch::NoGradGuard ng;
  auto net = load_green_former(ck_test::fixture("tiny128.ts"));
  const auto x = seeded_input(1, 128, 7);
  const auto full = net->forward(x);
  ForwardOptions slim;
  slim.keep_intermediates = false;
  slim.refiner_scale = 1.0;
  std::vector<std::string> stages;
  slim.on_stage = [&](const char* s) { stages.emplace_back(s); };
  const auto out = net->forward(x, slim);
  CHECK(torch::equal(out.alpha, full.alpha));
  CHECK(torch::equal(out.fg, full.fg));
  CHECK_FALSE(out.delta_logits.defined());
  CHECK(out.features.empty());
  CHECK(stages == std::vector<std::string>{"encoder", "decoders", "refiner"});
  // refiner_scale 0 removes the refiner's contribution: alpha = sigmoid(upsampled logits).
  ForwardOptions off;
  off.refiner_scale = 0.0;
  const auto coarse = net->forward(x, off);
  CHECK(ck_test::max_abs_diff(coarse.alpha, full.alpha_coarse) < 1e-6);
}
