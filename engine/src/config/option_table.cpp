#include "config/option_table.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace corridorkey::config {

bool parse_bool(const std::string& v, bool& out) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on" || s == "1") return out = true, true;
  if (s == "false" || s == "no" || s == "off" || s == "0") return out = false, true;
  return false;
}

bool parse_int(const std::string& v, long long& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v.front()))) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  out = x;
  return true;
}

bool parse_real(const std::string& v, double& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v.front()))) return false;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  // strtod accepts "nan" and "inf": a NaN knob silently gives NaN mattes, so refuse them.
  if (*end != '\0' || errno == ERANGE || !std::isfinite(x)) return false;
  out = x;
  return true;
}

std::string format_real(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string normalise_key(std::string k) {
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

}  // namespace corridorkey::config
