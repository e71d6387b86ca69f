// Whether a file holds a whole image, told from its own structure before (or after) it is
// decoded: decoders that are handed a truncated file often return a complete-looking image.
// libjpeg fills a JPEG cut at 50, 90 or 99% with grey and only prints "Premature end of JPEG
// file" (naming no file), so cv::imread's result says nothing; OpenImageIO's DPX reader
// returns the pixels it has. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corridorkey::io {

/// True when `bytes` starts like a JPEG (SOI marker FF D8 FF).
bool is_jpeg(const std::vector<uint8_t>& bytes);

/// "" when the JPEG's marker structure is whole: every segment fits in the file and an EOI
/// marker (FF D9) ends the image; otherwise why not ("ends inside the entropy-coded data",
/// ...). Walks segments by their lengths and scans entropy-coded data for the next marker,
/// so an embedded EXIF thumbnail's EOI is skipped with its APP1 segment. Bytes after EOI
/// (padding some cameras add) are allowed.
std::string jpeg_truncation(const std::vector<uint8_t>& bytes);

/// The number of bytes a DPX's pixel data needs, from the header of its first image element:
/// the element's data offset (else the file header's image offset) plus the lines, each of
/// its packing's length. 0 when it cannot be told (run-length encoded, odd bit sizes), then
/// nothing is checked. `header` holds at least the first 820 bytes of the file.
uint64_t dpx_bytes_needed(const std::vector<uint8_t>& header);

}  // namespace corridorkey::io
