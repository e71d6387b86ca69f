#include "model/config.h"

#include <corridorkey/errors.h>

#include <catch2/catch.hpp>

using namespace corridorkey::model;
using Catch::Matchers::Contains;

TEST_CASE("hiera_base_plus block schedule matches timm (model.md table)", "[unit]") {
  const auto cfg = GreenFormerConfig::hiera_base_plus(512);
  const auto b = block_specs(cfg.encoder);
  REQUIRE(b.size() == 24);
  REQUIRE(stage_ends(cfg.encoder) == std::vector<int64_t>{1, 4, 20, 23});
  REQUIRE(feature_channels(cfg.encoder) == std::vector<int64_t>{112, 224, 448, 896});
  for (int i = 0; i < 24; ++i) {
    INFO("block " << i);
    const int64_t dim_out = i < 2 ? 112 : i < 5 ? 224 : i < 21 ? 448 : 896;
    const int64_t dim = (i == 2 || i == 5 || i == 21) ? dim_out / 2 : dim_out;
    CHECK(b[i].dim == dim);
    CHECK(b[i].dim_out == dim_out);
    CHECK(b[i].heads * 56 == dim_out);  // head_dim 56 everywhere
    CHECK(b[i].q_stride == ((i == 2 || i == 5 || i == 21) ? 4 : 1));
    CHECK(b[i].mask_unit_attn == (i <= 5));  // the flag lags one block: 5 is still windowed
    if (i <= 5) CHECK(b[i].window_size == (i < 2 ? 64 : i < 5 ? 16 : 4));
    CHECK(b[i].mlp_hidden == 4 * dim_out);
  }
}

TEST_CASE("img_size must be a multiple of 32", "[unit]") {
  CHECK_NOTHROW(GreenFormerConfig::hiera_base_plus(2048).validate());
  CHECK_NOTHROW(GreenFormerConfig::tiny(96).validate());
  CHECK_THROWS_AS(GreenFormerConfig::tiny(100).validate(), corridorkey::ConfigError);
  CHECK_THROWS_WITH(GreenFormerConfig::tiny(100).validate(), Contains("img_size 100"));
  auto coarse = GreenFormerConfig::tiny(96);
  coarse.encoder.patch_stride = {8, 8};  // 12x12 tokens cannot be cut into 8x8 mask units
  CHECK_THROWS_WITH(coarse.validate(), Contains("not divisible by 8"));
  CHECK_THROWS_AS(GreenFormerConfig::by_name("hiera_huge", 512), corridorkey::ConfigError);
}

TEST_CASE("config JSON round trip keeps every field", "[unit]") {
  auto c = GreenFormerConfig::tiny(160);
  c.encoder.mask_unit_attn = {true, false, false, false};
  c.refiner_groups = 4;
  const auto r = GreenFormerConfig::from_json(c.to_json(), "mem");
  CHECK(r.to_json() == c.to_json());
  CHECK(r.img_size == 160);
  CHECK(r.encoder.mask_unit_attn == c.encoder.mask_unit_attn);
  CHECK_THROWS_AS(GreenFormerConfig::from_json("{not json", "x.ts"), corridorkey::ModelError);
  CHECK_THROWS_WITH(GreenFormerConfig::from_json(R"({"embed_dim": "wide"})", "x.ts"),
                    Contains("embed_dim"));
}

TEST_CASE("small (the bundled model's config) matches tools/greenformer_ref.py CONFIGS", "[unit]") {
  const auto c = GreenFormerConfig::by_name("small", 384);
  CHECK(c.arch == "small");
  CHECK(c.img_size == 384);
  CHECK(c.encoder.embed_dim == 32);
  CHECK(c.encoder.num_heads == 1);
  CHECK(c.encoder.stages == std::vector<int64_t>{1, 2, 4, 1});
  CHECK(c.decoder_dim == 64);
  CHECK(c.refiner_channels == 16);
  CHECK(feature_channels(c.encoder) == std::vector<int64_t>{32, 64, 128, 256});
  CHECK_NOTHROW(c.validate());
  // config.json carries every field, so a checkpoint of it builds without by_name
  CHECK(GreenFormerConfig::from_json(c.to_json(), "mem").to_json() == c.to_json());
}
