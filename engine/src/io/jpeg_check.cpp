#include "io/jpeg_check.h"

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first

#include <jpeglib.h>

namespace corridorkey::io {
namespace {

// libjpeg reports through callbacks; an error or a warning jumps back to the decode with its
// text. Nothing with a destructor lives between setjmp and longjmp (decode() below).
struct Errors {
  jpeg_error_mgr mgr;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<Errors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->back, 1);
}

void on_message(j_common_ptr c, int level) {
  if (level < 0) on_error(c);  // -1: a warning (corrupt data): taken as an error
}

void say_nothing(j_common_ptr) {}

/// 0 when whole; 1 with `e.message` set otherwise.
int decode(const unsigned char* data, unsigned long size, Errors& e, JSAMPLE* row, size_t row_bytes) {
  jpeg_decompress_struct d{};  // zeroed: destroy after a failed create frees nothing
  d.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = on_error;
  e.mgr.emit_message = on_message;
  e.mgr.output_message = say_nothing;
  if (setjmp(e.back)) {
    jpeg_destroy_decompress(&d);
    return 1;
  }
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, data, size);
  jpeg_read_header(&d, TRUE);
  d.dct_method = JDCT_IFAST;  // the pixels are thrown away: only the stream's validity counts
  jpeg_start_decompress(&d);
  const size_t need = static_cast<size_t>(d.output_width) * static_cast<size_t>(d.output_components);
  if (need > row_bytes) {
    std::snprintf(e.message, sizeof e.message, "a row of %zu bytes is wider than the %zu checked", need,
                  row_bytes);
    jpeg_destroy_decompress(&d);
    return 1;
  }
  while (d.output_scanline < d.output_height) {
    JSAMPROW rows[1] = {row};
    jpeg_read_scanlines(&d, rows, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return 0;
}

}  // namespace

std::string jpeg_decode_problem(const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return "empty file";
  // JPEG's widest image: 65535 pixels of 4 components.
  std::vector<JSAMPLE> row(65535u * 4u);
  Errors e{};
  if (decode(bytes.data(), static_cast<unsigned long>(bytes.size()), e, row.data(), row.size()) == 0) return "";
  return e.message;
}

}  // namespace corridorkey::io
