// The colour decisions a keyed frame carries to its outputs (RawFrame::colour, frame.h): the
// clip's or the frame's ClipColour, which output_image and write_frame_output apply; and the
// plate's header, which its EXR outputs carry (plate_metadata.h).
#pragma once

#include <corridorkey/frame.h>

#include "io/plate_metadata.h"
#include "pipeline/clip_colour.h"

#include <memory>
#include <string>

CORRIDORKEY_NAMESPACE_BEGIN

struct FrameColour {
  pipeline::ClipColour colour;
  /// The plate's windows and attributes for every EXR output; null: none (written as a
  /// plate without metadata, byte for byte as before they were carried).
  std::shared_ptr<const io::PlateMetadata> plate;
};

/// The layered output (`outputs` layered): one single-part EXR with Processed as R, G, B, A,
/// FG as FG.R, FG.G, FG.B and the matte as matte.A, each sample equal to the separate file's
/// (the same colour conversions, the same half rounding); the Processed output's
/// chromaticities, the plate's windows and attributes. IoError naming the file.
void write_layered_output(const std::string& path, const RawFrame& raw, const Image& processed,
                          const std::string& exr_compression);

CORRIDORKEY_NAMESPACE_END
