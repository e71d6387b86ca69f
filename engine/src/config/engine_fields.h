// The Profile table (profile and run fields) and its cross-field checks.
#pragma once

#include "config/option_table.h"

#include <corridorkey/options.h>

namespace corridorkey::config {

const Table<Profile>& engine_table();

/// The Profile-scope keys, comma-separated: what a profile file may set.
std::string profile_keys();

/// The cross-field rules within ModelOptions (edge_threshold_low < edge_threshold_high):
/// ConfigError naming `source` and the key. Model::load and validate_profile run it.
void validate_model_options(const ModelOptions& options, const std::string& source);

/// True for "auto", "cpu", "mps", "cuda" and "cuda:N": device requests that can be
/// spelled (whether the device exists is checked when an engine is built).
bool valid_device_request(const std::string& device);

}  // namespace corridorkey::config
