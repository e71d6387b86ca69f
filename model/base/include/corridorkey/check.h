// CK_CHECK, the engine's check macro (in the style of TORCH_CHECK): throws one of the typed
// errors of errors.h with the message parts joined in the classic locale. It lives with the
// errors in model/base (ck_errors), so model/ and every layer above it use one macro. Never
// installed: the installed headers do not carry it, so a host's own CK_CHECK (or none)
// never meets ours.
#pragma once

#include <corridorkey/errors.h>

#include <locale>
#include <sstream>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

namespace errors_detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  os.imbue(std::locale::classic());  // 0.5 and 1920 in a message, whatever the host's locale
  (os << ... << args);
  return os.str();
}
}  // namespace errors_detail

CORRIDORKEY_NAMESPACE_END

/// CK_CHECK(cond, ErrorType, message parts...): throw ErrorType(message) when cond is false.
#define CK_CHECK(cond, ErrorType, ...)                                  \
  do {                                                                  \
    if (!(cond)) throw ErrorType(::corridorkey::errors_detail::str_cat(__VA_ARGS__)); \
  } while (0)
