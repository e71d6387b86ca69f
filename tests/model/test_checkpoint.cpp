// Checkpoint loading: every file shape, containers, prefix stripping, pos_embed resize, and
// every error case. The reader itself: test_torch_pickle.cpp.
#include "model/checkpoint.h"
#include "model/sample_input.h"
#include "support/support.h"

#include <corridorkey/errors.h>

#include <catch2/catch.hpp>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/serialize.h>

#include <fstream>
#include <limits>
#include <tuple>

#include <nlohmann/json.hpp>

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

TEST_CASE("every way of saving the same weights loads identical parameters", "[model]") {
  // All written from seed 0 by tests/make_fixtures.py, the way users' tools write them.
  const auto ts = read_checkpoint(ck_test::fixture("tiny128.ts"));
  CHECK(ts.format == CheckpointFormat::TorchScript);
  CHECK(ts.config_from_file);
  auto ref = load_green_former(ck_test::fixture("tiny128.ts"));
  const auto ref_params = ref->named_parameters(true);
  const auto ref_buffers = ref->named_buffers(true);
  CHECK(ref_params.size() > 100);

  const std::vector<std::string> files{
      "tiny128.pth",           // {"state_dict", "optimizer" (AdamW), "epoch", "config"}
      "tiny128_top.pth",       // torch.save(model.state_dict()): OrderedDict with _metadata
      "tiny128_compiled.pth",  // torch.compile(model).state_dict(): _orig_mod. keys
      "tiny128_legacy.pth",    // _use_new_zipfile_serialization=False, training layout
      "tiny128_ema.pth",       // {"model_ema": sd}
      "tiny128_p4.pth",        // pickle protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL, ...)
      "tiny128_p5.pth",        // pickle protocol 5, compiled keys
      "tiny128_flat.pth",      // every float tensor a view into one storage, 2-D transposed
      "tiny128_bf16.pth",      // model.to(torch.bfloat16).state_dict()
      "tiny128_armed.ts"};     // TorchScript with an extra scripted submodule (no tensors)
  for (const auto& file : files) {
    INFO(file);
    const auto ck = read_checkpoint(ck_test::fixture(file));
    if (file.find(".ts") == std::string::npos) {
      CHECK(ck.format == CheckpointFormat::TorchSave);
      CHECK_FALSE(ck.config_from_file);
    }
    CHECK(infer_config(ck).to_json() == ts.config.to_json());  // shapes -> same architecture
    const bool bf16 = file.find("bf16") != std::string::npos;
    CHECK(ck.find("encoder.model.pos_embed")->dtype() == (bf16 ? torch::kBFloat16 : torch::kFloat));

    auto net = load_green_former(ck_test::fixture(file));
    auto params = net->named_parameters(true);
    auto buffers = net->named_buffers(true);
    REQUIRE(params.size() == ref_params.size());
    for (const auto& p : ref_params) {
      INFO(p.key());
      // bf16 weights are the fp32 ones rounded to bf16 (round to nearest even).
      const auto want = bf16 ? p.value().to(torch::kBFloat16).to(torch::kFloat) : p.value();
      REQUIRE(torch::equal(params[p.key()], want));
    }
    for (const auto& b : ref_buffers) {
      if (b.key().find("running") == std::string::npos) continue;
      INFO(b.key());
      const auto want = bf16 ? b.value().to(torch::kBFloat16).to(torch::kFloat) : b.value();
      REQUIRE(torch::equal(*buffers.find(b.key()), want));
    }
  }
}

TEST_CASE("weights come from the container; everything else is reported once", "[model]") {
  const auto train = read_checkpoint(ck_test::fixture("tiny128.pth"));
  CHECK(train.weights_entry == "state_dict");
  CHECK(train.ignored_entries == std::vector<std::string>{"optimizer", "epoch", "config"});
  CHECK(train.ignored_summary() == "ignored: optimizer, epoch, config");
  CHECK(read_checkpoint(ck_test::fixture("tiny128_legacy.pth")).ignored_summary() ==
        "ignored: optimizer, epoch, config");

  const auto ema = read_checkpoint(ck_test::fixture("tiny128_ema.pth"));
  CHECK(ema.weights_entry == "model_ema");
  CHECK(ema.ignored_entries.empty());

  const auto top = read_checkpoint(ck_test::fixture("tiny128_top.pth"));
  CHECK(top.weights_entry.empty());
  CHECK(top.ignored_summary().empty());
  // num_batches_tracked is dropped; everything else is in file order and found by key.
  CHECK(top.find("refiner.stem.1.num_batches_tracked") == nullptr);
  CHECK(top.tensors.front().first == "encoder.model.pos_embed");
  for (size_t i = 0; i < top.tensors.size(); ++i)
    CHECK(top.find(top.tensors[i].first) == &top.tensors[i].second);

  const auto compiled = read_checkpoint(ck_test::fixture("tiny128_compiled.pth"));
  CHECK(compiled.find("_orig_mod.encoder.model.pos_embed") == nullptr);
  CHECK(compiled.find("encoder.model.pos_embed") != nullptr);

  // The flat file's tensors really are views of one storage (read as views, not copies).
  const auto flat = read_checkpoint(ck_test::fixture("tiny128_flat.pth"));
  const auto& a = *flat.find("encoder.model.pos_embed");
  const auto& b = *flat.find("refiner.final.weight");
  const auto& fc = *flat.find("encoder.model.blocks.0.mlp.fc1.weight");
  CHECK(a.storage().is_alias_of(b.storage()));
  CHECK(a.storage().is_alias_of(fc.storage()));
  CHECK(a.storage_offset() == 3);
  CHECK_FALSE(fc.is_contiguous());

  // Preference when a file holds several: state_dict > model_state_dict > model > ema ...
  const auto dir = ck_test::temp_dir("containers");
  c10::Dict<std::string, torch::Tensor> real, zeros;
  for (const auto& [k, t] : top.tensors) {
    real.insert(k, t);
    zeros.insert(k, torch::zeros_like(t));
  }
  c10::impl::GenericDict both(c10::StringType::get(), c10::AnyType::get());
  both.insert("model_ema", zeros);
  both.insert("model", real);
  both.insert("step", 5);
  const auto p = dir / "both.pth";
  write_bytes(p, torch::pickle_save(c10::IValue(both)));
  const auto ck = read_checkpoint(p.string());
  CHECK(ck.weights_entry == "model");
  CHECK(torch::equal(*ck.find("refiner.final.weight"), *top.find("refiner.final.weight")));
  CHECK(ck.ignored_summary() == "ignored: model_ema, step");
  fs::remove_all(dir);
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
  SECTION("a directory without a checkpoint (a folder is resolved: test_safetensors.cpp)") {
    CHECK_THROWS_AS(read_checkpoint(dir.string()), ConfigError);
    CHECK_THROWS_WITH(read_checkpoint(dir.string()), Contains(dir.string()) && Contains("no checkpoint"));
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
  SECTION("two keys that are the same after removing _orig_mod.") {
    const auto p = write_edited_pth(dir, "dup.pth", [](auto& d) {
      d.insert("_orig_mod.refiner.final.bias", torch::zeros({4}));
    });
    CHECK_THROWS_AS(read_checkpoint(p.string()), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(p.string()),
                      Contains("'refiner.final.bias' appears twice") && Contains("_orig_mod."));
  }
  SECTION("a container that is not all tensors names the entry") {
    c10::impl::GenericDict inner(c10::StringType::get(), c10::AnyType::get());
    inner.insert("a.weight", torch::zeros({2}));
    inner.insert("lr", 0.5);
    c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
    root.insert("state_dict", inner);
    const auto p = dir / "mixed.pth";
    write_bytes(p, torch::pickle_save(c10::IValue(root)));
    CHECK_THROWS_WITH(read_checkpoint(p.string()),
                      Contains("'state_dict'") && Contains("entry 'lr' is not a tensor (float)"));
  }
  SECTION("no weights anywhere lists what the file holds") {
    c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
    root.insert("epoch", 3);
    root.insert("weights", std::string("elsewhere"));
    const auto p = dir / "noweights.pth";
    write_bytes(p, torch::pickle_save(c10::IValue(root)));
    CHECK_THROWS_AS(read_checkpoint(p.string()), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(p.string()),
                      Contains("no weights found") && Contains("state_dict, model_state_dict") &&
                          Contains("top-level entries: epoch, weights"));
  }
  SECTION("integer weights are refused, not converted into a constant matte") {
    const auto p = write_edited_pth(dir, "int.pth", [](auto& d) {
      d.insert_or_assign("refiner.final.weight", d.at("refiner.final.weight").to(torch::kLong));
    });
    CHECK_THROWS_AS(load_green_former(p.string()), ModelError);
    CHECK_THROWS_WITH(load_green_former(p.string()),
                      Contains("refiner.final.weight") && Contains("Long") && Contains("floating point"));
  }
  SECTION("NaN or Inf weights are refused, naming the key") {
    const auto p = write_edited_pth(dir, "nan.pth", [](auto& d) {
      auto w = d.at("alpha_decoder.classifier.weight").clone();
      w.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
      d.insert_or_assign("alpha_decoder.classifier.weight", w);
    });
    CHECK_THROWS_AS(load_green_former(p.string()), ModelError);
    CHECK_THROWS_WITH(load_green_former(p.string()),
                      Contains("alpha_decoder.classifier.weight") && Contains("NaN or Inf"));
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

TEST_CASE("architecture fields from a file are bounded: ModelError, never a crash", "[unit]") {
  using corridorkey::ModelError;
  const auto good = GreenFormerConfig::hiera_base_plus(2048).to_json();
  CHECK_NOTHROW(GreenFormerConfig::from_json(good, "ok.ts").validate_architecture("ok.ts"));
  auto with = [&](const std::string& key, const std::string& value) {
    auto j = nlohmann::json::parse(good);
    j[key] = nlohmann::json::parse(value);
    return GreenFormerConfig::from_json(j.dump(), "crafted.ts");
  };
  const std::vector<std::tuple<std::string, std::string, std::string>> bad{
      {"num_heads", "0", "num_heads"},            // was SIGFPE (division by zero)
      {"num_heads", "5", "divisor of embed_dim"},
      {"stages", "[2, 3, 100000, 3]", "1..64"},   // was unbounded memory
      {"stages", "[]", "1..8 stages"},
      {"refiner_channels", "19", "refiner_channels"},  // was exit 2 (usage)
      {"in_chans", "3", "RGB plus the alpha hint"},    // was a failure on every frame
      {"embed_dim", "-112", "embed_dim"},
      {"mlp_ratio", "1e308", "mlp_ratio"},
      {"q_stride", "[2, 3]", "q_stride"},
      {"img_size", "100", "img_size"},
      {"dim_mul", "1.1", "head counts"}};
  for (const auto& [key, value, message] : bad) {
    INFO(key << " = " << value);
    CHECK_THROWS_AS(with(key, value).validate_architecture("crafted.ts"), ModelError);
    CHECK_THROWS_WITH(with(key, value).validate_architecture("crafted.ts"),
                      Contains("crafted.ts") && Contains(key) && Contains(message));
  }
}
