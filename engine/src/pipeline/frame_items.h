// What travels between the pipeline's stages.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/frame.h>

#include "io/plate_metadata.h"
#include "pipeline/dma_ring.h"

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

/// One unit of reading: a frame of an image sequence, or (index -1) a whole video clip,
/// which one reader decodes in order.
struct FrameTask {
  size_t clip = 0;
  int index = 0;
};

/// A pre-processed frame (or the error that stopped it) on its way to inference.
struct ReadItem {
  size_t clip = 0;
  int index = 0;
  std::string stem, file;
  int width = 0, height = 0;
  torch::Tensor x;        // [1,4,S,S] CPU float
  StageTimings timings;   // read_ms, preprocess_ms
  std::string error;      // non-empty: the frame failed before inference
  std::vector<std::string> warnings;
  /// What the plate's header carries to its EXR outputs; null: nothing (a PNG plate).
  std::shared_ptr<const io::PlateMetadata> plate;
  /// The frame's garbage and holdout mattes at the plate's size; null: none.
  std::shared_ptr<const FrameMattes> mattes;

  static ReadItem failed(size_t clip, int index, std::string stem, std::string file,
                         std::string error) {
    ReadItem it;
    it.clip = clip;
    it.index = index;
    it.stem = std::move(stem);
    it.file = std::move(file);
    it.error = std::move(error);
    return it;
  }
};

/// An inferred frame: model-resolution alpha / fg on their way to the host.
struct WriteItem {
  ReadItem meta;
  detail::DmaRing::Ticket outputs;
};

}  // namespace corridorkey::pipeline
