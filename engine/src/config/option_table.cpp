#include "config/option_table.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <locale>
#include <sstream>

namespace corridorkey::config {

std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool parse_bool(const std::string& v, bool& out) {
  const std::string s = lower_case(v);
  if (s == "true" || s == "yes" || s == "on" || s == "1") return out = true, true;
  if (s == "false" || s == "no" || s == "off" || s == "0") return out = false, true;
  return false;
}

// Numbers are read and printed with std::from_chars / the classic locale, never through
// strtod or a stream in the global locale: a host that calls setlocale(LC_ALL, "de_DE")
// would otherwise read "0.5" as 0 (strtod stops at the '.') and print 0,5.
namespace {
// from_chars takes no leading '+'; strtod did, so "+2" keeps working.
const char* skip_plus(const std::string& v) {
  const char* b = v.data();
  if (v.size() > 1 && b[0] == '+' && b[1] != '-' && b[1] != '+') ++b;
  return b;
}
}  // namespace

bool parse_int(const std::string& v, long long& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v.front()))) return false;
  const char* end = v.data() + v.size();
  long long x = 0;
  const auto r = std::from_chars(skip_plus(v), end, x, 10);
  if (r.ec != std::errc() || r.ptr != end) return false;  // trailing text or out of range
  out = x;
  return true;
}

bool parse_real(const std::string& v, double& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v.front()))) return false;
  const char* end = v.data() + v.size();
  double x = 0;
  const auto r = std::from_chars(skip_plus(v), end, x, std::chars_format::general);
  // from_chars accepts "nan" and "inf": a NaN knob silently gives NaN mattes, so refuse them.
  if (r.ec != std::errc() || r.ptr != end || !std::isfinite(x)) return false;
  out = x;
  return true;
}

std::string format_real(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
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
