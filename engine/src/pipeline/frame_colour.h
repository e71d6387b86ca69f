// The colour decisions a keyed frame carries to its outputs (RawFrame::colour, frame.h): the
// clip's or the frame's ClipColour, which output_image, write_frame_output and
// write_layered_output apply; and the plate's header, which its EXR outputs carry
// (plate_metadata.h).
#pragma once

#include <corridorkey/frame.h>

#include "io/plate_metadata.h"
#include "pipeline/clip_colour.h"

#include <memory>

CORRIDORKEY_NAMESPACE_BEGIN

struct FrameColour {
  pipeline::ClipColour colour;
  /// The plate's windows and attributes for every EXR output; null: none (written as a
  /// plate without metadata, byte for byte as before they were carried).
  std::shared_ptr<const io::PlateMetadata> plate;
};

CORRIDORKEY_NAMESPACE_END
