#include "checkpoint.h"

#include <corridorkey/check.h>

#include "json_reader.h"
#include "safetensors.h"
#include "torch_archive.h"

#include <torch/nn/functional/upsampling.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <locale>
#include <sstream>
#include <type_traits>

namespace corridorkey::model {

namespace {

const std::string kCompilePrefix = "_orig_mod.";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string strip_prefix(std::string key) {
  // torch.compile wraps modules as _orig_mod; the prefix can appear at the front or after
  // a parent name ("encoder._orig_mod.model..."), so remove every occurrence.
  for (size_t p; (p = key.find(kCompilePrefix)) != std::string::npos;)
    key.erase(p, kCompilePrefix.size());
  return key;
}

std::string describe_key(const pickle::Value& k) {
  if (k.kind == pickle::Kind::Str) return k.s;
  if (k.kind == pickle::Kind::Int) return std::to_string(k.i);
  // Appended, not "<" + string: GCC 12 reports a false -Wstringop-overflow for a literal
  // prepended to a temporary string (its insert at 0), here and in safetensors.cpp.
  std::string out = "<";
  return out.append(k.type_name()).append(" key>");
}

void read_torchscript(Checkpoint& ck, const TorchArchive& ar) {
  for (const auto& [name, t] : module_tensors(ar.data.root(), ck.path)) ck.add(name, t);
  if (!ar.config_json.empty()) {
    ck.config = GreenFormerConfig::from_json(ar.config_json, ck.path);
    ck.config_from_file = true;
  }
}

void read_torch_save(Checkpoint& ck, const TorchArchive& ar) {
  const auto& root = ar.data.root();
  CK_CHECK(root.kind == pickle::Kind::Dict, ModelError, ck.path,
           ": expected a dict of tensors (a state_dict or a checkpoint dict), found ",
           root.type_name());
  const pickle::Value* weights = nullptr;
  for (const auto& name : kWeightContainers) {
    const auto* v = root.get(name);
    if (v && v->kind == pickle::Kind::Dict) {
      weights = v;
      ck.weights_entry = name;
      break;
    }
  }
  if (weights) {
    // A training checkpoint: the container must be weights only; the rest is reported.
    for (const auto& [name, t] : tensor_entries(*weights, ck.path + ": '" + ck.weights_entry + "'"))
      ck.add(name, t);
    for (const auto& [k, v] : root.entries)
      if (!(k->kind == pickle::Kind::Str && k->s == ck.weights_entry))
        ck.ignored_entries.push_back(describe_key(*k));
    return;
  }
  // The top level is the state_dict; non-tensor entries (a stray epoch) are reported.
  for (const auto& [k, v] : root.entries) {
    if (k->kind == pickle::Kind::Str && v->kind == pickle::Kind::Tensor) ck.add(k->s, v->tensor);
    else ck.ignored_entries.push_back(describe_key(*k));
  }
  if (ck.tensors.empty()) {
    std::string keys;
    for (const auto& e : ck.ignored_entries) keys += (keys.empty() ? "" : ", ") + e;
    std::string containers;
    for (const auto& c : kWeightContainers) containers += (containers.empty() ? "" : ", ") + c;
    throw ModelError(ck.path + ": no weights found: expected a dict of tensors at the top level "
                     "or under one of " + containers + " (top-level entries: " +
                     (keys.empty() ? "none" : keys) + ")");
  }
}

int64_t count_blocks(const Checkpoint& ck) {
  static const std::regex re(R"(^encoder\.model\.blocks\.(\d+)\.)");
  int64_t n = 0;
  std::smatch m;
  for (const auto& [k, t] : ck.tensors)
    if (std::regex_search(k, m, re)) n = std::max<int64_t>(n, std::stoll(m[1]) + 1);
  return n;
}

/// True when no element is NaN or infinite: the exponent field of each element's bits is
/// not all ones (float8 e4m3fn has no infinity; its NaN is S.1111.111).
bool all_finite(const torch::Tensor& t0) {
  const auto t = t0.contiguous();
  const auto n = static_cast<size_t>(t.numel());
  auto none = [&](auto word, auto mask, auto bad) {
    using W = decltype(word);
    const W* p = static_cast<const W*>(t.data_ptr());
    W hit = 0;
    for (size_t i = 0; i < n; ++i) hit |= static_cast<W>((p[i] & mask) == bad);
    return hit == 0;
  };
  switch (t.scalar_type()) {
    case torch::kFloat: return none(uint32_t{}, uint32_t{0x7f800000}, uint32_t{0x7f800000});
    case torch::kDouble:
      return none(uint64_t{}, uint64_t{0x7ff0000000000000}, uint64_t{0x7ff0000000000000});
    case torch::kHalf: return none(uint16_t{}, uint16_t{0x7c00}, uint16_t{0x7c00});
    case torch::kBFloat16: return none(uint16_t{}, uint16_t{0x7f80}, uint16_t{0x7f80});
    case torch::kFloat8_e5m2: return none(uint8_t{}, uint8_t{0x7c}, uint8_t{0x7c});
    case torch::kFloat8_e4m3fn: return none(uint8_t{}, uint8_t{0x7f}, uint8_t{0x7f});
    default: return torch::isfinite(t.to(torch::kFloat)).all().item<bool>();
  }
}

const torch::Tensor& need(const Checkpoint& ck, const std::string& key) {
  const auto* t = ck.find(key);
  CK_CHECK(t, ModelError, ck.path, ": missing key '", key, "' (not a GreenFormer checkpoint?)");
  return *t;
}

}  // namespace

const torch::Tensor* Checkpoint::find(const std::string& key) const {
  auto it = index.find(key);
  return it == index.end() ? nullptr : &tensors[it->second].second;
}

void Checkpoint::add(const std::string& raw_key, const torch::Tensor& t) {
  const auto key = strip_prefix(raw_key);
  if (ends_with(key, "num_batches_tracked")) return;  // training counter, unused at inference
  const bool added = index.emplace(key, tensors.size()).second;
  CK_CHECK(added, ModelError, path, ": key '", json::printable(key), "' appears twice",
           key == raw_key ? "" : " (after removing the _orig_mod. prefix)");
  tensors.emplace_back(key, t);
}

std::string Checkpoint::ignored_summary() const {
  std::string s;
  for (const auto& e : ignored_entries) s += (s.empty() ? "ignored: " : ", ") + e;
  return s;
}

const char* to_string(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::TorchScript: return "torchscript";
    case CheckpointFormat::TorchSave: return "torch.save";
    case CheckpointFormat::Safetensors: return "safetensors";
  }
  return "?";
}

std::string resolve_checkpoint_path(const std::string& path, std::string* note) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  static const char* const kPreference[] = {".safetensors", ".pth", ".ts"};
  std::map<std::string, std::vector<std::string>> by_ext;
  fs::directory_iterator it(path, ec), end;
  CK_CHECK(!ec, IoError, path, ": cannot list the checkpoint folder: ", ec.message());
  for (; it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    std::error_code e2;
    if (name.empty() || name[0] == '.' || !fs::is_regular_file(it->path(), e2)) continue;
    auto ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    by_ext[ext].push_back(name);
  }
  CK_CHECK(!ec, IoError, path, ": cannot list the checkpoint folder: ", ec.message());
  for (const char* ext : kPreference) {
    auto names = by_ext[ext];
    if (names.empty()) continue;
    std::sort(names.begin(), names.end());
    if (names.size() > 1) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ConfigError(path + ": " + std::to_string(names.size()) + " " + ext +
                        " checkpoints in this folder (" + list +
                        "): name the file to use, e.g. " + (fs::path(path) / names[0]).string());
    }
    const auto chosen = (fs::path(path) / names[0]).string();
    if (note)
      *note = "checkpoint " + chosen + " (chosen in the folder: .safetensors before .pth before .ts)";
    return chosen;
  }
  throw ConfigError(path + ": no checkpoint in this folder (looked for *.safetensors, *.pth "
                    "and *.ts)");
}

/// The architecture of a safetensors checkpoint whose tensors have been added: from the
/// metadata (checked against the shapes) or inferred, then bounded.
static void safetensors_config(Checkpoint& ck, const std::string* metadata_config) {
  CK_CHECK(!ck.tensors.empty(), ModelError, ck.path, ": checkpoint holds no tensors");
  if (metadata_config) {
    ck.config = GreenFormerConfig::from_json(*metadata_config,
                                             ck.path + ": __metadata__ " + kConfigMetadataKey);
    ck.config_from_file = true;
    const auto diff = config_shape_mismatch(ck.config, ck);
    CK_CHECK(diff.empty(), ModelError, ck.path, ": __metadata__ ", kConfigMetadataKey,
             " disagrees with the tensor shapes: ", diff);
  } else {
    ck.config = infer_config(ck);
  }
  ck.config.validate_architecture(ck.path);
}

Checkpoint read_checkpoint(const std::string& path_in, const ReadOptions& opt) {
  Checkpoint ck;
  const std::string path = resolve_checkpoint_path(path_in, &ck.chosen_note);
  ck.path = path;
  {  // Named before anything opens it: a FIFO would block open(), a link loop is not "missing".
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto st = fs::status(path, ec);
    CK_CHECK(!ec || ec == std::errc::no_such_file_or_directory, IoError, path,
             ": cannot reach the checkpoint file: ", ec.message());
    // A FIFO, a device or a socket is a usage error (exit 2), named before open() could block.
    const auto t = st.type();
    CK_CHECK(t == fs::file_type::regular || t == fs::file_type::not_found, ConfigError, path,
             ": checkpoint is not a regular file (",
             t == fs::file_type::fifo ? "a FIFO" : t == fs::file_type::socket ? "a socket"
             : t == fs::file_type::block || t == fs::file_type::character ? "a device" : "not a file",
             ")");
  }
  if (safetensors::is_safetensors_file(path, /*truncated=*/true)) {
    ck.format = CheckpointFormat::Safetensors;
    try {
      auto f = safetensors::read_file(path, opt.mmap ? safetensors::Access::Map
                                                     : safetensors::Access::Read);
      for (auto& [name, t] : f.tensors) ck.add(name, t);
      safetensors_config(ck, f.header.find_metadata(kConfigMetadataKey));
    } catch (const c10::Error& e) {
      throw ModelError(path + ": cannot read checkpoint: " + e.what_without_backtrace());
    }
    return ck;
  }
  const auto ar = read_torch_archive(path);  // IoError / ModelError naming the file
  try {
    if (ar.format == ArchiveFormat::TorchScript) {
      ck.format = CheckpointFormat::TorchScript;
      read_torchscript(ck, ar);
    } else {
      ck.format = CheckpointFormat::TorchSave;
      read_torch_save(ck, ar);
    }
  } catch (const c10::Error& e) {
    throw ModelError(path + ": cannot read checkpoint: " + e.what_without_backtrace());
  }
  CK_CHECK(!ck.tensors.empty(), ModelError, path, ": checkpoint holds no tensors");
  if (!ck.config_from_file) ck.config = infer_config(ck);
  // What a file says about the network is bounded before anything is built from it.
  ck.config.validate_architecture(path);
  return ck;
}

GreenFormerConfig infer_config(const Checkpoint& ck, int64_t num_heads) {
  GreenFormerConfig c;
  auto& e = c.encoder;
  const auto& pe = need(ck, "encoder.model.patch_embed.proj.weight");  // [C, in, k, k]
  CK_CHECK(pe.dim() == 4, ModelError, ck.path, ": patch_embed.proj.weight must be 4-D, is ",
           pe.sizes());
  e.embed_dim = pe.size(0);
  e.in_chans = pe.size(1);
  e.patch_kernel = {pe.size(2), pe.size(3)};
  e.patch_padding = {pe.size(2) / 2, pe.size(3) / 2};
  // Hiera family widths -> heads (head_dim is not visible in any shape).
  // 16 and 32 are this project's tiny and small configs (model/config.cpp).
  static const std::map<int64_t, int64_t> heads_by_width{
      {16, 1}, {32, 1}, {96, 1}, {112, 2}, {144, 2}, {256, 4}};
  auto h = heads_by_width.find(e.embed_dim);
  CK_CHECK(num_heads > 0 || h != heads_by_width.end(), ModelError, ck.path,
           ": cannot infer num_heads for embed_dim ", e.embed_dim,
           " (corridorkey-engine convert writes a safetensors file with the architecture "
           "embedded; tools/export_torchscript.py a TorchScript archive)");
  e.num_heads = num_heads > 0 ? num_heads : h->second;
  c.arch = e.embed_dim == 112  ? "hiera_base_plus"
           : e.embed_dim == 16 ? "tiny"
           : e.embed_dim == 32 ? "small"
                               : "hiera_dim" + std::to_string(e.embed_dim);

  // Stage boundaries: expanding blocks (with their own proj) start stages 2..n.
  const int64_t depth = count_blocks(ck);
  CK_CHECK(depth > 0, ModelError, ck.path, ": no encoder.model.blocks.* keys");
  e.stages.clear();
  int64_t start = 0;
  for (int64_t i = 1; i < depth; ++i)
    if (ck.find("encoder.model.blocks." + std::to_string(i) + ".proj.weight")) {
      e.stages.push_back(i - start);
      start = i;
    }
  e.stages.push_back(depth - start);
  e.mask_unit_attn.assign(e.stages.size(), false);
  for (size_t s = 0; s < e.stages.size() && s < 2; ++s) e.mask_unit_attn[s] = true;
  e.q_pool = std::min<int64_t>(3, static_cast<int64_t>(e.stages.size()) - 1);
  const auto& fc1 = need(ck, "encoder.model.blocks.0.mlp.fc1.weight");
  e.mlp_ratio = static_cast<double>(fc1.size(0)) / static_cast<double>(e.embed_dim);

  const auto& pos = need(ck, "encoder.model.pos_embed");
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(pos.size(1)))));
  CK_CHECK(grid * grid == pos.size(1), ModelError, ck.path, ": pos_embed has ", pos.size(1),
           " tokens, not a square grid");
  c.img_size = grid * e.patch_stride[0];
  c.decoder_dim = need(ck, "alpha_decoder.linear_c1.proj.weight").size(0);
  c.refiner_channels = need(ck, "refiner.stem.0.weight").size(0);
  return c;
}

std::string config_shape_mismatch(const GreenFormerConfig& cfg, const Checkpoint& ck) {
  const auto got = infer_config(ck, std::max<int64_t>(cfg.encoder.num_heads, 1));
  std::ostringstream d;
  d.imbue(std::locale::classic());  // numbers in every locale
  auto cmp = [&](const char* field, const auto& said, const auto& shapes) {
    if (said == shapes) return;
    d << (d.tellp() > 0 ? "; " : "") << field << " ";
    auto put = [&](const auto& v) {
      if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
        d << v;
      } else {
        d << "[";
        for (size_t i = 0; i < v.size(); ++i) d << (i ? "," : "") << v[i];
        d << "]";
      }
    };
    put(said);
    d << " in the metadata, ";
    put(shapes);
    d << " in the shapes";
  };
  cmp("embed_dim", cfg.encoder.embed_dim, got.encoder.embed_dim);
  cmp("in_chans", cfg.encoder.in_chans, got.encoder.in_chans);
  cmp("patch_kernel", std::vector<int64_t>(cfg.encoder.patch_kernel.begin(), cfg.encoder.patch_kernel.end()),
      std::vector<int64_t>(got.encoder.patch_kernel.begin(), got.encoder.patch_kernel.end()));
  cmp("stages", cfg.encoder.stages, got.encoder.stages);
  cmp("mlp_ratio", cfg.encoder.mlp_ratio, got.encoder.mlp_ratio);
  cmp("img_size (pos_embed grid)", cfg.img_size, got.img_size);
  cmp("decoder_dim", cfg.decoder_dim, got.decoder_dim);
  cmp("refiner_channels", cfg.refiner_channels, got.refiner_channels);
  return d.str();
}

torch::Tensor resize_pos_embed(const torch::Tensor& pos_embed, int64_t new_grid) {
  namespace F = torch::nn::functional;
  const int64_t n = pos_embed.size(1), C = pos_embed.size(2);
  const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  CK_CHECK(g * g == n, ModelError, "pos_embed has ", n, " tokens, not a square grid");
  if (g == new_grid) return pos_embed;
  auto grid = pos_embed.reshape({1, g, g, C}).permute({0, 3, 1, 2});
  auto r = F::interpolate(grid, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{new_grid, new_grid})
                                    .mode(torch::kBicubic)
                                    .align_corners(false));
  return r.permute({0, 2, 3, 1}).reshape({1, new_grid * new_grid, C});
}

void load_weights(GreenFormerImpl& model, const Checkpoint& ck) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> targets;
  for (const auto& p : model.named_parameters(true)) targets[p.key()] = p.value();
  for (const auto& b : model.named_buffers(true))
    if (!ends_with(b.key(), "num_batches_tracked")) targets[b.key()] = b.value();

  // Keys, dtypes and shapes first, from the header alone (no tensor byte touched), so a
  // wrong file fails fast and a mapped file is not paged in for nothing.
  struct Item {
    const std::string* key;
    torch::Tensor src, dst;
    bool resize = false;
  };
  std::vector<Item> share, copy;
  std::set<std::string> seen;
  for (const auto& [key, src] : ck.tensors) {
    if (key.rfind("ltrm_stage", 0) == 0) continue;  // token-routing modules: TokenRouter::load
    auto it = targets.find(key);
    CK_CHECK(it != targets.end(), ModelError, ck.path, ": unexpected key '", json::printable(key),
             "' (architecture ", model.config().arch, " has no such parameter)");
    // Integer or boolean tensors where the network has float weights would be converted
    // silently (a constant 0.5 matte).
    CK_CHECK(at::isFloatingType(src.scalar_type()), ModelError, ck.path, ": key '",
             json::printable(key), "' holds ", src.scalar_type(),
             " values; GreenFormer weights are floating point");
    const auto& dst = it->second;
    const bool resize = key == "encoder.model.pos_embed" && src.dim() == 3 && src.sizes() != dst.sizes();
    CK_CHECK(resize || src.sizes() == dst.sizes(), ModelError, ck.path, ": shape mismatch for '",
             key, "': checkpoint ", src.sizes(), ", model expects ", dst.sizes(),
             " (wrong architecture?)");
    const bool same = !resize && src.scalar_type() == dst.scalar_type() &&
                      src.device() == dst.device() && src.is_contiguous() && dst.is_contiguous() &&
                      src.numel() > 0;
    (same ? share : copy).push_back({&key, src, dst, resize});
    seen.insert(key);
  }
  for (const auto& [key, t] : targets)
    CK_CHECK(seen.count(key), ModelError, ck.path, ": missing key '", key, "' (expected shape ",
             t.sizes(), ")");

  // The file's tensor (mapped or read) becomes the weight: no second copy. Every shared
  // parameter first, so the constructor's memory is freed before the file is paged in
  // (peak: one copy of the weights, not two).
  for (auto& it : share) it.dst.set_data(it.src);
#if defined(__GLIBC__)
  ::malloc_trim(0);  // hand the constructor's freed blocks back before the file is read
#endif
  // Non-finite weights give NaN mattes.
  // Non-finite weights give NaN mattes. One pass over the bits, no temporaries: LibTorch's
  // isfinite is four passes with a tensor each (200 MB more peak on the 117 MB pos_embed
  // at 2048) and took most of a hiera_base_plus load (seconds on 2 cores).
  auto check_finite = [&](const Item& it, const torch::Tensor& t) {
    CK_CHECK(all_finite(t), ModelError, ck.path, ": key '", *it.key, "' holds NaN or Inf values");
  };
  for (const auto& it : copy) {  // converted once, straight from the file's tensor
    check_finite(it, it.src);
    auto src = it.resize ? resize_pos_embed(it.src.to(torch::kFloat), model.encoder->model->grid())
                         : it.src;
    CK_CHECK(src.sizes() == it.dst.sizes(), ModelError, ck.path, ": shape mismatch for '",
             *it.key, "': checkpoint ", it.src.sizes(), " resized to ", src.sizes(),
             ", model expects ", it.dst.sizes());
    auto dst = it.dst;
    dst.copy_(src);
  }
  for (const auto& it : share) check_finite(it, it.src);
}

GreenFormerConfig config_at(const Checkpoint& ck, int64_t img_size) {
  auto cfg = ck.config;
  if (img_size > 0) cfg.img_size = img_size;
  try {
    cfg.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(ck.path + ": " + e.what());
  }
  return cfg;
}

GreenFormer load_green_former(const std::string& path, int64_t img_size) {
  auto ck = read_checkpoint(path);
  GreenFormer model(config_at(ck, img_size));
  load_weights(*model, ck);
  model->eval();
  return model;
}

}  // namespace corridorkey::model
