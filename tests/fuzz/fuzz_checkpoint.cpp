// libFuzzer target: the checkpoint reader. The first byte chooses what the rest is:
// a raw pickle for the restricted unpickler (torch.save and TorchScript modes), or a whole
// file for read_checkpoint (zip archive, legacy stream, TorchScript archive). Anything but a
// corridorkey::Error is a finding.
#include <corridorkey/errors.h>

#include "model/checkpoint.h"
#include "model/torch_pickle.h"

#include <ATen/Context.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const char* body = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;
  namespace pk = corridorkey::model::pickle;
  try {
    if (data[0] % 3 != 2) {
      pk::UnpickleOptions opt;
      opt.what = "fuzz.pkl";
      opt.torchscript = data[0] % 3 == 1;
      opt.load_storage = [](const std::string&, c10::ScalarType, uint64_t nbytes) {
        if (nbytes > (uint64_t{1} << 20)) throw corridorkey::ModelError("fuzz: storage too large");
        return c10::Storage(c10::Storage::use_byte_size_t(), static_cast<int64_t>(nbytes),
                            at::getCPUAllocator());
      };
      (void)pk::unpickle(body, n, opt);
    } else {
      const std::string path = "/tmp/ck_fuzz_ckpt_" + std::to_string(::getpid()) + ".pth";
      {
        std::ofstream f(path, std::ios::binary);
        f.write(body, static_cast<std::streamsize>(n));
      }
      try {
        (void)corridorkey::model::read_checkpoint(path);
      } catch (const corridorkey::Error&) {
      }
      std::remove(path.c_str());
    }
  } catch (const corridorkey::Error&) {
  }
  return 0;
}
