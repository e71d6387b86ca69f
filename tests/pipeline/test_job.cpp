// Render-farm jobs: schema errors, chunk arithmetic, idempotent chunk runs, exports.
#include <corridorkey/errors.h>
#include <corridorkey/job.h>

#include <catch2/catch.hpp>

#include "devtools/synthetic_clip.h"
#include "runtime/model_factory.h"
#include "support/support.h"

#include <fstream>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
fs::path write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  return p;
}
/// Two small clips: a (5 frames) and b (3 frames), 8-bit PNG plates and hints f1.png ...
fs::path make_clips(const fs::path& root) {
  for (auto [name, n] : {std::pair<const char*, int>{"a", 5}, {"b", 3}}) {
    devtools::SyntheticClip c;
    c.frames = n;
    c.width = 64;
    c.height = 48;
    c.plate_format = c.hint_format = "png";
    c.plate_prefix = c.hint_prefix = "f";
    c.digits = 1;
    devtools::write_synthetic_clip(root / name, c);
  }
  return root;
}
}  // namespace

TEST_CASE("every frame lands in exactly one chunk, for any N", "[unit]") {
  JobFrames jf;
  jf.clip_paths = {"/x/a", "/x/b", "/x/c"};
  jf.clip_names = {"a", "b", "c"};
  jf.frames = {{1, 2, 3, 4, 5, 6, 7}, {10, 11, 12, 20}, {1}};
  for (int n = 1; n <= 15; ++n) {
    const auto chunks = plan_chunks(jf, n, 10);
    INFO("n " << n);
    REQUIRE(static_cast<int>(chunks.size()) == std::min(n, jf.total()));
    std::multiset<std::string> seen;
    size_t lo = 100, hi = 0;
    for (const auto& c : chunks) {
      size_t sz = 0;
      for (const auto& p : c.parts)
        for (int f = p.first; f <= p.last; ++f) {
          seen.insert(p.clip_name + ":" + std::to_string(f));
          ++sz;
        }
      lo = std::min(lo, sz);
      hi = std::max(hi, sz);
    }
    CHECK(seen.size() == 12);
    for (size_t c = 0; c < jf.frames.size(); ++c)
      for (int f : jf.frames[c]) CHECK(seen.count(jf.clip_names[c] + ":" + std::to_string(f)) == 1);
    CHECK(hi - lo <= 1);  // balanced
  }
  // Gaps in a clip's frame list split a part: clip b frames 10-12 and 20.
  const auto one = plan_chunks(jf, 1, 10).front();
  REQUIRE(one.parts.size() == 4);
  CHECK((one.parts[1].first == 10 && one.parts[1].last == 12 && one.parts[2].first == 20));
  CHECK(plan_chunks(jf, 0, 5).size() == 3);  // ceil(12 / 5)
  CHECK(plan_clip_chunks(jf, "a", 0, 3).size() == 3);
  CHECK_THROWS_AS(plan_clip_chunks(jf, "zz", 0, 3), ConfigError);
}

TEST_CASE("job schema errors name the key and line", "[unit]") {
  const auto dir = ck_test::temp_dir("jobschema");
  auto load = [&](const std::string& text) { return load_job(write(dir / "j.yaml", text).string()); };
  CHECK_THROWS_WITH(load("clips: [a]\nchunk_sise: 3\n"), Contains("j.yaml:2") && Contains("unknown key 'chunk_sise'"));
  CHECK_THROWS_WITH(load("clips: [a]\nchunk_size: many\n"), Contains("key 'chunk_size'") && Contains("'many'"));
  CHECK_THROWS_WITH(load("clips: [a]\nchunk_size: 0\n"), Contains("j.yaml:2: key 'chunk_size': invalid value '0'") && Contains("positive integer"));
  CHECK_THROWS_WITH(load("clips: [a]\noutputs: [fg, alpha]\n"), Contains("'fg,alpha'") && Contains("subset of fg, matte, comp, processed"));
  CHECK_THROWS_WITH(load("clips: [a]\noverrides:\n  tile_size: 100\n"), Contains("j.yaml:3") && Contains("tile_size"));
  CHECK_THROWS_WITH(load("clips:\n  - path: a\n    frames: 9-2\n"), Contains("j.yaml:3") && Contains("9-2"));
  CHECK_THROWS_WITH(load("clips: [a]\nprofile: turbo\n"), Contains("key 'profile'") && Contains("turbo"));
  CHECK_THROWS_WITH(load("name: x\n"), Contains("nothing to key"));
  CHECK_THROWS_WITH(load("clips: [a]\non_error: retry\n"), Contains("one of stop, skip"));
  CHECK_THROWS_WITH(load("clips: [a]\ndevice: foo\n"), Contains("key 'device'") && Contains("cuda:N"));
  CHECK_THROWS_WITH(load("clips: [a]\nrefiner_scale: .nan\n"), Contains("key 'refiner_scale'"));
  CHECK_THROWS_WITH(load("clips: [a]\nchunk_size: 2\nchunk_size: 3\n"), Contains("appears twice"));
  CHECK_THROWS_WITH(load("clips: [a]\nname: \"x'$(touch y)\"\n"), Contains("key 'name'"));
  CHECK_THROWS_WITH(load("clips: [a]\nskip_existing: false\n"), Contains("always skip"));
  CHECK_THROWS_WITH(load("clips: [a]\nimg_size: 100\n"), Contains("multiple of 32"));
  CHECK_THROWS_WITH(load("clips: [a\n"), Contains("not valid YAML"));
  const auto ok = load("clips: [a]\nprofile: optimized\noverrides: {tile_size: 384}\ndevice: cpu\n");
  CHECK(ok.options.engine.tile_size == 384);
  CHECK(ok.options.model.flash_attention);  // from the profile
  CHECK(ok.options.model.device == "cpu");
  const auto lst = load("clips: [a]\noutputs: [matte, comp]\ndespill: 2\nread_workers: 3\n");
  CHECK((!lst.inference.fg && lst.inference.matte && lst.inference.comp));
  CHECK(lst.options.engine.despill_strength == Approx(0.2));
  CHECK(lst.inference.read_workers == 3);
  CHECK(ok.clips.front().path == (dir / "a").lexically_normal().string());  // relative to the file
  fs::remove_all(dir);
}

// A job without a `profile` key whose default profile cannot be found (an install whose data
// folder is gone): a ConfigError naming the file, not yaml-cpp's InvalidNode from the line of
// a key the file lacks (a fuzz finding: that escaped every ConfigError handler).
TEST_CASE("a job without a profile key whose default profile is missing names the file", "[unit]") {
  const auto dir = ck_test::temp_dir("jobnoprofile");
  const auto empty = dir / "no-data";
  fs::create_directories(empty);
  const char* old = std::getenv("CORRIDORKEY_DATA_DIR");
  const std::string saved = old ? old : "";
  ::setenv("CORRIDORKEY_DATA_DIR", empty.c_str(), 1);
  const auto path = write(dir / "j.yaml", "clips: [a]\n").string();
  CHECK_THROWS_AS(load_job(path), corridorkey::ConfigError);
  CHECK_THROWS_WITH(load_job(path), Contains(path + ": key 'profile'"));
  if (old) ::setenv("CORRIDORKEY_DATA_DIR", saved.c_str(), 1);
  else ::unsetenv("CORRIDORKEY_DATA_DIR");
  fs::remove_all(dir);
}

TEST_CASE("job chunks run idempotently and resume", "[pipeline]") {
  const auto root = make_clips(ck_test::temp_dir("jobrun"));
  const auto file = write(root / "job.yaml",
                          "name: t\nclips: [a, {path: b, frames: 2-3}]\nprofile: original\n"
                          "device: cpu\nchunk_size: 3\noutput_root: out\noutputs: [matte, comp]\n");
  const auto job = load_job(file.string());
  const auto jf = job_frames(job);
  REQUIRE(jf.total() == 7);
  const auto chunks = plan_chunks(jf, 0, job.chunk_size);
  REQUIRE(chunks.size() == 3);
  // 7 frames in 3 chunks: [0,2) [2,4) [4,7): the last is a:5 and b:2-3.
  REQUIRE(chunks[2].parts.size() == 2);
  const auto loads = corridorkey::detail::checkpoint_loads();
  auto s = run_chunk(job, chunks[2]);
  CHECK(s.frames_done == 3);
  CHECK(corridorkey::detail::checkpoint_loads() == loads + 1);  // one engine for both clip parts
  CHECK(fs::exists(root / "out" / "a" / "Matte" / "f5.exr"));
  CHECK(fs::exists(root / "out" / "b" / "Matte" / "f3.exr"));
  CHECK_FALSE(fs::exists(root / "out" / "b" / "Matte" / "f1.exr"));
  CHECK_FALSE(fs::exists(root / "out" / "a" / "Matte" / "f4.exr"));
  s = run_chunk(job, chunks[2]);      // rerun: nothing to do
  CHECK(s.frames_done == 0);
  CHECK(s.frames_skipped == 3);
  fs::remove(root / "out" / "a" / "Comp" / "f2.png");  // "interrupted" chunk 1
  for (const auto& c : chunks) run_chunk(job, c);
  CHECK(fs::exists(root / "out" / "a" / "Comp" / "f2.png"));
  CHECK(fs::exists(root / "out" / "a" / "Matte" / "f5.exr"));
  // Exports reference the job file and the chunk counts.
  const auto ojd = export_openjd(job, jf, "/usr/bin/corridorkey-engine");
  CHECK_THAT(ojd, Contains("jobtemplate-2023-09") && Contains("key-a") && Contains("1-2") &&
                      Contains("{{Task.Param.Chunk}}/2"));
  const auto sb = export_slurm(job, jf, "/usr/bin/corridorkey-engine", "/tmp/logs");
  CHECK_THAT(sb, Contains("#SBATCH --array=1-3") && Contains("SLURM_ARRAY_TASK_ID}/3"));
  CHECK_THAT(sb, !Contains("--gres=gpu"));
  fs::remove_all(root);
}

TEST_CASE("a job keys clips without hints and the last chunk encodes the video", "[pipeline]") {
  const auto root = ck_test::temp_dir("jobvideo");
  devtools::SyntheticClip c;
  c.frames = 5;
  c.width = 96;
  c.height = 64;
  c.hints = false;
  devtools::write_synthetic_clip(root / "nohint", c);
  const auto file = write(root / "job.yaml",
                          "name: v\nclips: [nohint]\nprofile: original\ndevice: cpu\nchunk_size: 2\n"
                          "hint: chroma\ncolor: linear\nvideo_out: [comp]\noutputs: [matte, comp]\n");
  const auto job = load_job(file.string());
  const auto jf = job_frames(job);
  REQUIRE(jf.total() == 5);  // every plate, though there is no AlphaHint/
  const auto chunks = plan_chunks(jf, 0, job.chunk_size);
  REQUIRE(chunks.size() == 3);
  const auto mp4 = root / "nohint" / "Output" / "Comp.mp4";
  CHECK(run_chunk(job, chunks[2]).videos_written == 0);  // frames 1-4 still missing
  CHECK(run_chunk(job, chunks[0]).videos_written == 0);
  CHECK_FALSE(fs::exists(mp4));
  const auto s = run_chunk(job, chunks[1]);  // completes the sequence
  CHECK(s.frames_done == 2);
  CHECK(s.videos_written == 1);
  REQUIRE(fs::exists(mp4));
  CHECK(fs::exists(root / "nohint" / "Output" / "AlphaHint" / "plate_0005.png"));
  fs::remove_all(root);
}
