// Which LibTorch operators a forward spends its time in (bench --ops): LibTorch's own
// profiler, self time per operator name. Shows that convolutions run through oneDNN
// (aten::mkldnn_convolution) and where eager time goes.
#pragma once

#include <corridorkey/bench.h>

#include <vector>

namespace corridorkey::devtools {

/// Profiles LibTorch operators on every thread between construction and stop().
class OpProfile {
 public:
  OpProfile();
  ~OpProfile();
  /// Self time per operator, largest first (at most `top` entries).
  std::vector<OpTime> stop(size_t top);

 private:
  bool running_ = false;
};

}  // namespace corridorkey::devtools
