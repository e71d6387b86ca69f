// libFuzzer target: a checkpoint's config.json, parsed and bounded before any network is
// built from it (a crafted num_heads 0 used to divide by zero).
#include <corridorkey/errors.h>

#include "model/config.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto c = corridorkey::model::GreenFormerConfig::from_json(text, "fuzz.json");
    c.validate_architecture("fuzz.json");
    c.validate();
    (void)corridorkey::model::block_specs(c.encoder);
  } catch (const corridorkey::Error&) {
  }
  return 0;
}
