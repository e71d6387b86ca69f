// The options the plan tests start from: every field the plan may decide left open, as the
// optimized profile leaves it.
#pragma once

#include <corridorkey/options.h>

namespace corridorkey::test {

inline ModelOptions open_model() {
  ModelOptions m;
  m.model_precision = Precision::Auto;
  m.flash_attention = true;
  m.native_attention = AutoSwitch::Auto;
  m.channels_last = true;
  m.tune = TuneMode::Auto;
  return m;
}

inline EngineSettings open_engine() {
  EngineSettings e;
  e.onednn_linear = e.winograd_conv = AutoSwitch::Auto;
  e.tiled_refiner = RefinerTiling::Auto;
  e.tile_size = 512;
  return e;
}

}  // namespace corridorkey::test
