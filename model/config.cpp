#include "config.h"

#include <corridorkey/check.h>

#include "json_reader.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <type_traits>
#include <cmath>
#include <string>
#include <numeric>
#include <utility>

namespace corridorkey::model {
namespace {
/// A real as text in every locale (std::to_string and %g follow the host's LC_NUMERIC):
/// shortest round-trip form, or %.{precision}g.
std::string real_text(double v, int precision = 0) {
  char b[64];
  const auto r = precision > 0 ? std::to_chars(b, b + sizeof b, v, std::chars_format::general, precision)
                               : std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}
}  // namespace

GreenFormerConfig GreenFormerConfig::hiera_base_plus(int64_t img_size) {
  GreenFormerConfig c;
  c.arch = "hiera_base_plus";
  c.img_size = img_size;
  return c;
}

GreenFormerConfig GreenFormerConfig::tiny(int64_t img_size) {
  // Same code path as the real network; only widths and depths shrink, so a CPU forward
  // at S=128 takes milliseconds. Two heads are kept out: head_dim 16 / 32 / 64 / 128.
  GreenFormerConfig c;
  c.arch = "tiny";
  c.img_size = img_size;
  c.encoder.embed_dim = 16;
  c.encoder.num_heads = 1;
  c.encoder.stages = {1, 1, 2, 1};
  c.decoder_dim = 32;
  c.refiner_channels = 16;
  return c;
}

GreenFormerConfig GreenFormerConfig::small(int64_t img_size) {
  // The bundled model (checkpoints/README.md): tiny with twice the widths and more blocks.
  GreenFormerConfig c = tiny(img_size);
  c.arch = "small";
  c.encoder.embed_dim = 32;
  c.encoder.stages = {1, 2, 4, 1};
  c.decoder_dim = 64;
  return c;
}

GreenFormerConfig GreenFormerConfig::by_name(const std::string& arch, int64_t img_size) {
  if (arch == "hiera_base_plus") return hiera_base_plus(img_size);
  if (arch == "tiny") return tiny(img_size);
  if (arch == "small") return small(img_size);
  throw ConfigError("unknown arch '" + arch + "': expected hiera_base_plus, small or tiny");
}

int64_t GreenFormerConfig::size_step() const {
  const auto& e = encoder;
  // The grid is cut into mask units, and unrolled by q_stride once per stage transition.
  int64_t unroll = 1;
  for (size_t i = 0; i + 1 < e.stages.size(); ++i) unroll *= e.q_stride[0];
  return e.patch_stride[0] * std::lcm(e.mask_unit_size[0], unroll);
}

void GreenFormerConfig::resolve_backbone(int64_t pixels, int percent, std::string* note) {
  CK_CHECK(pixels >= 0 && percent >= 0 && percent <= 100, ConfigError, "backbone_size ",
           percent > 0 ? std::to_string(percent) + "%" : std::to_string(pixels),
           " is negative or over 100% (0 = img_size)");
  const int64_t want = percent > 0 ? img_size * percent / 100 : pixels;
  if (want == 0 || want == img_size) {
    backbone_size = 0;
    return;
  }
  CK_CHECK(want < img_size, ConfigError, "backbone_size ", want, " is larger than img_size ",
           img_size, ": the backbone runs at img_size or below (0 = img_size)");
  const int64_t step = size_step();
  const int64_t b = want / step * step;
  CK_CHECK(b >= step, ConfigError, "backbone_size ", want, " is below the smallest backbone size ",
           step, " (a multiple of ", step, ": patch stride x mask unit)");
  if (b != want && note)
    *note = "backbone_size " + std::to_string(want) + (percent > 0 ? " (" + std::to_string(percent) +
            "% of img_size " + std::to_string(img_size) + ")" : std::string()) +
            " rounded down to " + std::to_string(b) + ", the nearest multiple of " +
            std::to_string(step) + " (patch stride x mask unit)";
  backbone_size = b;
}

void GreenFormerConfig::validate() const {
  CK_CHECK(img_size > 0 && img_size % 32 == 0, ConfigError, "img_size ", img_size,
           " is not a positive multiple of 32 (patch stride 4 x mask unit 8)");
  const auto& e = encoder;
  CK_CHECK(!e.stages.empty() && e.mask_unit_attn.size() == e.stages.size(), ConfigError,
           "encoder.stages (", e.stages.size(), ") and mask_unit_attn (", e.mask_unit_attn.size(),
           ") must have the same non-zero length");
  CK_CHECK(e.q_pool < static_cast<int64_t>(e.stages.size()), ConfigError, "q_pool ", e.q_pool,
           " must be smaller than the number of stages ", e.stages.size());
  const int64_t step = size_step();
  for (const auto& [name, size] : {std::pair<const char*, int64_t>{"img_size", img_size},
                                   {"backbone_size", encoder_size()}}) {
    const int64_t grid = size / e.patch_stride[0];
    const int64_t need = step / e.patch_stride[0];
    CK_CHECK(size > 0 && size % e.patch_stride[0] == 0 && grid % need == 0, ConfigError, name, " ",
             size, " gives a ", grid, "x", grid, " token grid, not divisible by ", need,
             " (mask unit / unroll stride)");
  }
  CK_CHECK(backbone_size >= 0 && backbone_size <= img_size, ConfigError, "backbone_size ",
           backbone_size, " must be 0 (= img_size) or at most img_size ", img_size);
  CK_CHECK(refiner_channels % refiner_groups == 0, ConfigError, "refiner_channels ",
           refiner_channels, " not divisible by refiner_groups ", refiner_groups);
}

void GreenFormerConfig::validate_architecture(const std::string& source) const {
  const auto& e = encoder;
  auto check = [&](bool ok, const std::string& field, const std::string& value,
                   const std::string& expected) {
    CK_CHECK(ok, ModelError, source, ": architecture field '", field, "' = ", value,
             " is not allowed (expected ", expected, ")");
  };
  auto str = [](auto v) { return std::to_string(v); };
  auto list = [](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  check(e.in_chans == 4, "in_chans", str(e.in_chans), "4: RGB plus the alpha hint");
  check(e.embed_dim >= 1 && e.embed_dim <= 4096, "embed_dim", str(e.embed_dim), "1..4096");
  check(e.num_heads >= 1 && e.num_heads <= 256, "num_heads", str(e.num_heads), "1..256");
  check(e.embed_dim % e.num_heads == 0, "num_heads", str(e.num_heads),
        "a divisor of embed_dim " + std::to_string(e.embed_dim));
  check(!e.stages.empty() && e.stages.size() <= 8, "stages", list(e.stages), "1..8 stages");
  int64_t depth = 0;
  for (auto s : e.stages) {
    check(s >= 1 && s <= 64, "stages", list(e.stages), "1..64 blocks per stage");
    depth += s;
  }
  check(depth <= 128, "stages", list(e.stages), "at most 128 blocks in all");
  check(e.mask_unit_attn.size() == e.stages.size(), "mask_unit_attn",
        str(e.mask_unit_attn.size()) + " entries", "one per stage");
  check(e.q_pool >= 0 && e.q_pool < static_cast<int64_t>(e.stages.size()), "q_pool", str(e.q_pool),
        "0..number of stages - 1");
  check(e.q_stride[0] == e.q_stride[1] && e.q_stride[0] >= 1 &&
            e.q_stride[0] <= 4,
        "q_stride", list(e.q_stride), "[s, s] with s in 1..4");
  check(e.mask_unit_size[0] == e.mask_unit_size[1] &&
            e.mask_unit_size[0] >= 1 && e.mask_unit_size[0] <= 64,
        "mask_unit_size", list(e.mask_unit_size), "[m, m] with m in 1..64");
  check(e.patch_stride[0] == e.patch_stride[1] &&
            e.patch_stride[0] >= 1 && e.patch_stride[0] <= 16,
        "patch_stride", list(e.patch_stride), "[p, p] with p in 1..16");
  check(e.patch_kernel[0] >= 1 && e.patch_kernel[0] <= 31 &&
            e.patch_kernel[1] >= 1 && e.patch_kernel[1] <= 31,
        "patch_kernel", list(e.patch_kernel), "two sizes in 1..31");
  check(e.patch_padding[0] >= 0 && e.patch_padding[0] <= 15 &&
            e.patch_padding[1] >= 0 && e.patch_padding[1] <= 15,
        "patch_padding", list(e.patch_padding), "two values in 0..15");
  auto finite_in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  check(finite_in(e.dim_mul, 1, 4), "dim_mul", real_text(e.dim_mul), "1..4");
  check(finite_in(e.head_mul, 1, 4), "head_mul", real_text(e.head_mul), "1..4");
  check(finite_in(e.mlp_ratio, 0.25, 16), "mlp_ratio", real_text(e.mlp_ratio), "0.25..16");
  // Every block's width must split into its heads (head_dim an integer >= 1), and stay sane.
  int64_t dim = e.embed_dim, heads = e.num_heads;
  for (size_t i = 1; i < e.stages.size(); ++i) {
    dim = static_cast<int64_t>(static_cast<double>(dim) * e.dim_mul);
    heads = static_cast<int64_t>(static_cast<double>(heads) * e.head_mul);
    check(dim <= 16384 && heads >= 1 && dim % heads == 0, "dim_mul / head_mul",
          real_text(e.dim_mul) + " / " + real_text(e.head_mul),
          "stage widths divisible by their head counts (stage " + std::to_string(i + 1) + ": " +
              std::to_string(dim) + " channels, " + std::to_string(heads) + " heads)");
  }
  check(decoder_dim >= 1 && decoder_dim <= 4096, "decoder_dim", str(decoder_dim), "1..4096");
  check(refiner_groups >= 1 && refiner_groups <= 1024, "refiner_groups", str(refiner_groups), "1..1024");
  check(refiner_channels >= 1 && refiner_channels <= 1024 && refiner_channels % refiner_groups == 0,
        "refiner_channels", str(refiner_channels),
        "1..1024 and divisible by refiner_groups " + std::to_string(refiner_groups));
  check(img_size >= 32 && img_size <= 16384 && img_size % 32 == 0, "img_size", str(img_size),
        "the training size: a multiple of 32 in 32..16384");
}

std::string GreenFormerConfig::to_json() const {
  const auto& e = encoder;
  auto ints = [](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  auto bools = [](const std::vector<bool>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += std::string(i ? ", " : "") + (v[i] ? "true" : "false");
    return s + "]";
  };
  auto num = [](double v) { return real_text(v, 17); };  // %.17g: round-trips exactly
  std::string j = "{";
  auto put = [&](const char* k, const std::string& v) {
    j += std::string(j.size() > 1 ? ", " : "") + "\"" + k + "\": " + v;
  };
  put("format_version", "1");
  put("arch", json::quote(arch));
  put("img_size", std::to_string(img_size));
  put("embed_dim", std::to_string(e.embed_dim));
  put("num_heads", std::to_string(e.num_heads));
  put("stages", ints(e.stages));
  put("q_pool", std::to_string(e.q_pool));
  put("q_stride", ints(e.q_stride));
  put("mask_unit_size", ints(e.mask_unit_size));
  put("mask_unit_attn", bools(e.mask_unit_attn));
  put("dim_mul", num(e.dim_mul));
  put("head_mul", num(e.head_mul));
  put("patch_kernel", ints(e.patch_kernel));
  put("patch_stride", ints(e.patch_stride));
  put("patch_padding", ints(e.patch_padding));
  put("mlp_ratio", num(e.mlp_ratio));
  put("in_chans", std::to_string(e.in_chans));
  put("decoder_dim", std::to_string(decoder_dim));
  put("refiner_channels", std::to_string(refiner_channels));
  put("refiner_groups", std::to_string(refiner_groups));
  return j + "}";
}

GreenFormerConfig GreenFormerConfig::from_json(const std::string& text,
                                               const std::string& source) {
  const auto j = json::parse(text, source);
  CK_CHECK(j.kind == json::Value::Kind::Object, ModelError, source,
           ": config.json must be a JSON object, got ", j.text());
  GreenFormerConfig c;
  auto& e = c.encoder;
  using K = json::Value::Kind;
  auto bad = [&](const char* key, const json::Value& v, const char* expected) {
    throw ModelError(source + ": config.json key '" + key + "' must be " + expected + ", got " +
                     v.text());
  };
  // Typed readers: a float where an integer belongs (8e109 for img_size) is an error, not
  // an out-of-range conversion (undefined behaviour; found by tests/fuzz).
  auto int_of = [&](const char* key, const json::Value& v) -> int64_t {
    if (v.kind != K::Int) bad(key, v, "an integer");
    return v.i;
  };
  auto get = [&](const char* key, auto& out) {
    const auto* v = j.find(key);
    if (!v) return;
    using T = std::decay_t<decltype(out)>;
    if constexpr (std::is_same_v<T, std::string>) {
      if (v->kind != K::String) bad(key, *v, "a string");
      out = v->s;
    } else if constexpr (std::is_same_v<T, double>) {
      if (v->kind != K::Int && v->kind != K::Float) bad(key, *v, "a number");
      out = v->kind == K::Int ? static_cast<double>(v->i) : v->f;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      out = int_of(key, *v);
    } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
      if (v->kind != K::Array || v->items.size() > 64) bad(key, *v, "a list of at most 64 booleans");
      out.clear();
      for (const auto& x : v->items) {
        if (x.kind != K::Bool) bad(key, *v, "a list of booleans");
        out.push_back(x.b);
      }
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      if (v->kind != K::Array || v->items.size() > 64) bad(key, *v, "a list of at most 64 integers");
      out.clear();
      for (const auto& x : v->items) out.push_back(int_of(key, x));
    } else {  // std::array<int64_t, 2>
      if (v->kind != K::Array || v->items.size() != out.size()) bad(key, *v, "a list of 2 integers");
      for (size_t i = 0; i < out.size(); ++i) out[i] = int_of(key, v->items[i]);
    }
  };
  get("arch", c.arch);
  get("img_size", c.img_size);
  get("embed_dim", e.embed_dim);
  get("num_heads", e.num_heads);
  get("stages", e.stages);
  get("q_pool", e.q_pool);
  get("q_stride", e.q_stride);
  get("mask_unit_size", e.mask_unit_size);
  get("mask_unit_attn", e.mask_unit_attn);
  get("dim_mul", e.dim_mul);
  get("head_mul", e.head_mul);
  get("patch_kernel", e.patch_kernel);
  get("patch_stride", e.patch_stride);
  get("patch_padding", e.patch_padding);
  get("mlp_ratio", e.mlp_ratio);
  get("in_chans", e.in_chans);
  get("decoder_dim", c.decoder_dim);
  get("refiner_channels", c.refiner_channels);
  get("refiner_groups", c.refiner_groups);
  return c;
}

std::vector<int64_t> stage_ends(const HieraConfig& c) {
  std::vector<int64_t> ends;
  int64_t sum = 0;
  for (auto s : c.stages) ends.push_back((sum += s) - 1);
  return ends;
}

std::vector<BlockSpec> block_specs(const HieraConfig& c) {
  // Mirrors timm Hiera.__init__: the stage (and with it dim, heads, mask-unit attention)
  // changes at the first block of a stage, but use_mask_unit_attn is read BEFORE the stage
  // counter moves, so the flag lags one block (block 5 still uses mask units).
  const auto ends = stage_ends(c);
  const int64_t depth = ends.back() + 1;
  const int64_t flat_q = c.q_stride[0] * c.q_stride[1];
  int64_t flat_mu = c.mask_unit_size[0] * c.mask_unit_size[1];
  auto is_end = [&](int64_t i) { return std::find(ends.begin(), ends.end(), i) != ends.end(); };
  auto is_qpool = [&](int64_t i) {
    for (int64_t k = 0; k < c.q_pool && k < static_cast<int64_t>(ends.size()); ++k)
      if (ends[k] + 1 == i) return true;
    return false;
  };
  std::vector<BlockSpec> specs;
  int64_t dim = c.embed_dim, heads = c.num_heads;
  size_t stage = 0;
  for (int64_t i = 0; i < depth; ++i) {
    BlockSpec b;
    b.dim = dim;
    b.dim_out = dim;
    b.mask_unit_attn = c.mask_unit_attn[stage];
    if (is_end(i - 1)) {
      b.dim_out = static_cast<int64_t>(static_cast<double>(dim) * c.dim_mul);
      heads = static_cast<int64_t>(static_cast<double>(heads) * c.head_mul);
      ++stage;
      if (is_qpool(i)) flat_mu /= flat_q;
    }
    b.heads = heads;
    b.q_stride = is_qpool(i) ? flat_q : 1;
    b.window_size = flat_mu;
    b.mlp_hidden = static_cast<int64_t>(static_cast<double>(b.dim_out) * c.mlp_ratio);
    specs.push_back(b);
    dim = b.dim_out;
  }
  return specs;
}

std::vector<int64_t> feature_channels(const HieraConfig& c) {
  const auto specs = block_specs(c);
  std::vector<int64_t> ch;
  for (auto e : stage_ends(c)) ch.push_back(specs[e].dim_out);
  return ch;
}

}  // namespace corridorkey::model
