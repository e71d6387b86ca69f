// The colour decisions a keyed frame carries to its outputs (RawFrame::colour, frame.h): the
// clip's or the frame's ClipColour, which output_image and write_frame_output apply.
#pragma once

#include <corridorkey/frame.h>

#include "pipeline/clip_colour.h"

CORRIDORKEY_NAMESPACE_BEGIN

struct FrameColour {
  pipeline::ClipColour colour;
};

CORRIDORKEY_NAMESPACE_END
