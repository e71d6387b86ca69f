// convert_checkpoint (checkpoint.h): any loadable checkpoint written as safetensors.
#include <corridorkey/check.h>
#include <corridorkey/checkpoint.h>
#include <corridorkey/engine.h>

#include "model/checkpoint.h"
#include "model/green_former.h"
#include "model/safetensors.h"
#include "runtime/torch_boundary.h"

#include <filesystem>

CORRIDORKEY_NAMESPACE_BEGIN

namespace fs = std::filesystem;

ConvertReport convert_checkpoint(const std::string& input, const std::string& output) {
  std::error_code ec;
  CK_CHECK(!output.empty(), ConfigError, "convert: no output file given");
  CK_CHECK(!fs::is_directory(output, ec), ConfigError, output,
           ": is a folder; name the .safetensors file to write");
  ConvertReport rep;
  return detail::rethrow_torch("converting " + input, [&] {
    torch::NoGradGuard no_grad;
    auto ck = model::read_checkpoint(input, {/*mmap=*/false});
    rep.input = ck.path;
    CK_CHECK(!(fs::exists(output, ec) && fs::equivalent(ck.path, output, ec)), ConfigError, output,
             ": is the input checkpoint itself; write the safetensors file elsewhere");
    rep.input_format = model::to_string(ck.format);
    rep.arch = ck.config.arch;
    rep.img_size = ck.config.img_size;
    rep.ignored = ck.ignored_entries;
    {  // What is written must key: the network is built and loaded strictly first.
      model::GreenFormer net(ck.config);
      model::load_weights(*net, ck);
    }
    std::vector<std::pair<std::string, std::string>> meta{
        {"format", "pt"},  // what safetensors.torch writes; other readers look for it
        {model::kConfigMetadataKey, ck.config.to_json()},
        {"corridorkey_source_format", rep.input_format}};
    model::safetensors::write_file(output, ck.tensors, meta);
    for (const auto& [k, t] : ck.tensors) {
      ++rep.tensors;
      rep.bytes += static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
    }
    rep.output = output;
    // Read back as the engine reads it: same keys, dtypes, shapes and bytes.
    const auto back = model::read_checkpoint(output, {/*mmap=*/false});
    CK_CHECK(back.tensors.size() == ck.tensors.size(), IoError, output, ": read back ",
             back.tensors.size(), " tensors, wrote ", ck.tensors.size());
    for (const auto& [k, t] : ck.tensors) {
      const auto* b = back.find(k);
      CK_CHECK(b && b->scalar_type() == t.scalar_type() && b->sizes() == t.sizes() &&
                   (t.numel() == 0 || torch::equal(b->view(torch::kByte), t.contiguous().view(torch::kByte))),
               IoError, output, ": tensor '", k, "' did not read back bit-identical");
    }
    return rep;
  });
}

CORRIDORKEY_NAMESPACE_END
