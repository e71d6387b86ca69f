// Profile schema: one table drives YAML parsing, CLI overrides, printing and help.
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#ifndef CK_SOURCE_PROFILE_DIR
#define CK_SOURCE_PROFILE_DIR ""
#endif
#ifndef CK_INSTALL_PROFILE_DIR
#define CK_INSTALL_PROFILE_DIR ""
#endif

CORRIDORKEY_NAMESPACE_BEGIN

const char* to_string(Precision p) {
  switch (p) {
    case Precision::Float32: return "float32";
    case Precision::Float16: return "float16";
    case Precision::BFloat16: return "bfloat16";
  }
  return "?";
}

const char* to_string(CompileMode m) {
  switch (m) {
    case CompileMode::None: return "none";
    case CompileMode::Default: return "default";
    case CompileMode::ReduceOverhead: return "reduce-overhead";
    case CompileMode::MaxAutotune: return "max-autotune";
  }
  return "?";
}

namespace {

struct Field {
  const char* key;
  const char* help;
  const char* allowed;  // shown in errors
  std::function<void(EngineOptions&, const std::string&, const std::string&)> set;
  std::function<std::string(const EngineOptions&)> get;
};

[[noreturn]] void bad(const std::string& where, const char* key, const std::string& value,
                      const char* allowed) {
  throw ConfigError(where + ": key '" + key + "': invalid value '" + value + "' (expected " +
                    allowed + ")");
}

bool parse_bool(const std::string& where, const char* key, const std::string& v) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on" || s == "1") return true;
  if (s == "false" || s == "no" || s == "off" || s == "0") return false;
  bad(where, key, v, "true or false");
}

int64_t parse_int(const std::string& where, const char* key, const std::string& v,
                  const char* allowed) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') bad(where, key, v, allowed);
  return x;
}

double parse_double(const std::string& where, const char* key, const std::string& v,
                    const char* allowed) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') bad(where, key, v, allowed);
  return x;
}

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

#define CK_BOOL_FIELD(name, help)                                                     \
  Field {                                                                              \
    #name, help, "true or false",                                                      \
        [](EngineOptions& o, const std::string& w, const std::string& v) {             \
          o.name = parse_bool(w, #name, v);                                            \
        },                                                                             \
        [](const EngineOptions& o) { return std::string(o.name ? "true" : "false"); } \
  }

const std::vector<Field>& schema() {
  static const std::vector<Field> fields{
      CK_BOOL_FIELD(flash_attention, "4-D SDPA (flash / memory-efficient) in global attention"),
      CK_BOOL_FIELD(fused_decoder, "decoders without the 1024-channel concat (linear_fuse folded)"),
      CK_BOOL_FIELD(tiled_refiner, "exact tiled refiner with image-global GroupNorm statistics"),
      Field{"tile_size", "refiner tile side in pixels", "a multiple of 8 >= 64, e.g. 512",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              const auto x = parse_int(w, "tile_size", v, "a multiple of 8 >= 64, e.g. 512");
              if (x < 64 || x % 8 != 0) bad(w, "tile_size", v, "a multiple of 8 >= 64, e.g. 512");
              o.tile_size = x;
            },
            [](const EngineOptions& o) { return std::to_string(o.tile_size); }},
      Field{"tile_overlap", "halo budget per tile side (>= 16 px, < tile_size)",
            "an integer >= 16 and < tile_size, e.g. 128",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              const auto x = parse_int(w, "tile_overlap", v, "an integer >= 16 and < tile_size");
              if (x < 16) bad(w, "tile_overlap", v, "an integer >= 16 and < tile_size, e.g. 128");
              o.tile_overlap = x;
            },
            [](const EngineOptions& o) { return std::to_string(o.tile_overlap); }},
      CK_BOOL_FIELD(disable_cudnn_benchmark, "cudnn.benchmark off (process-global)"),
      CK_BOOL_FIELD(cache_clearing, "release cached allocator blocks between stages"),
      Field{"compile_mode", "none | default | reduce-overhead | max-autotune",
            "one of none, default, reduce-overhead, max-autotune",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              for (auto m : {CompileMode::None, CompileMode::Default, CompileMode::ReduceOverhead,
                             CompileMode::MaxAutotune})
                if (v == to_string(m)) {
                  o.compile_mode = m;
                  return;
                }
              bad(w, "compile_mode", v, "one of none, default, reduce-overhead, max-autotune");
            },
            [](const EngineOptions& o) { return std::string(to_string(o.compile_mode)); }},
      Field{"model_precision", "float32 | float16 | bfloat16 (fp32/fp16/bf16 accepted)",
            "one of float32, float16, bfloat16",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              if (v == "float32" || v == "fp32") o.model_precision = Precision::Float32;
              else if (v == "float16" || v == "fp16" || v == "half") o.model_precision = Precision::Float16;
              else if (v == "bfloat16" || v == "bf16") o.model_precision = Precision::BFloat16;
              else bad(w, "model_precision", v, "one of float32, float16, bfloat16");
            },
            [](const EngineOptions& o) { return std::string(to_string(o.model_precision)); }},
      CK_BOOL_FIELD(mixed_precision, "autocast: fp32 weights, half-precision matmuls/convs"),
      CK_BOOL_FIELD(tf32, "TF32 matmuls/convolutions on Ampere+ (process-global)"),
      Field{"dma_buffers", "pinned host buffers for device->host copies", "an integer in 2..8",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              const auto x = parse_int(w, "dma_buffers", v, "an integer in 2..8");
              if (x < 2 || x > 8) bad(w, "dma_buffers", v, "an integer in 2..8");
              o.dma_buffers = x;
            },
            [](const EngineOptions& o) { return std::to_string(o.dma_buffers); }},
      CK_BOOL_FIELD(token_routing, "route easy tokens around global attention (experimental)"),
      Field{"edge_threshold_low", "hint above this is uncertain (edge)", "a number in [0, 1)",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              const auto x = parse_double(w, "edge_threshold_low", v, "a number in [0, 1)");
              if (!(x >= 0 && x < 1)) bad(w, "edge_threshold_low", v, "a number in [0, 1)");
              o.edge_threshold_low = x;
            },
            [](const EngineOptions& o) { return fmt(o.edge_threshold_low); }},
      Field{"edge_threshold_high", "hint below this is uncertain (edge)", "a number in (0, 1]",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              const auto x = parse_double(w, "edge_threshold_high", v, "a number in (0, 1]");
              if (!(x > 0 && x <= 1)) bad(w, "edge_threshold_high", v, "a number in (0, 1]");
              o.edge_threshold_high = x;
            },
            [](const EngineOptions& o) { return fmt(o.edge_threshold_high); }},
      Field{"min_edge_tokens", "fewer edge tokens than this: route all tokens",
            "a non-negative integer, e.g. 64",
            [](EngineOptions& o, const std::string& w, const std::string& v) {
              const auto x = parse_int(w, "min_edge_tokens", v, "a non-negative integer, e.g. 64");
              if (x < 0) bad(w, "min_edge_tokens", v, "a non-negative integer, e.g. 64");
              o.min_edge_tokens = x;
            },
            [](const EngineOptions& o) { return std::to_string(o.min_edge_tokens); }},
  };
  return fields;
}

std::string normalise_key(std::string k) {
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

const Field* find_field(const std::string& key) {
  for (const auto& f : schema())
    if (key == f.key) return &f;
  return nullptr;
}

std::string known_keys() {
  std::string s;
  for (const auto& f : schema()) s += (s.empty() ? "" : ", ") + std::string(f.key);
  return s;
}

bool looks_like_path(const std::string& s) {
  auto ends = [&](const char* suf) {
    const std::string x(suf);
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  return s.find('/') != std::string::npos || ends(".yaml") || ends(".yml");
}

}  // namespace

std::vector<std::string> builtin_profiles() {
  return {"original", "optimized", "performance", "experimental"};
}

std::string profile_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("CORRIDORKEY_PROFILE_DIR"); env && *env) return env;
  for (const char* d : {CK_SOURCE_PROFILE_DIR, CK_INSTALL_PROFILE_DIR})
    if (*d && fs::exists(fs::path(d) / "original.yaml")) return d;
  return CK_SOURCE_PROFILE_DIR;
}

void set_profile_field(EngineOptions& o, const std::string& key_in, const std::string& value,
                       const std::string& source) {
  const auto key = normalise_key(key_in);
  const Field* f = find_field(key);
  CK_CHECK(f, ConfigError, source, ": unknown key '", key_in, "' (known keys: ", known_keys(), ")");
  f->set(o, source, value);
}

void validate_profile(const EngineOptions& o, const std::string& source) {
  CK_CHECK(o.tile_overlap < o.tile_size, ConfigError, source, ": key 'tile_overlap': value ",
           o.tile_overlap, " must be smaller than tile_size ", o.tile_size);
  CK_CHECK(o.edge_threshold_low < o.edge_threshold_high, ConfigError, source,
           ": key 'edge_threshold_low': value ", o.edge_threshold_low,
           " must be smaller than edge_threshold_high ", o.edge_threshold_high);
}

void apply_profile_yaml(EngineOptions& out, const std::string& text, const std::string& source) {
  EngineOptions o = out;  // all or nothing: `out` is untouched when the file has an error
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return;  // an empty file sets nothing
  CK_CHECK(root.IsMap(), ConfigError, source, ": expected a mapping of profile keys, e.g. "
           "'flash_attention: true'");
  for (const auto& kv : root) {
    const auto key = kv.first.as<std::string>();
    const auto where = source + ":" + std::to_string(kv.first.Mark().line + 1);
    CK_CHECK(find_field(normalise_key(key)), ConfigError, where, ": unknown key '", key,
             "' (known keys: ", known_keys(), ")");
    CK_CHECK(kv.second.IsScalar(), ConfigError, where, ": key '", key,
             "': expected a single value, not a list or mapping");
    set_profile_field(o, key, kv.second.Scalar(), where);
  }
  validate_profile(o, source);
  out = o;
}

EngineOptions load_profile(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::string path = name_or_path;
  if (!looks_like_path(name_or_path)) {
    const auto names = builtin_profiles();
    if (std::find(names.begin(), names.end(), name_or_path) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ConfigError("unknown profile '" + name_or_path + "' (expected one of " + list +
                        ", or a path to a .yaml file)");
    }
    path = (fs::path(profile_dir()) / (name_or_path + ".yaml")).string();
  }
  std::ifstream f(path);
  CK_CHECK(f.good(), ConfigError, path, ": profile file cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  EngineOptions o;
  apply_profile_yaml(o, ss.str(), path);
  o.profile = looks_like_path(name_or_path) ? fs::path(path).stem().string() : name_or_path;
  return o;
}

std::vector<std::pair<std::string, std::string>> profile_fields(const EngineOptions& o) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : schema()) out.emplace_back(f.key, f.get(o));
  return out;
}

std::vector<std::pair<std::string, std::string>> profile_schema() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : schema()) out.emplace_back(f.key, f.help);
  return out;
}

std::string to_yaml(const EngineOptions& o) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "profile" << YAML::Value << o.profile;
  for (const auto& [k, v] : profile_fields(o)) e << YAML::Key << k << YAML::Value << v;
  e << YAML::Key << "device" << YAML::Value << o.device;
  e << YAML::Key << "checkpoint" << YAML::Value << o.checkpoint;
  e << YAML::Key << "img_size" << YAML::Value << o.img_size;
  e << YAML::Key << "refiner_scale" << YAML::Value << o.refiner_scale;
  e << YAML::Key << "input_is_linear" << YAML::Value << o.input_is_linear;
  e << YAML::Key << "despill_strength" << YAML::Value << o.despill_strength;
  e << YAML::Key << "despeckle" << YAML::Value << o.despeckle;
  e << YAML::Key << "despeckle_size" << YAML::Value << o.despeckle_size;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

CORRIDORKEY_NAMESPACE_END
