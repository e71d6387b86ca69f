// CORRIDORKEY_API marks what libcorridorkey_engine.so exports. Everything else in the
// library (model/, kernels/, engine internals, LibTorch and nlohmann template instances) is
// compiled with -fvisibility=hidden and stays private; tests/unit/exported_symbols.sh
// checks the exported symbol list.
#pragma once

#if defined(_WIN32)
#define CORRIDORKEY_API
#else
#define CORRIDORKEY_API __attribute__((visibility("default")))
#endif
