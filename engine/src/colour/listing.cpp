// The public listing (corridorkey/colour.h) behind `corridorkey-engine colorspaces`.
#include <corridorkey/colour.h>

#include "colour/spaces.h"

CORRIDORKEY_NAMESPACE_BEGIN

std::vector<ColourSpaceInfo> list_colour_spaces(const std::string& ocio_config) {
  std::vector<ColourSpaceInfo> v;
  for (const auto& b : colour::builtin_spaces()) {
    colour::Space s;
    s.name = b.name;
    s.builtin = &b;
    v.push_back({b.name, "built-in", b.ocio, s.linear_title()});
  }
  const auto file = colour::config_file(ocio_config);
  if (!file.empty())
    for (const auto& n : colour::config_space_names(file)) v.push_back({n, file, "", ""});
  return v;
}

CORRIDORKEY_NAMESPACE_END
