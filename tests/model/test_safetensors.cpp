// safetensors checkpoints: files written by the safetensors package (tests/make_fixtures.py)
// load to the same weights and the same outputs as the torch.save twin, mapped or read;
// every malformed file is refused naming the file and the tensor; folders are resolved;
// convert round-trips bit for bit.
#include <corridorkey/checkpoint.h>
#include <corridorkey/engine.h>
#include <corridorkey/errors.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "support/support.h"

#include <cstring>
#include <sys/stat.h>
#include <filesystem>
#include <fstream>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace st = corridorkey::model::safetensors;

namespace {

/// A safetensors file from its parts: the 8-byte length (the header's own unless given),
/// the header text, then `data`.
std::string write_raw(const fs::path& path, const std::string& header, const std::string& data,
                      int64_t length = -1) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = length >= 0 ? static_cast<uint64_t>(length) : header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << header << data;
  return path.string();
}

std::string floats(int n) { return std::string(static_cast<size_t>(n) * 4, '\0'); }

/// The message of the ModelError reading `path` throws (fails the test if none).
std::string refusal(const std::string& path) {
  try {
    (void)model::read_checkpoint(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  FAIL("no ModelError reading " << path);
  return "";
}

Profile fp32_engine(const std::string& checkpoint, bool mmap = true) {
  auto o = load_profile("original");
  o.model.device = "cpu";
  o.model.checkpoint = checkpoint;
  o.model.mmap = mmap;
  return o;
}

std::vector<float> seeded_input(int64_t S) {
  std::vector<float> v(static_cast<size_t>(4 * S * S));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
  return v;
}

/// alpha and fg of one run_model call on a fixed input.
std::pair<std::vector<float>, std::vector<float>> outputs(const Profile& o) {
  auto e = create_engine(o.model, o.engine);
  const auto out = e->run_model(seeded_input(e->info().img_size));
  return {out.alpha, out.fg};
}

}  // namespace

TEST_CASE("safetensors from the safetensors package load to the torch.save weights", "[model]") {
  const auto pth = ck_test::load_tensors(ck_test::fixture("tiny128_top.pth"));
  for (const char* name : {"tiny128.safetensors", "tiny128_compiled.safetensors"})
    for (bool mmap : {true, false}) {
      INFO(name << " mmap " << mmap);
      const auto ck = model::read_checkpoint(ck_test::fixture(name), {mmap});
      CHECK(ck.format == model::CheckpointFormat::Safetensors);
      CHECK(ck.config.arch == "tiny");
      CHECK(ck.config.img_size == 128);
      size_t weights = 0;
      for (const auto& [k, t] : pth) {
        if (k.find("num_batches_tracked") != std::string::npos) {
          CHECK(ck.find(k) == nullptr);  // dropped, as from .pth
          continue;
        }
        const auto* got = ck.find(k);  // _orig_mod. stripped
        REQUIRE(got);
        CHECK(got->scalar_type() == t.scalar_type());
        CHECK(torch::equal(*got, t));
        ++weights;
      }
      CHECK(ck.tensors.size() == weights);
    }
}

TEST_CASE("safetensors outputs are bit-identical to the .pth of the same weights", "[model]") {
  const auto ref = outputs(fp32_engine(ck_test::fixture("tiny128_top.pth")));
  for (bool mmap : {true, false}) {
    CHECK(outputs(fp32_engine(ck_test::fixture("tiny128.safetensors"), mmap)) == ref);
    CHECK(outputs(fp32_engine(ck_test::fixture("tiny128_compiled.safetensors"), mmap)) == ref);
  }
  // Half-precision files into a float32 engine: converted once, exactly as from .pth.
  for (const char* half : {"fp16", "bf16"}) {
    INFO(half);
    const auto twin = outputs(fp32_engine(ck_test::fixture(std::string("tiny128_") + half + "_twin.pth")));
    CHECK(outputs(fp32_engine(ck_test::fixture(std::string("tiny128_") + half + ".safetensors"))) == twin);
    CHECK(twin != ref);  // the fixture really is rounded
  }
}

TEST_CASE("mapped safetensors weights are the model's parameters, not a copy", "[model]") {
  for (bool mmap : {true, false}) {
    const auto ck = model::read_checkpoint(ck_test::fixture("tiny128.safetensors"), {mmap});
    model::GreenFormer net(model::config_at(ck, 0));
    model::load_weights(*net, ck);
    size_t shared = 0, params = 0;
    for (const auto& p : net->named_parameters(true)) {
      ++params;
      shared += p.value().data_ptr() == ck.find(p.key())->data_ptr();
    }
    CHECK(shared == params);
    // A float32 model from a bf16 file converts (one copy, from the file's tensors).
    const auto half = model::read_checkpoint(ck_test::fixture("tiny128_bf16.safetensors"), {mmap});
    model::GreenFormer net32(model::config_at(half, 0));
    model::load_weights(*net32, half);
    for (const auto& p : net32->named_parameters(true))
      CHECK(p.value().scalar_type() == torch::kFloat);
  }
}

TEST_CASE("every safetensors dtype the engine reads, with its values", "[model]") {
  const auto f = st::read_file(ck_test::fixture("dtypes.safetensors"), st::Access::Map);
  std::map<std::string, torch::Tensor> t(f.tensors.begin(), f.tensors.end());
  const auto base = torch::arange(24, torch::kDouble).reshape({4, 6});
  const std::map<std::string, c10::ScalarType> want{
      {"float64", torch::kDouble},  {"float32", torch::kFloat},   {"float16", torch::kHalf},
      {"bfloat16", torch::kBFloat16}, {"int64", torch::kLong},    {"int32", torch::kInt},
      {"int16", torch::kShort},     {"int8", torch::kChar},       {"uint8", torch::kByte},
      {"float8_e4m3fn", torch::kFloat8_e4m3fn}, {"float8_e5m2", torch::kFloat8_e5m2}};
  for (const auto& [name, dt] : want) {
    INFO(name);
    REQUIRE(t.count(name));
    CHECK(t[name].scalar_type() == dt);
    CHECK(t[name].sizes() == base.sizes());
    CHECK(torch::equal(t[name].to(torch::kDouble), base.to(dt).to(torch::kDouble)));
  }
  CHECK(torch::equal(t["bool"], base.remainder(2).eq(1)));
  CHECK(t["empty"].sizes() == torch::IntArrayRef({0, 5}));
  CHECK(t["scalar"].dim() == 0);
  CHECK(t["scalar"].item<float>() == 3.5f);
  REQUIRE(f.header.find_metadata("note"));
  CHECK(*f.header.find_metadata("note") == "every dtype the engine reads");

  const auto msg = refusal(ck_test::fixture("dtype_u16.safetensors"));
  CHECK_THAT(msg, Contains("dtype_u16.safetensors") && Contains("'weight'") && Contains("U16"));
}

TEST_CASE("malformed safetensors files are refused naming the file and the tensor", "[model]") {
  const auto dir = ck_test::temp_dir("st_bad");
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  struct Case {
    const char* name;
    std::string header, data;
    int64_t length;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases{
      {"len_beyond", "{" + ok_entry + "}", floats(6), 1 << 20, {"beyond the file"}},
      {"len_bound", "{" + ok_entry + "}", floats(6), int64_t{200} << 20, {"bound"}},
      {"not_object", R"(["w"])", "", -1, {"start with '{'"}},
      {"not_json", R"({"w":{"dtype":"F32",)", "", -1, {"not valid JSON"}},
      {"duplicate", "{" + ok_entry + "," + ok_entry + "}", floats(6), -1, {"'w'", "twice"}},
      {"unknown_dtype", R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", floats(1), -1,
       {"'w'", "unknown dtype 'F33'"}},
      {"subbyte_dtype", R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "x", -1,
       {"'w'", "F4", "not supported"}},
      {"e8m0_dtype", R"({"w":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[0,1]}})", "x", -1,
       {"'w'", "F8_E8M0"}},
      {"out_of_range", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", floats(2),
       -1, {"'w'", "beyond the data section"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
       floats(6), -1, {"'b'", "overlap", "'a'"}},
      {"size_mismatch", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", floats(6), -1,
       {"'w'", "needs 24"}},
      {"end_before_begin", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", floats(3), -1,
       {"'w'", "end before"}},
      {"negative_shape", R"({"w":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", floats(6),
       -1, {"'w'", "negative"}},
      {"overflow_shape",
       R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", floats(1), -1,
       {"'w'", "overflows"}},
      {"float_shape", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", floats(2), -1,
       {"'w'", "integers"}},
      {"trailing_garbage", "{" + ok_entry + "} x", floats(6), -1, {"after the JSON value"}},
      {"metadata_not_strings", R"({"__metadata__":{"a":1},)" + ok_entry + "}", floats(6), -1,
       {"__metadata__", "'a'", "string"}},
      {"no_offsets", R"({"w":{"dtype":"F32","shape":[1]}})", floats(1), -1, {"'w'", "data_offsets"}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const auto path = write_raw(dir / (std::string(c.name) + ".safetensors"), c.header, c.data, c.length);
    std::string msg;
    try {
      (void)st::read_file(path, st::Access::Read);
      FAIL("accepted");
    } catch (const ModelError& e) {
      msg = e.what();
    }
    CHECK_THAT(msg, Contains(path));
    for (const auto& s : c.says) CHECK_THAT(msg, Contains(s));
    // Both access modes refuse alike, and so does the checkpoint reader (by content: the
    // length and '{' make it a safetensors file even when it is broken after that).
    CHECK_THROWS_AS(st::read_file(path, st::Access::Map), ModelError);
  }
  // A truncated real file: its header reaches beyond the end.
  const auto whole = ck_test::read_file(ck_test::fixture("tiny128.safetensors"));
  for (size_t keep : {size_t{4}, size_t{12}, whole.size() / 2, whole.size() - 1}) {
    INFO("truncated to " << keep);
    const auto p = (dir / ("cut" + std::to_string(keep) + ".safetensors")).string();
    std::ofstream(p, std::ios::binary) << whole.substr(0, keep);
    const auto msg = refusal(p);
    CHECK_THAT(msg, Contains(p));
  }
  // The same refusals from memory (the fuzzer's entry point).
  CHECK_THROWS_AS(st::read_memory("\x02\0\0\0\0\0\0\0{}", 9, "mem"), ModelError);
  fs::remove_all(dir);
}

TEST_CASE("the format is told by content and the embedded architecture is checked", "[model]") {
  const auto dir = ck_test::temp_dir("st_content");
  // A safetensors file named .pth loads as safetensors; a .pth named .safetensors as torch.save.
  fs::copy_file(ck_test::fixture("tiny128.safetensors"), dir / "weights.pth");
  fs::copy_file(ck_test::fixture("tiny128_top.pth"), dir / "weights.safetensors");
  CHECK(model::read_checkpoint((dir / "weights.pth").string()).format == model::CheckpointFormat::Safetensors);
  CHECK(model::read_checkpoint((dir / "weights.safetensors").string()).format ==
        model::CheckpointFormat::TorchSave);
  CHECK(outputs(fp32_engine((dir / "weights.pth").string())) ==
        outputs(fp32_engine((dir / "weights.safetensors").string())));

  const auto msg = refusal(ck_test::fixture("tiny128_badmeta.safetensors"));
  CHECK_THAT(msg, Contains("tiny128_badmeta.safetensors") && Contains("corridorkey_config") &&
                      Contains("embed_dim 32 in the metadata, 16 in the shapes"));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint folder: .safetensors before .pth before .ts, one of a kind", "[model]") {
  const auto dir = ck_test::temp_dir("st_dir");
  CHECK_THROWS_WITH(model::resolve_checkpoint_path(dir.string()), Contains("no checkpoint in this folder"));
  fs::copy_file(ck_test::fixture("tiny128.ts"), dir / "model.ts");
  std::string note;
  CHECK(model::resolve_checkpoint_path(dir.string(), &note) == (dir / "model.ts").string());
  fs::copy_file(ck_test::fixture("tiny128_top.pth"), dir / "CorridorKey.pth");
  CHECK(model::resolve_checkpoint_path(dir.string()) == (dir / "CorridorKey.pth").string());
  fs::copy_file(ck_test::fixture("tiny128.safetensors"), dir / "CorridorKey.safetensors");
  CHECK(model::resolve_checkpoint_path(dir.string(), &note) ==
        (dir / "CorridorKey.safetensors").string());
  CHECK_THAT(note, Contains("CorridorKey.safetensors") && Contains("chosen"));
  // Dot files (a convert in progress) are not candidates.
  std::ofstream(dir / ".ck-tmp.x.safetensors.1") << "partial";
  CHECK(model::resolve_checkpoint_path(dir.string()) == (dir / "CorridorKey.safetensors").string());
  // The green and blue models side by side: name one.
  fs::copy_file(ck_test::fixture("tiny128_seed1.safetensors"), dir / "CorridorKeyBlue.safetensors");
  try {
    (void)model::read_checkpoint(dir.string());
    FAIL("a folder with two .safetensors was accepted");
  } catch (const ConfigError& e) {
    CHECK_THAT(std::string(e.what()),
               Contains("CorridorKey.safetensors") && Contains("CorridorKeyBlue.safetensors") &&
                   Contains("name the file"));
  }
  // Naming the file works; so does the engine through the folder of one file.
  CHECK(model::read_checkpoint((dir / "CorridorKeyBlue.safetensors").string()).tensors.size() > 0);
  fs::remove(dir / "CorridorKeyBlue.safetensors");
  auto e = create_engine(fp32_engine(dir.string()).model, fp32_engine(dir.string()).engine);
  CHECK(e->info().checkpoint == (dir / "CorridorKey.safetensors").string());
  CHECK_THAT(e->info().notes, Contains("chosen in the folder"));
  fs::remove_all(dir);
}

TEST_CASE("convert writes any loadable checkpoint as safetensors, outputs bit-identical", "[model]") {
  const auto dir = ck_test::temp_dir("st_convert");
  for (const char* in : {"tiny128.pth", "tiny128_legacy.pth", "tiny128.ts", "tiny128_compiled.pth",
                         "tiny128_bf16.pth"}) {
    INFO(in);
    const auto src = ck_test::fixture(in);
    const auto out = (dir / (std::string(in) + ".safetensors")).string();
    const auto r = convert_checkpoint(src, out);
    CHECK(r.arch == "tiny");
    CHECK(r.tensors > 0);
    CHECK(st::is_safetensors_file(out));
    const auto f = st::read_file(out, st::Access::Read);
    REQUIRE(f.header.find_metadata(model::kConfigMetadataKey));
    const auto ck = model::read_checkpoint(out);
    CHECK(ck.config_from_file);
    for (const auto& [k, t] : f.tensors) CHECK(k.find("_orig_mod.") == std::string::npos);
    CHECK(outputs(fp32_engine(out)) == outputs(fp32_engine(src)));
  }
  // The training checkpoint's optimizer state is reported, not written.
  const auto r = convert_checkpoint(ck_test::fixture("tiny128.pth"), (dir / "t.safetensors").string());
  CHECK(std::find(r.ignored.begin(), r.ignored.end(), "optimizer") != r.ignored.end());
  // Refusals: the input itself, a folder, a file that is not a GreenFormer, a hostile pickle.
  fs::copy_file(ck_test::fixture("tiny128.safetensors"), dir / "same.safetensors");
  CHECK_THROWS_AS(convert_checkpoint((dir / "same.safetensors").string(), (dir / "same.safetensors").string()),
                  ConfigError);
  CHECK_THROWS_AS(convert_checkpoint(ck_test::fixture("tiny128.pth"), dir.string()), ConfigError);
  CHECK_THROWS_AS(convert_checkpoint(ck_test::fixture("dtypes.safetensors"), (dir / "x.safetensors").string()),
                  ModelError);
  CHECK_THROWS_AS(convert_checkpoint(ck_test::fixture("evil_system.pth"), (dir / "y.safetensors").string()),
                  ModelError);
  CHECK_FALSE(fs::exists(dir / "x.safetensors"));
  CHECK_FALSE(fs::exists(dir / "y.safetensors"));
  CHECK_FALSE(fs::exists(ck_test::fixture("evil_system.pth") + ".marker"));
  fs::remove_all(dir);
}

TEST_CASE("write_file refuses what it cannot write and leaves nothing behind", "[model]") {
  const auto dir = ck_test::temp_dir("st_write");
  const auto p = (dir / "a.safetensors").string();
  std::vector<std::pair<std::string, torch::Tensor>> t{{"x", torch::arange(6).view({2, 3}).t()},
                                                       {"y", torch::ones({3}, torch::kHalf)}};
  st::write_file(p, t, {{"k", "v \"quoted\""}});
  const auto back = st::read_file(p, st::Access::Map);
  std::map<std::string, torch::Tensor> m(back.tensors.begin(), back.tensors.end());
  CHECK(torch::equal(m["x"], t[0].second));  // a transposed view is written contiguous
  CHECK(torch::equal(m["y"], t[1].second));
  CHECK(*back.header.find_metadata("k") == "v \"quoted\"");
  CHECK((back.header.data_offset % 8) == 0);
  CHECK_THROWS_AS(st::write_file((dir / "d.safetensors").string(), {{"a", t[0].second}, {"a", t[1].second}}, {}),
                  ModelError);
  CHECK_THROWS_AS(st::write_file((dir / "c.safetensors").string(),
                                 {{"z", torch::zeros({2}, torch::kComplexFloat)}}, {}),
                  ModelError);
  CHECK_THROWS_AS(st::write_file((dir / "missing" / "e.safetensors").string(), t, {}), IoError);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);
  fs::remove_all(dir);
}

TEST_CASE("NaN and Inf weights are refused in every float dtype, wherever they sit", "[model]") {
  for (const char* file : {"tiny128.safetensors", "tiny128_fp16.safetensors", "tiny128_bf16.safetensors"})
    for (double bad : {std::nan(""), double(INFINITY), -double(INFINITY)})
      for (bool last : {false, true}) {
        INFO(file << " " << bad << (last ? " last element" : " first element"));
        auto ck = model::read_checkpoint(ck_test::fixture(file), {/*mmap=*/false});
        // The file's own tensor, edited in its read buffer: what the loader sees.
        auto w = *ck.find("refiner.stem.0.weight");
        auto flat = w.view(-1);
        flat[last ? flat.numel() - 1 : 0] = bad;
        model::GreenFormer net(model::config_at(ck, 0));
        CHECK_THROWS_WITH(model::load_weights(*net, ck),
                          Contains("refiner.stem.0.weight") && Contains("NaN or Inf"));
      }
  // float8 weights load (converted once), and their NaN is caught too.
  auto ck = model::read_checkpoint(ck_test::fixture("tiny128.safetensors"), {false});
  model::GreenFormer net(model::config_at(ck, 0));
  for (auto& [k, t] : ck.tensors)
    if (k == "refiner.final.weight") t = t.to(torch::kFloat8_e4m3fn);
  CHECK_NOTHROW(model::load_weights(*net, ck));
  for (auto& [k, t] : ck.tensors)
    if (k == "refiner.final.weight") t.view(-1)[3] = std::nan("");
  CHECK_THROWS_WITH(model::load_weights(*net, ck), Contains("refiner.final.weight"));
}

TEST_CASE("checkpoint paths that are not regular files are refused without opening them", "[model]") {
  const auto dir = ck_test::temp_dir("st_special");
  // A FIFO would block open() until a writer came (and SIGTERM cannot end a blocked open).
  const auto fifo = (dir / "fifo.safetensors").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(model::read_checkpoint(fifo), Contains(fifo) && Contains("not a regular file"));
  CHECK_FALSE(st::is_safetensors_file(fifo));
  CHECK_THROWS_AS(st::read_file(fifo, st::Access::Map), IoError);
  // A symbolic link loop is named as such, not as a missing file.
  fs::create_symlink(dir / "b.safetensors", dir / "a.safetensors");
  fs::create_symlink(dir / "a.safetensors", dir / "b.safetensors");
  CHECK_THROWS_WITH(model::read_checkpoint((dir / "a.safetensors").string()),
                    Contains("cannot reach") && !Contains("does not exist"));
  // convert / write_file never replace a FIFO, a device or a symbolic link by renaming over it.
  std::vector<std::pair<std::string, torch::Tensor>> t{{"x", torch::ones({2})}};
  CHECK_THROWS_WITH(st::write_file(fifo, t, {}), Contains("not a regular file"));
  fs::create_directories(dir / "tgt");
  fs::create_symlink(dir / "tgt" / "real.safetensors", dir / "lnk.safetensors");
  CHECK_THROWS_AS(convert_checkpoint(ck_test::fixture("tiny128.pth"), (dir / "lnk.safetensors").string()), IoError);
  CHECK(fs::is_symlink(dir / "lnk.safetensors"));
  CHECK(fs::is_fifo(fifo));
  fs::remove_all(dir);
}

TEST_CASE("names from a file are printed with control bytes escaped", "[model]") {
  const auto dir = ck_test::temp_dir("st_names");
  const std::string evil = "x\\u001b]0;PWNED\\u0007\\u0000tail";
  const auto p = write_raw(dir / "esc.safetensors",
                           "{\"" + evil + "\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", floats(1));
  const auto msg = refusal(p);
  CHECK_THAT(msg, Contains("x\\x1b]0;PWNED\\x07\\x00tail"));
  for (char c : msg) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
  fs::remove_all(dir);
}
