#include <corridorkey/errors.h>
#include <corridorkey/system.h>

#include <catch2/catch.hpp>

using namespace corridorkey;
using Catch::Matchers::Contains;

TEST_CASE("auto picks CUDA, then MPS, then CPU", "[unit]") {
  CHECK(choose_device("auto", {2, true}) == "cuda:0");
  CHECK(choose_device("auto", {0, true}) == "mps");
  CHECK(choose_device("auto", {0, false}) == "cpu");
  CHECK(choose_device("", {0, false}) == "cpu");
}

TEST_CASE("explicit devices are honoured or fail with DeviceError", "[unit]") {
  CHECK(choose_device("cpu", {1, true}) == "cpu");
  CHECK(choose_device("cuda", {1, false}) == "cuda:0");
  CHECK(choose_device("cuda:1", {2, false}) == "cuda:1");
  CHECK(choose_device("mps", {0, true}) == "mps");
  CHECK_THROWS_AS(choose_device("cuda", {0, true}), DeviceError);
  CHECK_THROWS_WITH(choose_device("cuda:2", {2, false}), Contains("only 2 CUDA device"));
  CHECK_THROWS_WITH(choose_device("mps", {1, false}), Contains("MPS is not available"));
  CHECK_THROWS_WITH(choose_device("cuda:x", {1, false}), Contains("malformed"));
  CHECK_THROWS_WITH(choose_device("tpu", {1, false}), Contains("unknown device 'tpu'"));
}

TEST_CASE("system_info reports this build", "[unit]") {
  const auto s = system_info();
  CHECK(s.torch_version == "2.15.0");
  CHECK(s.cpu_threads >= 1);
  CHECK(s.engine_version == version_string());
#ifdef CK_WITH_CUDA
  CHECK(s.cuda_build);
#else
  CHECK_FALSE(s.cuda_build);
#endif
}
