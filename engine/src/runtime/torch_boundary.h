// Engine boundary: LibTorch reports failures as c10::Error; hosts get corridorkey::Error.
#pragma once

#include <corridorkey/errors.h>

#include <c10/util/Exception.h>

#include <string>
#include <utility>

namespace corridorkey::detail {

/// Runs f(); a c10::Error escaping it becomes ModelError("<context>: <torch message>").
template <typename F>
auto rethrow_torch(const std::string& context, F&& f) -> decltype(f()) {
  try {
    return std::forward<F>(f)();
  } catch (const c10::Error& e) {
    throw ModelError(context + ": " + e.what_without_backtrace());
  }
}
}  // namespace corridorkey::detail
