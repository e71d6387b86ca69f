// libFuzzer target: the safetensors reader. The input is a whole file, read from memory
// and from disk in both access modes (mapped and read), then as a checkpoint. Anything but
// a corridorkey::Error is a finding.
#include <corridorkey/errors.h>

#include "model/checkpoint.h"
#include "model/safetensors.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = corridorkey::model::safetensors;
  try {
    (void)st::read_memory(data, size, "fuzz.safetensors");
  } catch (const corridorkey::Error&) {
  }
  const std::string path = "/tmp/ck_fuzz_st_" + std::to_string(::getpid()) + ".safetensors";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  for (auto access : {st::Access::Map, st::Access::Read}) {
    try {
      (void)st::read_file(path, access);
    } catch (const corridorkey::Error&) {
    }
  }
  try {
    (void)corridorkey::model::read_checkpoint(path);
  } catch (const corridorkey::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
