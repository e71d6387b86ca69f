// A JPEG decoded once by libjpeg with its warnings taken as errors. libjpeg decodes a file
// whose entropy-coded data is corrupt (cut short but closed with an EOI marker, bytes that
// are no valid code, bytes left over) with only a warning on stderr ("Corrupt JPEG data:
// premature end of data segment"), naming no file, and cv::imread returns the greyed or
// smeared image as if it were whole. Corruption that still decodes as valid codes for every
// block cannot be told by any decoder. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corridorkey::io {

/// "" when libjpeg decodes every scanline of `bytes` without an error or a warning;
/// otherwise libjpeg's own message ("Corrupt JPEG data: ...", "Premature end of JPEG file").
/// Prints nothing. Costs one decode: the plate is then decoded again by OpenCV, so that its
/// pixels are the ones the reference's OpenCV read gives.
std::string jpeg_decode_problem(const std::vector<uint8_t>& bytes);

}  // namespace corridorkey::io
