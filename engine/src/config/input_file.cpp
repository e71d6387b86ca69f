#include "config/input_file.h"

#include <corridorkey/check.h>

#include <sys/stat.h>

namespace corridorkey::config {

std::string not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";  // missing or unreachable: the opener says
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO (named pipe), not a file";
  if (S_ISDIR(st.st_mode)) return "is a folder, not a file";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device, not a file";
  if (S_ISSOCK(st.st_mode)) return "is a socket, not a file";
  return "is not a regular file";
}

void check_input_file(const std::string& path, const std::string& what) {
  const auto why = not_a_regular_file(path);
  CK_CHECK(why.empty(), ConfigError, what, " ", path, ": ", why);
}

}  // namespace corridorkey::config
