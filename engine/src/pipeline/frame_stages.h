// The stages every frame goes through, whichever way it comes in (BaseEngine::process_frame,
// key_frame, the clip pipeline, `serve`), so a frame gives the same bits every way:
//
//   decide    the colour, the backing and the model (ClipPlan): one clip's for the pipeline,
//             one frame's for the others; the backing by decide_screen, the model by
//             choose_model, nowhere else
//   prepare   plate and hint to the model's input (prepare_frame): grey to RGB, NaN / Inf to 0,
//             decoded to scene-linear Rec.709, negatives clamped, the hint generated when none
//             is given, green and blue swapped for the other backing, both resized
//   infer     the engine's model on it (infer_frame)
//   to-plate  alpha and fg back at the plate's size and in its channel order (to_plate)
//   finish    despeckle, despill, premultiply, comp (finish_frame), each output in the colour
//             space decided for it (output_image), written (write_frame_output) (frame.h)
//
// The pipeline runs prepare on its reader threads, infer on its inference thread and
// to-plate and finish on its writer threads; the single-frame entries run them in a row.
#pragma once

#include <corridorkey/engine.h>
#include <corridorkey/frame.h>
#include <corridorkey/hint.h>

#include "pipeline/clip_plan.h"
#include "pipeline/frame_items.h"
#include "runtime/engine_impl.h"

#include <functional>
#include <string>
#include <vector>

namespace corridorkey::pipeline {

/// The one screen decision, for a clip (its first, middle and last plates) or a frame (itself).
/// Hints given and a backing named: that backing, no plate read. Otherwise estimated from
/// `plates()` (plates as read: they are decoded and sRGB-encoded here, as the model sees
/// them), restricted to `asked` unless Auto. When no backing is found, or no plate can be
/// read: IoError when the hints are to be generated from it, else green with a warning that
/// names `setting` (how to set it: "--screen green|blue").
ScreenEstimate decide_screen(const std::function<std::vector<Image>()>& plates,
                             const ClipColour& colour, Screen asked, bool generate_hint,
                             const std::string& what, const std::string& setting,
                             std::vector<std::string>& warnings);

/// A blue backing is keyed by the blue-screen model when there is one and the main model is
/// not a blue-screen model itself (the rule choose_model applies).
bool keys_with_blue_model(Screen backing, Screen main_model_screen);

/// Which model keys a plate, and how: what choose_model decides.
struct ModelChoice {
  EngineAccess::Impl* engine = nullptr;  // the main engine's, or the blue-screen engine's
  bool blue_model = false;               // the blue-screen model (checkpoint_blue) keys it
  bool swap_gb = false;                  // green and blue swapped around the model
  int64_t model_size = 0;                // that engine's img_size
  std::string checkpoint;                // that engine's checkpoint, as EngineInfo names it
};

/// The one model decision, for every entry (the clip pipeline per clip, key_frame and
/// process_frame, Python, serve and review per frame): a plate on `backing` goes to the
/// blue-screen engine when keys_with_blue_model says so and `blue` gives one (it is asked
/// only then, and only when `needed`: a clip with no frames to key loads nothing), else to
/// `main`; green and blue are swapped around a model whose own backing is not the plate's.
/// `blue` may load the model (its errors, prefixed "checkpoint_blue: ", propagate).
ModelChoice choose_model(BaseEngine& main, const std::function<BaseEngine*()>& blue, Screen backing,
                         bool needed = true);

/// One frame's pre-processing, as the plan says: NaN / Inf to 0 (warned), grey plates to
/// RGB, decoded, negatives clamped, the hint generated (and written to <out>/AlphaHint/ when
/// the plan has an output folder; copied to *generated_hint when given), green and blue
/// swapped, both resized to the model's size on `device` (the pipeline's readers: the CPU).
/// `plate_meta`: an overscan plate's (read_plate) places a display-size hint on its display
/// window, the overscan getting a generated hint. `mattes` (frame_mattes): the garbage matte
/// multiplies the hint (given or generated) before the model; both travel on in the item.
/// Throws IoError naming `file`, or the hint file when an overscan plate's hint is the size
/// of neither window.
ReadItem prepare_frame(const ClipPlan& plan, size_t clip, int index, Image plate, Image hint,
                       const std::string& file, double read_ms, Image* generated_hint = nullptr,
                       const torch::Device& device = torch::kCPU,
                       const io::PlateMetadata* plate_meta = nullptr,
                       std::shared_ptr<const FrameMattes> mattes = nullptr);

/// The engine's model on a prepared input: moved to its device (pinned, asynchronously, to
/// CUDA), run, its outputs checked finite (ModelError naming `what`). Fills the timings of
/// the model's stages and infer_ms; the run's own warnings (on_oom) are appended to
/// `warnings` first, so they are told also when the frame then fails.
detail::ModelRun infer_frame(EngineAccess::Impl& engine, const torch::Tensor& x, const std::string& what,
                             StageTimings& timings, std::vector<std::string>& warnings);

/// The model's outputs at the plate's size and in its channel order: alpha, and fg when
/// `with_fg`, Lanczos-resized to width x height; fg's green and blue swapped back for a
/// frame keyed swapped; raw.mattes (when set) applied to alpha (post::apply_mattes). Adds
/// its time to timings.postprocess_ms.
void to_plate(const Image& alpha_model, const Image& fg_model, int width, int height, bool swapped,
              bool with_fg, RawFrame& raw);

}  // namespace corridorkey::pipeline
