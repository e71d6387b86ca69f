// libFuzzer target: the YAML readers of profiles and job files (strict YAML, duplicate keys,
// the option tables' parsers). Malformed input must end in a corridorkey::ConfigError.
#include <corridorkey/errors.h>
#include <corridorkey/job.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    corridorkey::Profile o;
    corridorkey::apply_profile_yaml(o, text, "fuzz.yaml");
    (void)corridorkey::to_yaml(o);
  } catch (const corridorkey::Error&) {
  }
  // The same text as a job file (relative paths resolve against /tmp; clips are not read).
  const std::string path = "/tmp/ck_fuzz_job_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  try {
    (void)corridorkey::load_job(path);
  } catch (const corridorkey::Error&) {
  }
  std::remove(path.c_str());
  // Single fields through the tables, as flags arrive.
  const auto nl = text.find('\n');
  if (nl != std::string::npos) {
    try {
      corridorkey::Profile o;
      corridorkey::set_option(o, text.substr(0, nl), text.substr(nl + 1));
    } catch (const corridorkey::Error&) {
    }
    try {
      corridorkey::InferenceOptions o;
      corridorkey::set_inference_option(o, text.substr(0, nl), text.substr(nl + 1));
    } catch (const corridorkey::Error&) {
    }
  }
  return 0;
}
