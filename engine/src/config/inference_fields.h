// The InferenceOptions table: what the clip pipeline reads and writes.
#pragma once

#include "config/option_table.h"

#include <corridorkey/options.h>

namespace corridorkey::config {

const Table<InferenceOptions>& inference_table();

}  // namespace corridorkey::config
