// Colour conversions of float RGB pixels on the CPU through OpenColorIO's CPU processor.
// The working space of the engine is scene-linear Rec.709: a plate is decoded to it (then
// keyed as the `--linear` path keys), and the outputs are encoded from it. Torch-free; the
// OCIO types stay in conversion.cpp.
#pragma once

#include "colour/spaces.h"

#include <cstdint>
#include <memory>
#include <string>

namespace corridorkey::colour {

class Conversion {
 public:
  Conversion();  // the identity
  /// Exactly the identity: apply() leaves every value as it is (and is not called).
  bool identity() const;
  /// In place: `pixels` pixels of `channels` floats (1: grey is left alone; RGB first, a
  /// 4th channel passes through), over `threads` threads (the result is the same for any
  /// count). Thread-safe (OCIO CPU processors are).
  void apply(float* data, int64_t pixels, int channels, int threads = 1) const;
  /// What it does, for the per-clip message: "ARRI_ALEXA-LOGC-EI800-AWG_to_ACES2065-1, ...".
  const std::string& description() const;

  struct Impl;
  explicit Conversion(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

/// The space's values to scene-linear Rec.709 (a plate's decode).
Conversion to_working(const Space& s);
/// Scene-linear Rec.709 to the space: its linear form (`linear_form`: the Processed EXR,
/// linear AWG3 for arri-logc3-ei800-awg) or its full encoding (LogC values, for --fg-colorspace).
Conversion from_working(const Space& s, bool linear_form);
/// Scene-linear Rec.709 to a display / view of the config (--comp-view DISPLAY/VIEW).
Conversion working_to_view(const std::string& config_file, const std::string& display_view);

}  // namespace corridorkey::colour
