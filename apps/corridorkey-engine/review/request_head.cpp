// The parts of a request review reads itself: --listen's address, the Cookie header, a
// header of a raw request head (the guard's, before httplib parses it).
#include "review/http_guard.h"

#include <corridorkey/check.h>
#include <corridorkey/errors.h>

#include <algorithm>
#include <cctype>

namespace corridorkey::review {

Listen parse_listen(const std::string& spec) {
  CK_CHECK(spec.rfind("unix:", 0) != 0, ConfigError, "--listen ", spec,
           ": review serves a browser, which cannot reach a Unix socket; use tcp:127.0.0.1:PORT");
  CK_CHECK(spec.rfind("tcp:", 0) == 0, ConfigError, "--listen ", spec, ": expected tcp:127.0.0.1:PORT");
  const auto hp = spec.substr(4);
  const auto colon = hp.rfind(':');
  CK_CHECK(colon != std::string::npos, ConfigError, "--listen ", spec, ": expected tcp:127.0.0.1:PORT");
  Listen l;
  l.host = hp.substr(0, colon);
  if (l.host == "localhost") l.host = "127.0.0.1";
  if (l.host == "[::1]") l.host = "::1";
  CK_CHECK(l.host == "127.0.0.1" || l.host == "::1", ConfigError, "--listen ", spec,
           ": review listens on loopback only (127.0.0.1 or ::1); use an SSH tunnel to reach it "
           "from another machine");
  const auto port = hp.substr(colon + 1);
  CK_CHECK(!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos,
           ConfigError, "--listen ", spec, ": the port is not a number");
  l.port = std::stoi(port);
  CK_CHECK(l.port <= 65535, ConfigError, "--listen ", spec, ": port ", l.port, " is not in 0..65535");
  return l;
}

std::string cookie(const std::string& header, const std::string& name) {
  size_t i = 0;
  while (i < header.size()) {
    while (i < header.size() && (header[i] == ' ' || header[i] == ';')) ++i;
    const auto eq = header.find('=', i), end = header.find(';', i);
    if (eq == std::string::npos) break;
    if (header.compare(i, eq - i, name) == 0 && eq - i == name.size())
      return header.substr(eq + 1, end == std::string::npos ? std::string::npos : end - eq - 1);
    if (end == std::string::npos) break;
    i = end + 1;
  }
  return "";
}

std::string head_header(const std::string& head, const std::string& name) {
  size_t i = head.find("\r\n");
  while (i != std::string::npos && i + 2 < head.size()) {
    const size_t start = i + 2, end = head.find("\r\n", start);
    const size_t colon = head.find(':', start);
    if (end == std::string::npos) break;
    if (colon < end && colon - start == name.size() &&
        std::equal(name.begin(), name.end(), head.begin() + static_cast<std::ptrdiff_t>(start),
                   [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) ==
                                               std::tolower(static_cast<unsigned char>(b)); })) {
      size_t v = colon + 1, e = end;
      while (v < e && (head[v] == ' ' || head[v] == '\t')) ++v;
      while (e > v && (head[e - 1] == ' ' || head[e - 1] == '\t')) --e;
      return head.substr(v, e - v);
    }
    i = end;
  }
  return "";
}

}  // namespace corridorkey::review
