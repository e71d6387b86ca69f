// Architecture configuration of GreenFormer (Hiera encoder + decoder heads + refiner).
// Plain C++: no LibTorch. The real network is hiera_base_plus(); tests use tiny().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace corridorkey::model {

/// timm Hiera constructor arguments (names as in timm.models.hiera.Hiera).
struct HieraConfig {
  int64_t embed_dim = 112;
  int64_t num_heads = 2;
  std::vector<int64_t> stages{2, 3, 16, 3};
  int64_t q_pool = 3;                         // number of stage transitions that pool q
  std::array<int64_t, 2> q_stride{2, 2};
  std::array<int64_t, 2> mask_unit_size{8, 8};
  std::vector<bool> mask_unit_attn{true, true, false, false};
  double dim_mul = 2.0;
  double head_mul = 2.0;
  std::array<int64_t, 2> patch_kernel{7, 7};
  std::array<int64_t, 2> patch_stride{4, 4};
  std::array<int64_t, 2> patch_padding{3, 3};
  double mlp_ratio = 4.0;
  int64_t in_chans = 4;  // CorridorKey: normalised RGB + alpha hint
};

struct GreenFormerConfig {
  std::string arch = "hiera_base_plus";
  HieraConfig encoder;
  int64_t img_size = 2048;        // model resolution S (square), multiple of 32
  /// Size the encoder and decoders run at (0 = img_size). The input is resized to it
  /// (bilinear, align_corners=False, as the reference's GreenFormer(backbone_size=...)),
  /// the coarse logits are upsampled to img_size as always, and the refiner runs at img_size.
  int64_t backbone_size = 0;
  int64_t decoder_dim = 256;      // DecoderHead embedding width
  int64_t refiner_channels = 64;  // CNN refiner width
  int64_t refiner_groups = 8;     // GroupNorm groups in the refiner

  static GreenFormerConfig hiera_base_plus(int64_t img_size = 2048);
  static GreenFormerConfig tiny(int64_t img_size = 128);
  /// The bundled model's config: tiny's topology with wider, deeper stages (tools/greenformer_ref.py).
  static GreenFormerConfig small(int64_t img_size = 384);
  /// Named config ("hiera_base_plus", "small" or "tiny"); throws ConfigError for other names.
  static GreenFormerConfig by_name(const std::string& arch, int64_t img_size);

  /// The size the encoder runs at: backbone_size, or img_size when that is 0.
  int64_t encoder_size() const { return backbone_size > 0 ? backbone_size : img_size; }
  /// Model sizes are multiples of this: patch stride x lcm(mask unit, unroll) = 32 for
  /// every Hiera config here.
  int64_t size_step() const;
  /// Sets backbone_size from a request: `pixels` (0 = img_size), or `percent` of img_size
  /// when percent > 0. A size off the grid is rounded down to a multiple of size_step(), with
  /// `note` saying so; a size above img_size or below one step is a ConfigError. A result
  /// equal to img_size stores 0 (nothing decoupled, the plain forward).
  void resolve_backbone(int64_t pixels, int percent, std::string* note = nullptr);

  /// Throws ConfigError when img_size is not a positive multiple of 32 (patch stride 4 x
  /// mask unit 8), backbone_size is not 0 or such a size <= img_size, or the stage lists
  /// are inconsistent.
  void validate() const;

  /// Bounds on every architecture field, for configs that come from a file (config.json or
  /// shapes inferred from a checkpoint): ModelError naming `source` and the field. Keeps a
  /// crafted file from dividing by zero (num_heads 0), allocating without bound (a huge
  /// depth) or building a network the engine cannot feed (in_chans other than 4).
  void validate_architecture(const std::string& source) const;

  /// JSON round trip (the exporter embeds this as config.json in TorchScript archives).
  std::string to_json() const;
  static GreenFormerConfig from_json(const std::string& json, const std::string& source);
};

/// Per-block schedule derived exactly as timm's Hiera.__init__ does it.
struct BlockSpec {
  int64_t dim = 0, dim_out = 0, heads = 0;
  int64_t q_stride = 1;      // flat q stride (4 at pooling blocks, else 1)
  int64_t window_size = 0;   // flat mask-unit size in tokens at this block
  bool mask_unit_attn = true;
  int64_t mlp_hidden = 0;
};

std::vector<BlockSpec> block_specs(const HieraConfig& c);
/// Indices of the last block of each stage (feature taps): {1, 4, 20, 23} for base_plus.
std::vector<int64_t> stage_ends(const HieraConfig& c);
/// Encoder feature channels per stage: {112, 224, 448, 896} for base_plus.
std::vector<int64_t> feature_channels(const HieraConfig& c);

}  // namespace corridorkey::model
