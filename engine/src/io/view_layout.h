// Layout checks of host image views (image.h), shared by the conversions (image_view.cpp)
// and the entries that must refuse a view before the model runs (key_frame.cpp).
#pragma once

#include <corridorkey/image.h>

namespace corridorkey::io {

/// Whether two samples of `v` may share a byte (a broadcast or as_strided array): what
/// image_from_view and copy_to_view refuse. Exact for every layout slicing and transposing
/// make; a length-1 axis never steps.
bool samples_overlap(const ImageView& v);

}  // namespace corridorkey::io
