// The safetensors format (the reference's official weights since its PR #227), read and
// written without Python: an 8-byte little-endian header length n, n bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "string", ...}}
// then the raw little-endian tensor bytes; offsets count from the end of the header.
// Nothing in the file is executed: the header is parsed by model/json_reader and every
// offset, shape and size is checked against the file before a byte of data is touched.
//
// Access::Map maps the file privately (copy-on-write) and the tensors point into the
// mapping, which lives as long as any of them: no copy, and the page cache is shared with
// other processes keying from the same file. A mapped file that is truncated or replaced
// underneath raises SIGBUS on the next touch, so Access::Read (one aligned buffer read
// with pread, the tensors point into it) is for processes that outlive one job.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace corridorkey::model::safetensors {

/// Headers above this are refused (the largest real headers are a few MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

/// By content, not by name: the first 8 bytes are a length that fits the file and the
/// bound, and the header then starts with '{'. `head` holds the file's first bytes (>= 9
/// of them to say yes).
bool looks_like(const unsigned char* head, size_t head_len, uint64_t file_size);
/// `truncated`: also a file whose header length is within the bound but reaches beyond
/// the file (a cut download), so that it is refused as a truncated safetensors file.
bool is_safetensors_file(const std::string& path, bool truncated = false);

struct TensorEntry {
  std::string name;
  std::string dtype_name;  // as written: "F32", "BF16", ...
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
};

struct Header {
  std::vector<TensorEntry> tensors;                          // in header order
  std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__, in order
  uint64_t data_offset = 0;                                  // 8 + header length
  const std::string* find_metadata(const std::string& key) const;
};

/// Parses and validates the header of a file of `file_size` bytes. `bytes` holds at least
/// the first 8 + header-length bytes of it. ModelError naming `path` (and the tensor) for:
/// a header length beyond the file or kMaxHeaderBytes, JSON that is not an object (or has
/// trailing text), a duplicate name, an unknown or unsupported dtype (sub-byte F4/F6,
/// F8_E8M0, unsigned 16-64 bit, complex), a negative or overflowing shape, offsets out of
/// the data section, overlapping, or not equal to shape x dtype size, metadata values that
/// are not strings.
Header parse_header(const char* bytes, size_t n, uint64_t file_size, const std::string& path);

enum class Access { Map, Read };

struct File {
  Header header;
  /// In header order. Each tensor keeps the mapping (or the buffer) alive.
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

/// Reads a whole file. IoError when it cannot be opened or read, ModelError (naming the
/// file) for anything parse_header refuses.
File read_file(const std::string& path, Access access);

/// The same from memory (the bytes are copied once): tests and the fuzzer.
File read_memory(const void* data, size_t size, const std::string& what);

/// The safetensors dtype name of a LibTorch dtype; ModelError for one the format lacks.
std::string dtype_name(c10::ScalarType t, const std::string& tensor);

/// Writes `tensors` (any layout; written contiguous, in the given dtype) with `metadata`:
/// tensors ordered by element size then name (as the Python package does, so every tensor
/// is aligned to its element size), header padded with spaces to 8 bytes. Written to a
/// temporary file beside `path`, checked, then renamed: a failed write leaves no file and
/// does not touch an existing one. IoError naming the path on any failure; ModelError for
/// a duplicate name or a dtype the format lacks.
void write_file(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace corridorkey::model::safetensors
