// Seeded random GreenFormer weights for benchmarks without a checkpoint.
#pragma once

#include "green_former.h"

namespace corridorkey::model {

/// Deterministic for a seed: linear/conv weights ~ N(0, 1/fan_in) (0.5x for the residual
/// output projections), norm weights ~ 1 + N(0, 0.1^2), biases ~ N(0, 0.02^2), BatchNorm
/// running stats non-trivial, pos_embed ~ N(0, 0.5^2), refiner.final ~ N(0, 0.01^2) so the
/// refiner contributes (upstream zero-initialises it). Keeps activations O(1) through 24
/// blocks, so timings and precision drift are representative.
void randomize_weights(GreenFormerImpl& net, uint64_t seed);

}  // namespace corridorkey::model
