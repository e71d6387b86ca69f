// Exact tiled CNN refiner.
//
// GroupNorm statistics are image-global, so a refiner run tile by tile with per-tile
// statistics is NOT the same network (the reference fork's tiling is off by up to 0.5 in
// alpha for that reason). This tiler is exact: it walks the refiner layer by layer and, for
// every GroupNorm, first gathers the image-global statistics over all tiles, then applies
// them. Each tile reads exactly the halo its convolutions need (dilation d: d px per conv),
// with zeros only at the true image border, so every pixel is computed exactly once from
// the same inputs as the untiled network ("no duplicate tiles", nothing to blend).
//
// Working memory: one full-resolution 64-channel map (the block input, updated in place)
// plus a few tile-sized buffers, instead of 4 such maps for the untiled refiner (measured:
// 331 MiB vs 1024 MiB at 1024x1024, tile 256). Cost: each residual block's two convolutions
// run 5 times instead of 2 (statistics of GN1, of GN2, then the output), 2.5x the conv
// FLOPs; on CPU cache-sized tiles win that back (4.98 s vs 5.37 s untiled, same run).
// Numbers: `corridorkey-engine bench --refiner-only`, docs/performance.md.
#pragma once

#include "refiner.h"

namespace corridorkey::model {

struct TiledRefinerOptions {
  int64_t tile_size = 512;  // tile side in output pixels
};

/// input: [B, 7, H, W] (normalised rgb, coarse alpha, coarse fg). Returns the same as
/// refiner.forward_input(input) (delta logits * 10) up to float summation order.
torch::Tensor tiled_refiner_forward(CNNRefinerImpl& refiner, const torch::Tensor& input,
                                    const TiledRefinerOptions& options = {});

}  // namespace corridorkey::model
