// The EngineOptions table (profile and run fields) and its cross-field checks.
#pragma once

#include "config/option_table.h"

#include <corridorkey/options.h>

namespace corridorkey::config {

const Table<EngineOptions>& engine_table();

/// True for "auto", "cpu", "mps", "cuda" and "cuda:N": device requests that can be
/// spelled (whether the device exists is checked when an engine is built).
bool valid_device_request(const std::string& device);

}  // namespace corridorkey::config
