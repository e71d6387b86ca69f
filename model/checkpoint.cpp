#include "checkpoint.h"

#include <corridorkey/errors.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/serialize.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

namespace corridorkey::model {
namespace fs = std::filesystem;

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

void add_tensor(Checkpoint& ck, const std::string& raw_key, const torch::Tensor& t) {
  const auto key = strip_prefix(raw_key);
  if (ends_with(key, "num_batches_tracked")) return;  // training counter, unused at inference
  ck.tensors.emplace_back(key, t);
}

std::string first_bytes(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string b(n, '\0');
  f.read(b.data(), static_cast<std::streamsize>(n));
  b.resize(static_cast<size_t>(f.gcount()));
  return b;
}

void read_torchscript(Checkpoint& ck) {
  torch::jit::ExtraFilesMap extra{{"config.json", ""}};
  torch::jit::Module m;
  try {
    m = torch::jit::load(ck.path, torch::kCPU, extra);
  } catch (const c10::Error& e) {
    throw ModelError(ck.path + ": TorchScript archive cannot be loaded: " + e.what_without_backtrace());
  }
  for (const auto& p : m.named_parameters(/*recurse=*/true)) add_tensor(ck, p.name, p.value);
  for (const auto& b : m.named_buffers(/*recurse=*/true)) add_tensor(ck, b.name, b.value);
  if (!extra["config.json"].empty()) {
    ck.config = GreenFormerConfig::from_json(extra["config.json"], ck.path);
    ck.config_from_file = true;
  }
}

void read_torch_save(Checkpoint& ck) {
  std::ifstream f(ck.path, std::ios::binary);
  std::vector<char> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  torch::IValue root;
  try {
    root = torch::pickle_load(data);
  } catch (const c10::Error& e) {
    throw ModelError(ck.path + ": torch.save archive cannot be unpickled (only dicts of tensors "
                     "are supported): " + e.what_without_backtrace());
  }
  CK_CHECK(root.isGenericDict(), ModelError, ck.path, ": expected a dict of tensors, found ",
           root.tagKind());
  auto dict = root.toGenericDict();
  for (const char* nested : {"state_dict", "model", "model_state_dict"}) {
    auto it = dict.find(torch::IValue(std::string(nested)));
    if (it != dict.end() && it->value().isGenericDict()) {
      dict = it->value().toGenericDict();
      break;
    }
  }
  for (const auto& kv : dict) {
    CK_CHECK(kv.key().isString(), ModelError, ck.path, ": weights dict has a non-string key");
    const auto key = kv.key().toStringRef();
    CK_CHECK(kv.value().isTensor(), ModelError, ck.path, ": entry '", key,
             "' is not a tensor (", kv.value().tagKind(), ")");
    add_tensor(ck, key, kv.value().toTensor());
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

const torch::Tensor& need(const Checkpoint& ck, const std::string& key) {
  const auto* t = ck.find(key);
  CK_CHECK(t, ModelError, ck.path, ": missing key '", key, "' (not a GreenFormer checkpoint?)");
  return *t;
}

}  // namespace

const torch::Tensor* Checkpoint::find(const std::string& key) const {
  for (const auto& [k, t] : tensors)
    if (k == key) return &t;
  return nullptr;
}

Checkpoint read_checkpoint(const std::string& path) {
  std::error_code ec;
  CK_CHECK(fs::exists(path, ec), IoError, path, ": checkpoint file does not exist");
  CK_CHECK(fs::is_regular_file(path, ec), IoError, path, ": checkpoint is not a regular file");
  std::ifstream probe(path, std::ios::binary);
  CK_CHECK(probe.good(), IoError, path, ": checkpoint cannot be opened for reading");
  const auto size = fs::file_size(path, ec);
  CK_CHECK(size > 0, ModelError, path, ": checkpoint file is empty");

  const auto magic = first_bytes(path, 4);
  if (magic.rfind("PK", 0) != 0) {
    // Pre-1.6 torch.save files start with a pickle protocol opcode (0x80).
    CK_CHECK(!(magic.size() > 0 && static_cast<unsigned char>(magic[0]) == 0x80), ModelError,
             path, ": legacy (pre-1.6) torch.save format; re-save it with a current torch.save");
    throw ModelError(path + ": not a checkpoint (expected a TorchScript or torch.save zip archive)");
  }

  Checkpoint ck;
  ck.path = path;
  std::vector<std::string> records;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    records = reader.getAllRecords();
  } catch (const c10::Error& e) {
    throw ModelError(path + ": truncated or corrupt checkpoint archive (" +
                     e.what_without_backtrace() + ")");
  }
  bool has_code = false, has_data = false;
  for (const auto& r : records) {
    has_code |= r.rfind("code/", 0) == 0 || r == "constants.pkl";
    has_data |= r == "data.pkl";
  }
  CK_CHECK(has_data, ModelError, path, ": zip archive without data.pkl: not a PyTorch checkpoint");
  try {
    if (has_code) {
      ck.format = CheckpointFormat::TorchScript;
      read_torchscript(ck);
    } else {
      ck.format = CheckpointFormat::TorchSave;
      read_torch_save(ck);
    }
  } catch (const c10::Error& e) {
    throw ModelError(path + ": cannot read checkpoint: " + e.what_without_backtrace());
  }
  CK_CHECK(!ck.tensors.empty(), ModelError, path, ": checkpoint holds no tensors");
  if (!ck.config_from_file) ck.config = infer_config(ck);
  return ck;
}

GreenFormerConfig infer_config(const Checkpoint& ck) {
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
  // 16 is this project's tiny test config (model/config.cpp).
  static const std::map<int64_t, int64_t> heads_by_width{
      {16, 1}, {96, 1}, {112, 2}, {144, 2}, {256, 4}};
  auto h = heads_by_width.find(e.embed_dim);
  CK_CHECK(h != heads_by_width.end(), ModelError, ck.path, ": cannot infer num_heads for "
           "embed_dim ", e.embed_dim, " (export with tools/export_torchscript.py to embed a config)");
  e.num_heads = h->second;
  c.arch = e.embed_dim == 112  ? "hiera_base_plus"
           : e.embed_dim == 16 ? "tiny"
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

  std::set<std::string> seen;
  for (const auto& [key, src0] : ck.tensors) {
    if (key.rfind("ltrm_stage", 0) == 0) continue;  // token-routing modules: TokenRouter::load
    auto it = targets.find(key);
    CK_CHECK(it != targets.end(), ModelError, ck.path, ": unexpected key '", key,
             "' (architecture ", model.config().arch, " has no such parameter)");
    auto src = src0;
    if (key == "encoder.model.pos_embed" && src.dim() == 3 && src.sizes() != it->second.sizes())
      src = resize_pos_embed(src.to(torch::kFloat), model.encoder->model->grid());
    CK_CHECK(src.sizes() == it->second.sizes(), ModelError, ck.path, ": shape mismatch for '",
             key, "': checkpoint ", src.sizes(), ", model expects ", it->second.sizes(),
             " (wrong architecture?)");
    it->second.copy_(src);
    seen.insert(key);
  }
  for (const auto& [key, t] : targets)
    CK_CHECK(seen.count(key), ModelError, ck.path, ": missing key '", key, "' (expected shape ",
             t.sizes(), ")");
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
