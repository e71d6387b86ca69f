// bench --roofline: each stage of a frame against what this machine's matrix unit does.
// The nominal FLOPs come from the shapes (model/flops.h); the rate is one square GEMM of
// 2048 in the precision the row ran, timed once per machine and cached beside the plans
// (tune_cache.h), so that every later roofline compares against the same number.
#pragma once

#include <corridorkey/bench.h>

#include "model/encoder_parts.h"
#include "model/flops.h"

#include <string>

namespace corridorkey::devtools {

/// The GEMM rate of `device` in `precision` ("float32", "bfloat16", "float16"; anything else
/// counts as float32): read from `cache` (tune_cache_resolve's path; "" for none), else
/// timed (warm-up, then the best of three 2048x2048x2048 products) and stored there.
/// `note` gets a line when it cannot be stored.
GemmRate gemm_rate(const std::string& device, const std::string& precision, const std::string& cache,
                   std::string& note);

/// The stages of a timed row against `rate`: encoder, decoders, refiner and the whole
/// frame (the row's median), each with its nominal GFLOP and the share of the rate it ran at.
/// `parts`, when given, is one instrumented frame's split of its encoder time
/// (`parts_encoder_ms`): its rows follow "encoder", the rest of that frame's encoder time
/// as "other".
std::vector<RooflineStage> roofline_stages(const model::FrameFlops& flops, const StageTimings& median,
                                           double total_ms, double rate_gflops,
                                           const model::EncoderPartTimes* parts = nullptr,
                                           double parts_encoder_ms = 0);

}  // namespace corridorkey::devtools
