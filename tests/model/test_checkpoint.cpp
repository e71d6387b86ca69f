// Checkpoint loading: both formats, prefix stripping, pos_embed resize, and every error case.
#include "model/checkpoint.h"
#include "model/sample_input.h"
#include "support/support.h"

#include <corridorkey/errors.h>

#include <catch2/catch.hpp>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/serialize.h>

#include <fstream>

using namespace corridorkey::model;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& p, const std::vector<char>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// Writes a torch.save-compatible dict {key: tensor} built from a checkpoint, edited by f.
template <typename Edit>
fs::path write_edited_pth(const fs::path& dir, const std::string& name, Edit f) {
  auto ck = read_checkpoint(ck_test::fixture("tiny128.pth"));
  c10::Dict<std::string, torch::Tensor> d;
  for (auto& [k, t] : ck.tensors) d.insert(k, t);
  f(d);
  const auto p = dir / name;
  write_bytes(p, torch::pickle_save(c10::IValue(d)));
  return p;
}

}  // namespace

TEST_CASE(".pth and TorchScript of the same weights load identical parameters", "[model]") {
  const auto ts = read_checkpoint(ck_test::fixture("tiny128.ts"));
  const auto pth = read_checkpoint(ck_test::fixture("tiny128.pth"));      // _orig_mod. prefix
  const auto top = read_checkpoint(ck_test::fixture("tiny128_top.pth"));  // no "state_dict"
  CHECK(ts.format == CheckpointFormat::TorchScript);
  CHECK(pth.format == CheckpointFormat::TorchSave);
  CHECK(ts.config_from_file);
  CHECK_FALSE(pth.config_from_file);
  CHECK(infer_config(pth).to_json() == ts.config.to_json());  // shapes -> same architecture

  auto a = load_green_former(ck_test::fixture("tiny128.ts"));
  auto b = load_green_former(ck_test::fixture("tiny128.pth"));
  auto c = load_green_former(ck_test::fixture("tiny128_top.pth"));
  auto pb = b->named_parameters(true), pc = c->named_parameters(true);
  int64_t compared = 0;
  for (const auto& p : a->named_parameters(true)) {
    INFO(p.key());
    REQUIRE(torch::equal(p.value(), pb[p.key()]));
    REQUIRE(torch::equal(p.value(), pc[p.key()]));
    ++compared;
  }
  for (const auto& buf : a->named_buffers(true))
    if (buf.key().find("running") != std::string::npos)
      REQUIRE(torch::equal(buf.value(), *b->named_buffers(true).find(buf.key())));
  CHECK(compared == static_cast<int64_t>(a->parameters().size()));
  CHECK(compared > 100);
}

TEST_CASE("pos_embed resize matches PyTorch bicubic (align_corners=False)", "[model]") {
  const auto fx = ck_test::load_tensors(ck_test::fixture("pos_embed_64_to_40.pt"));
  const auto got = resize_pos_embed(fx.at("src"), 40);
  REQUIRE(got.sizes() == fx.at("dst").sizes());
  CHECK(ck_test::max_abs_diff(got, fx.at("dst")) <= 1e-6);
  CHECK(torch::equal(resize_pos_embed(fx.at("src"), 64), fx.at("src")));  // same grid: no-op
}

TEST_CASE("a 256 checkpoint used at 128 matches the reference's resized model", "[model]") {
  torch::NoGradGuard ng;
  auto net = load_green_former(ck_test::fixture("tiny256.pth"), 128);
  REQUIRE(net->config().img_size == 128);
  auto ref = torch::jit::load(ck_test::fixture("tiny256_at128.ts"));
  ref.eval();
  // Weights equal the Python-side resize exactly (pos_embed within float rounding).
  for (const auto& p : ref.named_parameters(true)) {
    INFO(p.name);
    CHECK(ck_test::max_abs_diff(net->named_parameters(true)[p.name], p.value) <= 1e-6);
  }
  const auto x = seeded_input(1, 128, 1);
  const auto result = ref.forward({x});
  std::vector<torch::Tensor> want;
  for (const auto& v : result.toTupleRef().elements()) want.push_back(v.toTensor());
  REQUIRE(want.size() == 13);
  const auto got = net->forward(x);
  CHECK(ck_test::max_abs_diff(got.alpha, want[11]) <= 1e-4);
  CHECK(ck_test::max_abs_diff(got.fg, want[12]) <= 1e-4);
}

TEST_CASE("bad checkpoints raise typed errors naming the file and problem", "[model]") {
  const auto dir = ck_test::temp_dir("badckpt");
  using corridorkey::ConfigError;
  using corridorkey::IoError;
  using corridorkey::ModelError;

  SECTION("missing file") {
    const auto p = (dir / "nope.pth").string();
    CHECK_THROWS_AS(read_checkpoint(p), IoError);
    CHECK_THROWS_WITH(read_checkpoint(p), Contains(p) && Contains("does not exist"));
  }
  SECTION("a directory") {
    CHECK_THROWS_AS(read_checkpoint(dir.string()), IoError);
  }
  SECTION("not a checkpoint") {
    const auto p = dir / "notes.pth";
    std::ofstream(p) << "this is a text file, not weights\n";
    CHECK_THROWS_AS(read_checkpoint(p.string()), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(p.string()), Contains(p.string()) && Contains("not a checkpoint"));
  }
  SECTION("empty file") {
    const auto p = dir / "empty.pth";
    std::ofstream{p};
    CHECK_THROWS_WITH(read_checkpoint(p.string()), Contains("empty"));
  }
  SECTION("truncated TorchScript and .pth") {
    for (const char* name : {"tiny128.ts", "tiny128.pth"}) {
      auto bytes = read_bytes(ck_test::fixture(name));
      bytes.resize(bytes.size() / 2);
      const auto p = dir / (std::string("cut_") + name);
      write_bytes(p, bytes);
      INFO(name);
      CHECK_THROWS_AS(read_checkpoint(p.string()), ModelError);
      CHECK_THROWS_WITH(read_checkpoint(p.string()), Contains(p.string()) && Contains("truncated"));
    }
  }
  SECTION("wrong architecture: shape mismatch names the key") {
    auto ck = read_checkpoint(ck_test::fixture("tiny128.pth"));
    auto cfg = ck.config;
    cfg.decoder_dim = 48;
    GreenFormer net(cfg);
    CHECK_THROWS_AS(load_weights(*net, ck), ModelError);
    CHECK_THROWS_WITH(load_weights(*net, ck),
                      Contains("shape mismatch") && Contains("alpha_decoder.linear_c") &&
                          Contains("tiny128.pth"));
  }
  SECTION("wrong architecture: tiny weights into hiera_base_plus") {
    auto ck = read_checkpoint(ck_test::fixture("tiny128.pth"));
    GreenFormer net(GreenFormerConfig::hiera_base_plus(128));
    CHECK_THROWS_AS(load_weights(*net, ck), ModelError);
  }
  SECTION("unexpected key") {
    const auto p = write_edited_pth(dir, "extra.pth", [](auto& d) {
      d.insert("refiner.extra.weight", torch::zeros({3}));
    });
    CHECK_THROWS_AS(load_green_former(p.string()), ModelError);
    CHECK_THROWS_WITH(load_green_former(p.string()),
                      Contains("unexpected key 'refiner.extra.weight'"));
  }
  SECTION("missing key") {
    const auto p = write_edited_pth(dir, "missing.pth", [](auto& d) {
      (void)d.erase("refiner.final.bias");
    });
    CHECK_THROWS_WITH(load_green_former(p.string()), Contains("missing key 'refiner.final.bias'"));
  }
  SECTION("not a dict of tensors") {
    const auto p = dir / "tensor.pth";
    write_bytes(p, torch::pickle_save(c10::IValue(torch::zeros({2}))));
    CHECK_THROWS_AS(read_checkpoint(p.string()), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(p.string()), Contains("dict"));
  }
  SECTION("img_size not a multiple of 32") {
    const auto p = ck_test::fixture("tiny128.ts");
    CHECK_THROWS_AS(load_green_former(p, 100), ConfigError);
    CHECK_THROWS_WITH(load_green_former(p, 100), Contains(p) && Contains("img_size 100"));
  }
  fs::remove_all(dir);
}
