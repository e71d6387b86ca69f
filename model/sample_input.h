// Seeded synthetic GreenFormer input for verification, parity tests and benchmarks.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace corridorkey::model {

/// [batch, 4, size, size] float32 on CPU: ImageNet-normalised uniform-noise RGB plus an alpha
/// hint shaped like a soft disc (solid core, soft band, clean background), so every branch of
/// the network sees realistic ranges. Same seed -> same tensor on every machine.
/// band_area: fraction of the frame covered by the soft (uncertain) edge of the disc;
/// 0 keeps the default 0.08 * size edge width (~15% of the frame).
torch::Tensor seeded_input(int64_t batch, int64_t size, uint64_t seed, double band_area = 0);

}  // namespace corridorkey::model
