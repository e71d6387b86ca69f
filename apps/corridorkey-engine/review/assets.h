// The page's files (review/web/), embedded in the binary at build time
// (cmake/CKEmbedAssets.cmake): no network, no files read at run time.
#pragma once

#include <cstddef>

namespace corridorkey::review {

struct Asset {
  const char* name;  // "index.html", "app.js", ...
  const char* type;  // its Content-Type
  const unsigned char* data;
  std::size_t size;
};

extern const Asset kAssets[];
extern const std::size_t kAssetCount;

}  // namespace corridorkey::review
