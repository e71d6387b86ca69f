#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "config/cpu_limit.h"

#include <sched.h>

#include <corridorkey/option_fields.h>

#include <fstream>
#include <map>
#include <iostream>
#include <sstream>

#include "support/support.h"

using namespace corridorkey;
using Catch::Matchers::Contains;

TEST_CASE("bundled profiles load with the seed's table", "[unit]") {
  const auto o = load_profile("original");
  CHECK_FALSE(o.model.flash_attention);
  CHECK(o.engine.tiled_refiner == RefinerTiling::Off);
  CHECK_FALSE(o.model.channels_last);
  CHECK_FALSE(o.engine.fused_refiner);
  CHECK(o.model.model_precision == Precision::Float32);
  const auto opt = load_profile("optimized");
  CHECK(opt.model.flash_attention);
  CHECK(opt.engine.tiled_refiner == RefinerTiling::Auto);
  CHECK(opt.model.channels_last);
  CHECK(opt.engine.fused_refiner);
  CHECK(opt.model.disable_cudnn_benchmark);
  CHECK(opt.engine.cache_clearing);
  CHECK(opt.model.model_precision == Precision::Auto);
  CHECK(opt.engine.tile_size == 256);
  CHECK(o.engine.engine_kind == EngineKind::Original);
  CHECK(opt.engine.engine_kind == EngineKind::Optimized);
  const auto perf = load_profile("performance");
  CHECK(perf.engine.compile_mode == CompileMode::MaxAutotune);
  CHECK(perf.engine.tiled_refiner == RefinerTiling::Off);
  CHECK(perf.engine.dma_buffers == 6);
  const auto exp = load_profile("experimental");
  CHECK(exp.model.token_routing);
  CHECK(exp.engine.compile_mode == CompileMode::Default);
  CHECK(exp.engine.profile == "experimental");
}

TEST_CASE("profile errors name the file, key, value and what is allowed", "[unit]") {
  Profile o;
  CHECK_THROWS_WITH(apply_profile_yaml(o, "flash_attention: true\nflash_atention: true\n", "p.yaml"),
                    Contains("p.yaml:2") && Contains("unknown key 'flash_atention'") &&
                        Contains("flash_attention"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "tile_size: big\n", "p.yaml"),
                    Contains("key 'tile_size'") && Contains("'big'") && Contains("multiple of 8"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "tile_size: 100\n", "p.yaml"), Contains("'100'"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "tile_size: 256\ntile_size: 512\n", "p.yaml"),
                    Contains("p.yaml:2") && Contains("'tile_size' appears twice") &&
                        Contains("line 1"));
  for (const char* bad : {"nan", ".nan", "inf", "-.inf", "NaN"})
    CHECK_THROWS_WITH(apply_profile_yaml(o, std::string("edge_threshold_low: ") + bad + "\n", "p.yaml"),
                      Contains("key 'edge_threshold_low'") && Contains(bad));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "engine: original\ntoken_routing: true\n", "p.yaml"),
                    Contains("token_routing") && Contains("engine: optimized"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "engine: fast\n", "p.yaml"),
                    Contains("original, optimized"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "device: cuda\n", "p.yaml"),
                    Contains("unknown key 'device'"));  // a run field, not a profile field
  CHECK_THROWS_WITH(apply_profile_yaml(o, "dma_buffers: 9\n", "p.yaml"), Contains("2..8"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "flash_attention: maybe\n", "p.yaml"),
                    Contains("true or false"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "compile_mode: turbo\n", "p.yaml"),
                    Contains("none, default, reduce-overhead, max-autotune"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "model_precision: fp8\n", "p.yaml"),
                    Contains("float32, float16, bfloat16"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "edge_threshold_low: 0.9\nedge_threshold_high: 0.5\n", "p.yaml"),
                    Contains("edge_threshold_low"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "tile_size: [1, 2]\n", "p.yaml"),
                    Contains("expected a single value"));
  CHECK_THROWS_WITH(apply_profile_yaml(o, "a: [unclosed\n", "p.yaml"), Contains("not valid YAML"));
  CHECK_THROWS_AS(apply_profile_yaml(o, "tile_size: 100\n", "p.yaml"), ConfigError);
  CHECK_THROWS_WITH(load_profile("fastest"), Contains("unknown profile 'fastest'"));
  CHECK_THROWS_WITH(load_profile("/nonexistent/p.yaml"), Contains("/nonexistent/p.yaml"));
}

TEST_CASE("overrides win over the profile; profile files by path", "[unit]") {
  auto o = load_profile("optimized");
  set_option(o, "tile-size", "256", "command line", OptionScope::Profile);
  set_option(o, "flash_attention", "false", "command line", OptionScope::Profile);
  set_option(o, "model_precision", "bf16", "command line", OptionScope::Profile);
  CHECK(o.engine.tile_size == 256);
  CHECK_FALSE(o.model.flash_attention);
  CHECK(o.model.model_precision == Precision::BFloat16);
  CHECK(o.engine.tiled_refiner == RefinerTiling::Auto);  // untouched fields keep the profile's value
  // Named values in any case, as hosts write them (FLOAT32 was refused where fp16 passed).
  set_option(o, "model_precision", "FLOAT32", "command line", OptionScope::Profile);
  CHECK(o.model.model_precision == Precision::Float32);
  set_option(o, "model_precision", "BFloat16", "command line", OptionScope::Profile);
  CHECK(o.model.model_precision == Precision::BFloat16);
  set_option(o, "tiled_refiner", "True", "command line", OptionScope::Profile);
  CHECK(o.engine.tiled_refiner == RefinerTiling::On);
  set_option(o, "tiled_refiner", "auto", "command line", OptionScope::Profile);
  CHECK_THROWS_WITH(set_option(o, "warp_speed", "9", "--warp-speed", OptionScope::Profile),
                    Contains("--warp-speed") && Contains("unknown key"));

  const auto dir = ck_test::temp_dir("profiles");
  const auto path = (dir / "mine.yaml").string();
  std::ofstream(path) << "# a user profile\ntiled_refiner: true\ntile_size: 384\n";
  const auto m = load_profile(path);
  CHECK(m.engine.tiled_refiner == RefinerTiling::On);
  CHECK(m.engine.tile_size == 384);
  CHECK_FALSE(m.model.flash_attention);  // defaults for what the file does not set
  CHECK(m.engine.profile == "mine");
  // Round trip: the printed profile fields parse back to the same options.
  Profile back;
  std::string yaml;
  for (const auto& [k, v] : profile_fields(m)) yaml += k + ": " + v + "\n";
  apply_profile_yaml(back, yaml, "roundtrip");
  CHECK(profile_fields(back) == profile_fields(m));
  std::filesystem::remove_all(dir);
}

TEST_CASE("tile_overlap from old profile files is accepted, ignored and warned about", "[unit]") {
  Profile o;
  std::ostringstream err;
  auto* old = std::cerr.rdbuf(err.rdbuf());
  apply_profile_yaml(o, "tiled_refiner: true\ntile_overlap: 128\n", "fork.yaml");
  std::cerr.rdbuf(old);
  CHECK(o.engine.tiled_refiner == RefinerTiling::On);
  CHECK_THAT(err.str(), Contains("fork.yaml:2") && Contains("tile_overlap") &&
                            Contains("deprecated"));
  for (const auto& [k, v] : profile_fields(o)) CHECK(k != "tile_overlap");
}

TEST_CASE("to_yaml prints every table field and reads back to the same options", "[unit]") {
  auto o = load_profile("experimental");
  set_option(o, "despill", "7.5");
  set_option(o, "device", "cuda:1");
  set_option(o, "img_size", "512");
  const auto yaml = to_yaml(o);
  for (const auto& f : engine_option_fields())
    CHECK_THAT(yaml, Contains("\n" + f.key + ": "));
  CHECK_THAT(yaml, Contains("despill: 7.5"));
  CHECK(o.engine.despill_strength == Approx(0.75));
  // Every printed field parses back through the same table.
  Profile back;
  std::istringstream in(yaml);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(": ");
    if (colon == std::string::npos || line.rfind("profile", 0) == 0) continue;
    auto v = line.substr(colon + 2);
    if (v == "\"\"" || v == "''") v.clear();
    set_option(back, line.substr(0, colon), v, "roundtrip");
  }
  CHECK(to_yaml(back).substr(to_yaml(back).find('\n')) == yaml.substr(yaml.find('\n')));
}

TEST_CASE("option tables: defaults come from the structs, errors name key and value", "[unit]") {
  const Profile e;
  for (const auto& f : engine_option_fields()) CHECK(f.default_value == option_value(e, f.key));
  const InferenceOptions i;
  for (const auto& f : inference_option_fields())
    CHECK(f.default_value == inference_option_value(i, f.key));
  InferenceOptions in;
  set_inference_option(in, "outputs", "matte,comp");
  CHECK((!in.fg && in.matte && in.comp && !in.processed));
  CHECK_THROWS_WITH(set_inference_option(in, "outputs", "fg,alpha", "--outputs"),
                    Contains("--outputs") && Contains("'fg,alpha'") && Contains("fg, matte"));
  CHECK_THROWS_WITH(set_inference_option(in, "read_workers", "0"), Contains("1..64"));
  CHECK_THROWS_WITH(set_inference_option(in, "frames", "3-x"), Contains("frame ranges"));
  Profile o;
  CHECK_THROWS_WITH(set_option(o, "refiner_scale", "nan", "--refiner-scale"),
                    Contains("--refiner-scale") && Contains("'nan'"));
  CHECK_THROWS_WITH(set_option(o, "despill", "inf"), Contains("0..10"));
  CHECK_THROWS_WITH(set_option(o, "img_size", "-32"), Contains("multiple of 32"));
  CHECK_THROWS_WITH(set_option(o, "device", "foo"), Contains("cuda:N"));
  CHECK_THROWS_WITH(set_option(o, "despeckle_size", "0"), Contains("1..1073741824"));
  CHECK_THROWS_WITH(set_option(o, "tile_size", "99999999999999999999"),
                    Contains("multiple of 8"));
  set_option(o, "device", "cuda:12");
  CHECK(o.model.device == "cuda:12");
}

TEST_CASE("threads are bounded by the CPUs this process may use: affinity and cgroup quota", "[unit]") {
  using corridorkey::config::cpus_from_cpu_max;
  CHECK(cpus_from_cpu_max("max 100000") == 0);  // no quota
  CHECK(cpus_from_cpu_max("200000 100000") == 2);
  CHECK(cpus_from_cpu_max("150000 100000") == 2);  // 1.5 CPUs: rounded up
  CHECK(cpus_from_cpu_max("50000 100000") == 1);
  CHECK(cpus_from_cpu_max("") == 0);
  CHECK(cpus_from_cpu_max("12x 100000") == 0);
  // The affinity mask (taskset, a Slurm cpuset) of this thread, changed for real.
  cpu_set_t old, one;
  REQUIRE(sched_getaffinity(0, sizeof old, &old) == 0);
  CHECK(corridorkey::config::usable_cpus() <= CPU_COUNT(&old));
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &old)) {
      CPU_SET(c, &one);
      break;
    }
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int n = corridorkey::config::usable_cpus();
  sched_setaffinity(0, sizeof old, &old);
  CHECK(n == 1);
}

// docs/embedding.md's field -> struct table is the one users read: every row of the option
// table must be in it exactly once, in the struct the row's owner names, and the
// "process-wide" row must list exactly the process_wide fields.
TEST_CASE("option owners: each field in one struct, as docs/embedding.md's table says", "[unit]") {
  const char* src = std::getenv("CK_SOURCE_DIR");
  REQUIRE(src != nullptr);
  std::ifstream doc(std::string(src) + "/docs/embedding.md");
  REQUIRE(doc.good());
  std::map<std::string, std::pair<std::string, bool>> listed;  // key -> (struct, process-wide row)
  std::string line;
  while (std::getline(doc, line)) {
    std::string owner;
    if (line.rfind("| `ModelOptions`", 0) == 0) owner = "model";
    else if (line.rfind("| `EngineSettings`", 0) == 0) owner = "engine";
    else continue;
    const bool wide = line.find("process-wide |") != std::string::npos;
    const auto cells = line.find(" | ");
    REQUIRE(cells != std::string::npos);
    const std::string names = line.substr(cells + 3);
    // The first backticked word of each comma-separated entry is the key.
    std::stringstream entries(names);
    std::string entry;
    while (std::getline(entries, entry, ',')) {
      const auto a = entry.find('`');
      if (a == std::string::npos) continue;
      const auto b = entry.find('`', a + 1);
      const std::string key = entry.substr(a + 1, b - a - 1);
      INFO(key);
      CHECK(listed.count(key) == 0);
      listed[key] = {owner, wide};
    }
  }
  REQUIRE(listed.size() > 30);
  for (const auto& f : engine_option_fields()) {
    INFO(f.key);
    REQUIRE(listed.count(f.key) == 1);
    CHECK(listed[f.key].first == to_string(f.owner));
    CHECK(listed[f.key].second == f.process_wide);
    // What is in the Model's key is a ModelOptions field, never a process-wide one.
    if (f.in_model_key) CHECK((f.owner == OptionOwner::Model && !f.process_wide));
  }
  for (const auto& f : inference_option_fields()) CHECK(f.owner == OptionOwner::Inference);
}

TEST_CASE("one text setter: each key sets its own half, a half refuses the other's keys", "[unit]") {
  // Every row of the table sets exactly the half its owner names, and nothing of the other.
  const Profile defaults;
  for (const auto& f : engine_option_fields()) {
    INFO(f.key);
    Profile p;
    // A value other than the default: the other spelling of a switch, else a value the row
    // accepts that differs (a number, a path).
    std::string v = f.is_switch ? (f.default_value == "true" ? "false" : "true")
                    : f.kind == OptionKind::Integer ? (f.default_value == "64" ? "32" : "64")
                    : f.kind == OptionKind::Real ? "0.25"
                    : f.kind == OptionKind::Size ? "50%"
                    : f.kind == OptionKind::Choice ? ""
                                                   : "some/path";
    if (f.key == "device") v = "cuda:1";
    if (f.key == "edge_threshold_low" || f.key == "edge_threshold_high") v = "0.5";
    if (f.key == "refiner_memory_budget_mb" || f.key == "img_size") v = "512";
    if (f.key == "tile_size") v = "256";
    if (f.key == "dma_buffers") v = "4";
    if (f.kind == OptionKind::Choice) {  // the first allowed name that is not the default
      const auto list = f.allowed.substr(f.allowed.find("of ") + 3);
      std::stringstream names(list);
      for (std::string n; std::getline(names, n, ',');) {
        n.erase(0, n.find_first_not_of(' '));
        if (n != f.default_value) {
          v = n;
          break;
        }
      }
    }
    set_option(p, f.key, v, "test");
    REQUIRE(option_value(p, f.key) != f.default_value);
    // The key's own half takes it alone; the other half refuses it, naming the half it is of.
    auto check_halves = [&](auto own, auto other, const Profile& other_half_untouched, const char* kind) {
      CHECK(to_yaml(other_half_untouched) == to_yaml(defaults));
      set_option(own, f.key, v, "test");
      CHECK(option_value(own, f.key) == option_value(p, f.key));
      CHECK_THROWS_WITH(set_option(other, f.key, v, "host"),
                        Contains("host") && Contains("'" + f.key + "'") && Contains(kind));
    };
    if (f.owner == OptionOwner::Model)
      check_halves(ModelOptions{}, EngineSettings{}, Profile{defaults.model, p.engine}, "model option");
    else
      check_halves(EngineSettings{}, ModelOptions{}, Profile{p.model, defaults.engine}, "engine setting");
  }
  // A profile-scope set refuses run fields, as a profile file does, naming the known keys.
  Profile p;
  CHECK_THROWS_WITH(set_option(p, "checkpoint", "x.pth", "p.yaml", OptionScope::Profile),
                    Contains("p.yaml") && Contains("unknown key 'checkpoint'") && Contains("flash_attention"));
  set_option(p, "checkpoint", "x.pth", "--checkpoint");
  CHECK(p.model.checkpoint == "x.pth");
  CHECK_THROWS_WITH(set_option(p, "warp_speed", "9"), Contains("unknown key 'warp_speed'"));
}
