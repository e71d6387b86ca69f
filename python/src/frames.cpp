// Engine.process_frame: numpy arrays, buffers and CPU DLPack tensors in and out with no
// copy here. A plate or hint is read where it lies through an ImageView of its strides
// (channels reversed or sliced, Fortran order and negative steps too: the engine's
// conversion to float is the only copy); outputs are the engine's own buffers, handed to
// numpy, or written into the caller's arrays (`out`), at their strides.
//
// Per frame it is `corridorkey-engine inference`'s frame, through the public key_frame over
// the arrays' views (frame.h), as a C++ host calls it: reading, NaN clean-up, colour, a
// generated hint where none is given, the garbage and holdout mattes (read in place too),
// the backing estimated where it is "auto", the model (the blue-screen one for a blue plate
// when the Model names checkpoint_blue), the resize, then the one finish-and-deliver
// (despeckle, despill, premultiply, comp; each output in its colour space, into the caller's
// `out` array or a new one).
#include "binding.h"

#include <corridorkey/errors.h>
#include <corridorkey/frame.h>
#include <corridorkey/hint.h>
#include <corridorkey/report_json.h>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <limits>
#include <chrono>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <tuple>
#include <utility>
#include <cstring>
#include <thread>

namespace corridorkey::python {
namespace {

using Array = nb::ndarray<nb::ro>;  // any dtype, shape, strides and device: checked below

/// A dtype as numpy names it ("uint8", "int32", "bool", "complex64", "bfloat16", ...).
std::string dtype_name(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  const std::string bits = std::to_string(t.bits);
  std::string n = code == C::UInt ? "uint" + bits : code == C::Int ? "int" + bits : code == C::Float ? "float" + bits
                  : code == C::Bfloat ? "bfloat" + bits : code == C::Complex ? "complex" + bits
                  : code == C::Bool ? "bool" : "an unknown type (code " + std::to_string(t.code) + ")";
  if (t.lanes != 1) n += " x" + std::to_string(t.lanes);
  return n;
}

template <class A>
PixelType pixel_type(const A& a, const std::string& what, bool out) {
  const auto t = a.dtype();
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == 16)
    return PixelType::Float16;
  if (t == nb::dtype<float>()) return PixelType::Float32;
  if (!out && t == nb::dtype<uint8_t>()) return PixelType::UInt8;
  if (!out && t == nb::dtype<uint16_t>()) return PixelType::UInt16;
  throw ConfigError(what + ": dtype " + dtype_name(t) + " is not taken (" +
                    (out ? "float16 or float32" : "uint8, uint16, float16 or float32") + ")");
}

/// Frames (1, or B of a leading batch dimension), height, width, channels of an image array,
/// and its byte strides (signed; 0 along an axis of length 1: derived, see image.h).
struct Layout {
  int64_t frames = 1, height = 0, width = 0, channels = 1;
  int64_t frame_stride = 0, row_stride = 0, pixel_stride = 0, channel_stride = 0;
};

/// The axis ("frame", "row", "pixel", "channel") whose step lands among the bytes the finer
/// axes span, or nullptr when no two samples share a byte: the axes sorted by the size of
/// their strides, each must step past all the finer ones cover (image.h's rule, with frames).
const char* overlapping_axis(const Layout& l, int64_t item) {
  struct Axis {
    int64_t n, step;
    const char* name;
  };
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto size = [](int64_t s) { return s == std::numeric_limits<int64_t>::min() ? kMax : s < 0 ? -s : s; };
  Axis axes[] = {{l.channels, size(l.channel_stride), "channel"}, {l.width, size(l.pixel_stride), "pixel"},
                 {l.height, size(l.row_stride), "row"}, {l.frames, size(l.frame_stride), "frame"}};
  std::stable_sort(std::begin(axes), std::end(axes), [](const Axis& a, const Axis& b) { return a.step < b.step; });
  int64_t span = item;
  for (const Axis& a : axes) {
    if (a.n <= 1) continue;
    if (a.step < span) return a.name;
    span = a.step > (kMax - span) / (a.n - 1) ? kMax : a.step * (a.n - 1) + span;
  }
  return nullptr;
}

/// An image array's layout: [B,]H,W[,C], B present when `batched`, C in `channels` (a
/// missing C is 1). Any strides are read in place (rows of a crop, channels reversed as
/// [..., ::-1] leaves a BGR image, a channel slice, Fortran order, negative steps); what
/// no stride describes is refused by name: samples or frames that share memory (a
/// broadcast or as_strided array), an array off the CPU.
template <class A>
Layout layout_of(const A& a, const std::string& what, std::initializer_list<int64_t> channels, bool batched) {
  if (a.device_type() != nb::device::cpu::value)
    throw ConfigError(what + ": a tensor on a " + (a.device_type() == nb::device::cuda::value ? "CUDA" : "non-CPU") +
                      " device; the engine keys from host memory (move it first, e.g. tensor.cpu())");
  const size_t nd = a.ndim(), b = batched ? 1 : 0;
  std::string allowed;
  for (const int64_t c : channels) allowed += (allowed.empty() ? "" : " or ") + std::to_string(c);
  if (nd < b + 2 || nd > b + 3)
    throw ConfigError(what + ": " + std::to_string(nd) + (nd == 1 ? " dimension" : " dimensions") + "; expected " +
                      (batched ? "B x " : "") + "H x W" + " (x C, C " + allowed + ")");
  Layout l;
  const int64_t item = static_cast<int64_t>(a.itemsize());
  const bool has_c = nd == b + 3;
  if (b) l.frames = static_cast<int64_t>(a.shape(0));
  l.height = static_cast<int64_t>(a.shape(b));
  l.width = static_cast<int64_t>(a.shape(b + 1));
  l.channels = has_c ? static_cast<int64_t>(a.shape(b + 2)) : 1;
  if (std::find(channels.begin(), channels.end(), l.channels) == channels.end())
    throw ConfigError(what + ": " + std::to_string(l.channels) + " channel(s); expected " + allowed);
  if (l.frames < 1 || l.height < 1 || l.width < 1) throw ConfigError(what + ": an empty array");
  // The engine's images are indexed by int: no side past 2^31 - 1, no frame past 2^31 samples.
  constexpr int64_t kMaxSide = std::numeric_limits<int>::max();
  if (l.width > kMaxSide || l.height > kMaxSide || l.width * l.height > kMaxSide / l.channels)
    throw ConfigError(what + ": " + std::to_string(l.width) + " x " + std::to_string(l.height) +
                      " pixels is more than a frame may hold (2^31 samples)");
  // A stride along an axis of length 1 says nothing (numpy's relaxed strides give them any
  // value): 0 there, which the view derives and the overlap check skips.
  auto bytes = [&](size_t axis, int64_t n) { return n > 1 ? static_cast<int64_t>(a.stride(axis)) * item : 0; };
  if (b) l.frame_stride = bytes(0, l.frames);
  l.row_stride = bytes(b, l.height);
  l.pixel_stride = bytes(b + 1, l.width);
  l.channel_stride = has_c ? bytes(b + 2, l.channels) : 0;
  if (const char* axis = overlapping_axis(l, item)) {
    const std::string strides = "strides in bytes: " + (b ? "frame " + std::to_string(l.frame_stride) + ", " : "") +
                                "row " + std::to_string(l.row_stride) + ", pixel " + std::to_string(l.pixel_stride) +
                                ", channel " + std::to_string(l.channel_stride) + ", sample " + std::to_string(item);
    throw ConfigError(what + ": " + (std::string(axis) == "frame" ? "frames" : "samples") + " overlap in memory (" +
                      strides + "; the " + axis + " step lands inside what the finer axes span" +
                      (what.rfind("out[", 0) == 0 ? "): pass an array of its own"
                                                  : ", a broadcast or as_strided array?): pass numpy.ascontiguousarray(" +
                                                        what + ")"));
  }
  return l;
}

/// Frame `frame` of an array as a view of its own memory, at its strides (0s derived).
template <class View, class A>
View view_of(const A& a, const Layout& l, PixelType t, int64_t frame) {
  using Byte = typename View::Byte;
  return {static_cast<Byte*>(a.data()) + frame * l.frame_stride, static_cast<int>(l.width), static_cast<int>(l.height),
          static_cast<int>(l.channels), t, l.row_stride, l.pixel_stride, l.channel_stride};
}

/// Between the frames of a batch, with the GIL released: whether Python has a signal to
/// act on (the main thread's Ctrl-C). Its exception is left set, to be raised.
bool interrupted() {
  if (closing() || finalizing()) return true;
  nb::gil_scoped_acquire gil;
  if (PyThreadState_Get() != nullptr && PyGILState_GetThisThreadState() != nullptr && _PyOS_IsMainThread())
    return PyErr_CheckSignals() != 0;
  return false;
}

/// The error being handled, of its own type, its message naming the batch's frame
/// ("plate[3]: ...").
[[noreturn]] void rethrow_naming_frame(int64_t i) {
  const std::string p = "plate[" + std::to_string(i) + "]: ";
  try {
    throw;
  } catch (const IoError& x) {
    throw IoError(p + x.what());
  } catch (const ConfigError& x) {
    throw ConfigError(p + x.what());
  } catch (const ModelError& x) {
    throw ModelError(p + x.what());
  } catch (const DeviceError& x) {
    throw DeviceError(p + x.what());
  } catch (const Error& x) {
    throw Error(p + x.what());
  }
}

Screen screen_named(const std::string& s) {
  if (s == "auto") return Screen::Auto;
  if (s == "green") return Screen::Green;
  if (s == "blue") return Screen::Blue;
  throw ConfigError("screen: '" + s + "' is not auto, green or blue");
}

enum Want { kMatte = 1, kFg = 2, kProcessed = 4, kComp = 8 };

int wanted(const std::vector<std::string>& outputs) {
  int w = 0;
  for (const auto& o : outputs) {
    if (o == "matte") w |= kMatte;
    else if (o == "fg") w |= kFg;
    else if (o == "processed") w |= kProcessed;
    else if (o == "comp") w |= kComp;
    else throw ConfigError("outputs: '" + o + "' is not matte, fg, processed or comp");
  }
  if (!w) throw ConfigError("outputs: none asked for");
  return w;
}

/// A float32 array owning the engine's buffer (no copy): [B,]H,W[,C].
nb::object to_numpy(std::vector<float>&& pixels, int64_t frames, int64_t h, int64_t w, int64_t c, bool batch) {
  auto* owner = new std::vector<float>(std::move(pixels));
  nb::capsule free(owner, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  std::vector<size_t> shape;
  if (batch) shape.push_back(static_cast<size_t>(frames));
  shape.push_back(static_cast<size_t>(h));
  shape.push_back(static_cast<size_t>(w));
  if (c > 1) shape.push_back(static_cast<size_t>(c));
  return nb::cast(nb::ndarray<nb::numpy, float>(owner->data(), shape.size(), shape.data(), free));
}

/// One output for every frame: the engine's images (one frame), stacked (a batch), or
/// written into the caller's array (`out`).
struct OutputSlot {
  const char* name;
  int64_t channels;
  nb::object out;          // the caller's array, or None
  nb::ndarray<> out_array;
  Layout out_layout;
  PixelType out_type = PixelType::Float32;
  std::vector<float> pixels;
};

}  // namespace

void bind_frames(nb::class_<PyEngine>& engine) {
  engine.def(
      "process_frame",
      [](PyEngine& e, Array plate, std::optional<Array> hint, const std::string& screen,
         const std::string& input_colorspace, const std::vector<std::string>& outputs,
         std::optional<nb::dict> out, std::optional<std::string> output_colorspace,
         std::optional<std::string> fg_colorspace, std::optional<std::string> comp_view,
         std::optional<Array> garbage, std::optional<Array> holdout) {
        // A plate is HxW (grey), HxWxC or BxHxWxC; the hint, the mattes and `out` follow its batch.
        const bool batch = plate.ndim() == 4;
        const Layout pl = layout_of(plate, "plate", {1, 3, 4}, batch);
        const PixelType pt = pixel_type(plate, "plate", false);
        std::optional<Layout> hl;
        PixelType ht = PixelType::Float32;
        auto same_frames = [&](const Layout& l, const std::string& what) {
          if (l.frames != pl.frames || l.height != pl.height || l.width != pl.width)
            throw ConfigError(what + ": " + (batch ? std::to_string(l.frames) + " frame(s) of " : std::string()) +
                              std::to_string(l.width) + "x" + std::to_string(l.height) + " against the plate's " +
                              (batch ? std::to_string(pl.frames) + " of " : std::string()) +
                              std::to_string(pl.width) + "x" + std::to_string(pl.height));
        };
        if (hint) {
          hl = layout_of(*hint, "hint", {1}, batch);
          ht = pixel_type(*hint, "hint", false);
          same_frames(*hl, "hint");
        }
        // A matte is read as a hint file is (frame.h's MatteViews): any channel count a matte
        // image has, reduced by the engine. Checked here, before any frame is keyed, so a
        // wrong size names the argument rather than a frame of the batch.
        struct MatteArg {
          const std::optional<Array>& array;
          const char* what;
          Layout layout;
          PixelType type = PixelType::Float32;
        };
        MatteArg mattes[] = {{garbage, "garbage", {}}, {holdout, "holdout", {}}};
        for (auto& m : mattes)
          if (m.array) {
            m.layout = layout_of(*m.array, m.what, {1, 2, 3, 4}, batch);
            m.type = pixel_type(*m.array, m.what, false);
            same_frames(m.layout, m.what);
          }
        const int want = wanted(outputs);
        FrameSettings settings;
        settings.screen = screen_named(screen);
        // "auto" reads a file's metadata (EXR: linear); an array has none: its space is named.
        if (input_colorspace.empty() || input_colorspace == "auto")
          throw ConfigError("input_colorspace: '" + input_colorspace + "' names no colour space; an array has no "
                            "metadata to tell it by (\"srgb\", \"linear\", a camera space: corridorkey-engine "
                            "colorspaces)");
        settings.input_colorspace = input_colorspace;
        // Given: the output in that space, as `inference --output-colorspace / --fg-colorspace
        // / --comp-view` writes it (output_image). Not given: as the model and post-processing
        // give it (processed linear Rec.709, fg and comp sRGB), whatever the input's space.
        for (auto [arg, field, what] : {std::tuple{&output_colorspace, &settings.output_colorspace, "output_colorspace"},
                                        std::tuple{&fg_colorspace, &settings.fg_colorspace, "fg_colorspace"},
                                        std::tuple{&comp_view, &settings.comp_view, "comp_view"}})
          if (*arg) {
            if ((*arg)->empty()) throw ConfigError(std::string(what) + ": '' names no colour space (None: unconverted)");
            *field = **arg;
          }
        std::vector<OutputSlot> slots;
        for (auto [flag, name, c] : {std::tuple{kMatte, "matte", int64_t{1}}, std::tuple{kFg, "fg", int64_t{3}},
                                     std::tuple{kProcessed, "processed", int64_t{4}}, std::tuple{kComp, "comp", int64_t{3}}})
          if (want & flag) slots.push_back({name, c, nb::none(), {}, {}, PixelType::Float32, {}});
        if (out) {
          for (auto [k, v] : *out) {
            if (!nb::isinstance<nb::str>(k)) throw ConfigError("out: keys are output names (matte, fg, processed, comp)");
            const auto key = str_text(k, "out: a key");  // a lone surrogate: ConfigError, not bad_cast
            auto it = std::find_if(slots.begin(), slots.end(), [&](const OutputSlot& s) { return key == s.name; });
            if (it == slots.end()) throw ConfigError("out['" + key + "']: not one of the outputs asked for");
            const std::string what = "out['" + key + "']";
            if (!nb::try_cast<nb::ndarray<>>(v, it->out_array))
              throw ConfigError(what + ": not a writable array (a numpy array, or a buffer or CPU DLPack "
                                       "tensor that may be written)");
            it->out_type = pixel_type(it->out_array, what, true);
            it->out_layout = layout_of(it->out_array, what, {it->channels}, batch);
            same_frames(it->out_layout, what);
            it->out = nb::borrow(v);
          }
        }

        // Without output_colorspace the processed array is what the model and post-processing
        // give (linear Rec.709), whatever the input's space: the working space named, so the
        // one finish-and-deliver (key_frame) converts nothing.
        if (!output_colorspace) settings.output_colorspace = "linear-rec709";
        nb::dict result;
        bool stopped = false;
        FrameResult last;
        std::vector<std::string> warnings;
        double call_ms = 0;
        {
          // Every array is referenced by this call's arguments: it lives until the call returns.
          Unlocked nogil;  // declared first: the work is counted off before the GIL is taken back
          Busy busy;
          const auto t0 = std::chrono::steady_clock::now();
          std::lock_guard<std::mutex> serial(e.busy);
          for (int64_t i = 0; i < pl.frames; ++i) {
            if (i > 0 && pl.frames > 1 && interrupted()) {
              stopped = true;  // Ctrl-C between the frames of a batch: KeyboardInterrupt below
              break;
            }
            // The public single-frame entry, as C++ hosts call it: the caller's arrays are read
            // where they lie and the `out` arrays written in place (FrameRequest's views).
            FrameRequest req;
            req.matte = want & kMatte, req.fg = want & kFg, req.processed = want & kProcessed, req.comp = want & kComp;
            for (auto& s : slots)
              if (!s.out.is_none()) {
                const auto v = view_of<MutableImageView>(s.out_array, s.out_layout, s.out_type, i);
                (s.channels == 1 ? req.matte_into : s.channels == 4 ? req.processed_into
                                  : std::string(s.name) == "fg" ? req.fg_into : req.comp_into) = v;
              }
            MatteViews mv;
            for (auto [m, v] : {std::pair{&mattes[0], &mv.garbage}, std::pair{&mattes[1], &mv.holdout}})
              if (m->array) *v = view_of<ImageView>(*m->array, m->layout, m->type, i);
            FrameResult r;
            try {
              r = key_frame(*e.engine, nullptr, view_of<ImageView>(plate, pl, pt, i),
                            hint ? view_of<ImageView>(*hint, *hl, ht, i) : ImageView{}, mv, settings, req);
            } catch (const Error&) {
              if (!batch) throw;
              rethrow_naming_frame(i);
            }
            // A batch is estimated once, as a clip is: its first frame's backing keys the rest.
            settings.screen = r.backing;
            for (auto& s : slots) {
              if (!s.out.is_none()) continue;
              Image& img = s.channels == 1 ? r.alpha : s.channels == 4 ? r.processed
                           : std::string(s.name) == "fg" ? r.fg : r.comp;
              if (batch) {
                if (s.pixels.empty()) s.pixels.reserve(img.pixels.size() * static_cast<size_t>(pl.frames));
                s.pixels.insert(s.pixels.end(), img.pixels.begin(), img.pixels.end());
              } else {
                s.pixels = std::move(img.pixels);
              }
            }
            const std::string frame = batch ? "plate[" + std::to_string(i) + "]: " : "";
            for (const auto& w : r.warnings) warnings.push_back(frame + w);
            last = std::move(r);
          }
          call_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        if (stopped) {
          if (!PyErr_Occurred()) PyErr_SetNone(PyExc_KeyboardInterrupt);
          throw nb::python_error();
        }
        for (auto& s : slots)
          result[s.name] = !s.out.is_none() ? s.out
                                            : to_numpy(std::move(s.pixels), pl.frames, pl.height, pl.width, s.channels, batch);
        result["screen"] = last.backing == Screen::Blue ? "blue" : "green";
        result["swapped"] = last.swapped;
        result["linear"] = last.linear;
        result["checkpoint"] = path_str(last.checkpoint);  // os.fsdecode's str: a non-UTF-8 path too
        result["warnings"] = text_list(warnings);
        // The last frame's stages, spelt as in every output (report_json.h), and the call's.
        nb::dict t = nb::cast<nb::dict>(json_value(stage_timings_json(last.timings)));
        t["total_ms"] = last.timings.total_ms;
        t["call_ms"] = call_ms;  // every frame of the call in C++, GIL released: the rest is the binding's
        result["timings"] = t;
        return result;
      },
      nb::arg("plate"), nb::arg("hint").none() = nb::none(), nb::kw_only(), nb::arg("screen") = "auto",
      nb::arg("input_colorspace") = "srgb",
      nb::arg("outputs") = std::vector<std::string>{"matte", "fg", "processed", "comp"},
      nb::arg("out").none() = nb::none(), nb::arg("output_colorspace").none() = nb::none(),
      nb::arg("fg_colorspace").none() = nb::none(), nb::arg("comp_view").none() = nb::none(),
      nb::arg("garbage").none() = nb::none(), nb::arg("holdout").none() = nb::none(),
      "Keys a frame (HxWxC, C 3 or 4) or a batch (BxHxWxC) as `inference` keys a clip's frame: "
      "hint None is generated, screen 'auto' is estimated (once per batch), NaNs are cleaned. "
      "Returns a dict of float32 arrays (matte HxW, fg HxWx3 sRGB straight, processed HxWx4 "
      "linear premultiplied, comp HxWx3 sRGB) and what was found (screen, warnings, timings). "
      "output_colorspace, fg_colorspace and comp_view put processed, fg and comp in those spaces, "
      "as `inference --output-colorspace / --fg-colorspace / --comp-view` writes them. "
      "garbage and holdout are mattes the plate's size (HxW or HxWxC, BxHxW[xC] for a batch; "
      "white marks the region): the matte is max(alpha x (1 - garbage), holdout), so exactly 0 "
      "under the garbage and 1 under the holdout, and fg, processed and comp follow; the garbage "
      "also multiplies the hint before the model.");
}

}  // namespace corridorkey::python
