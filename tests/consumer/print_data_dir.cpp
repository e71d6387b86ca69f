// A host program linked to an installed (and moved) libcorridorkey_engine.so: prints where
// the library finds its bundled data, and reads a bundled profile from there
// (tests/consumer/relocated.sh checks that every path lies in the moved prefix).
#include <corridorkey/engine.h>
#include <corridorkey/profile.h>

#include <cstdio>

int main() {
  const corridorkey::Profile draft = corridorkey::load_profile("draft");
  std::printf("data_dir %s\nprofile_dir %s\ndefault_checkpoint %s\ndraft img_size %lld\n",
              corridorkey::data_dir().c_str(), corridorkey::profile_dir().c_str(),
              corridorkey::default_checkpoint().c_str(), static_cast<long long>(draft.engine.img_size));
  return 0;
}
