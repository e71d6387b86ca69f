// Layout checks of host image views (image.h), shared by the conversions (image_view.cpp)
// and the entries that must refuse a view before the model runs (key_frame.cpp).
#pragma once

#include <corridorkey/check.h>
#include <corridorkey/image.h>

#include <cstddef>
#include <string>

namespace corridorkey::io {

/// Whether two samples of `v` may share a byte (a broadcast or as_strided array): what
/// image_from_view and copy_to_view refuse. Exact for every layout slicing and transposing
/// make; a length-1 axis never steps.
bool samples_overlap(const ImageView& v);

/// The view's layout is one the conversions can read or write: an interleaved view's rows as
/// wide as a row (the check views always had), any other view's samples apart. `E` is the
/// error type thrown, its message starting with `what`.
template <class E, class V>
void check_layout(const V& v, const std::string& what) {
  const std::size_t row = static_cast<std::size_t>(v.width) * v.channels * v.bytes_per_sample();
  if (v.interleaved())
    CK_CHECK(v.stride() >= row, E, what, ": row stride ", v.stride(), " bytes is smaller than a row");
  else
    CK_CHECK(!samples_overlap(v.view()), E, what, ": samples overlap in memory (strides in bytes: channel ",
             v.channel_stride(), ", pixel ", v.pixel_stride(), ", row ", v.row_stride(), ")");
}

}  // namespace corridorkey::io
