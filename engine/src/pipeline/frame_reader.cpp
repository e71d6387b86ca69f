#include "pipeline/frame_reader.h"

#include <corridorkey/check.h>

#include "io/image_io.h"
#include "pipeline/frame_stages.h"
#include "timing.h"

#include <tuple>

namespace corridorkey::pipeline {

using timing::Clock;
using timing::ms_since;

ReadItem FrameReader::prepare(size_t ci, int index, Image plate, Image hint,
                              const std::string& file, double read_ms,
                              std::shared_ptr<const io::PlateMetadata> meta, MatteRead garbage,
                              MatteRead holdout) const {
  const auto& p = plans_[ci];
  std::vector<std::string> warnings;
  auto name = [&](const io::FrameSource& s) {
    return s.is_video() ? s.video + "#" + std::to_string(index) : matte_file(s, index);
  };
  auto mattes = frame_mattes(std::move(garbage), name(p.mattes.garbage), std::move(holdout),
                             name(p.mattes.holdout), plate.width, plate.height, meta.get(), warnings);
  auto it = prepare_frame(p, ci, index, std::move(plate), std::move(hint), file, read_ms, nullptr,
                          torch::kCPU, meta.get(), std::move(mattes));
  it.warnings.insert(it.warnings.begin(), warnings.begin(), warnings.end());
  it.plate = std::move(meta);
  return it;
}

ReadItem FrameReader::read_frame(size_t ci, int index) const {
  const auto& p = plans_[ci];
  const auto& file = p.clip.input.frames[index];
  try {
    const auto t = Clock::now();
    if (!p.generate_hint)
      check_shapes_from_headers(file, p.clip.hint.frames[index]);  // before decoding
    std::shared_ptr<const io::PlateMetadata> meta;
    Image plate = io::read_plate(file, limits_, meta);
    Image hint = p.generate_hint ? Image{} : io::read_image(p.clip.hint.frames[index], limits_);
    auto matte = [&](const io::FrameSource& s) {
      const auto f = matte_file(s, index);
      return f.empty() ? MatteRead{} : read_matte(f, limits_);
    };
    MatteRead garbage = matte(p.mattes.garbage), holdout = matte(p.mattes.holdout);
    return prepare(ci, index, std::move(plate), std::move(hint), file, ms_since(t),
                   std::move(meta), std::move(garbage), std::move(holdout));
  } catch (const std::exception& e) {
    return ReadItem::failed(ci, index, p.stems[index], file, e.what());
  }
}

void FrameReader::read_video_clip(size_t ci, const std::function<bool(ReadItem)>& sink,
                                  const std::function<bool()>& stopping) const {
  const auto& p = plans_[ci];
  std::unique_ptr<io::VideoReader> vin, vhint, vgarbage, vholdout;
  try {
    if (p.clip.input.is_video())
      vin = std::make_unique<io::VideoReader>(p.clip.input.video, p.colour.deep_video);
    if (!p.generate_hint && p.clip.hint.is_video())
      vhint = std::make_unique<io::VideoReader>(p.clip.hint.video);
    if (p.mattes.garbage.is_video())
      vgarbage = std::make_unique<io::VideoReader>(p.mattes.garbage.video);
    if (p.mattes.holdout.is_video())
      vholdout = std::make_unique<io::VideoReader>(p.mattes.holdout.video);
  } catch (const std::exception& e) {
    const int first = p.frames.front();
    sink(ReadItem::failed(ci, first, p.stems[first], p.clip.root, e.what()));
    return;
  }
  // A video's frame rate goes to every EXR output (framesPerSecond).
  const auto video_meta =
      vin ? io::video_metadata(vin->width(), vin->height(), vin->fps()) : nullptr;
  size_t k = 0;
  for (int i = 0; k < p.frames.size() && !stopping(); ++i) {
    const auto t = Clock::now();
    const bool wanted = i == p.frames[k];
    Image plate, hint;
    MatteRead garbage, holdout;
    std::shared_ptr<const io::PlateMetadata> meta = video_meta;
    const std::string file =
        vin ? p.clip.input.video + "#" + std::to_string(i) : p.clip.input.frames[i];
    std::string err;
    bool stream_broke = false;
    // A frame file that is refused or does not decode fails that frame alone; the other
    // stream still advances, so the frames after it stay paired.
    auto frame_file = [&](const std::function<void()>& read) {
      try {
        read();
      } catch (const std::exception& e) {
        err = e.what();
      }
    };
    try {
      if (vin) {
        CK_CHECK(vin->next(plate), IoError, p.clip.input.video, ": video ended at frame ", i,
                 " (container reported ", p.clip.input.count(), ")");
      } else if (wanted) {
        frame_file([&] {
          const auto a = header_size(file);
          // An overscan plate's hint is checked exactly once it is read (prepare_frame).
          if (vhint && !io::has_overscan(file))
            check_aspect(file, a.width, a.height, vhint->width(), vhint->height());
          plate = io::read_plate(file, limits_, meta);
        });
      }
      if (vhint) {
        CK_CHECK(vhint->next(hint), IoError, p.clip.hint.video, ": hint video ended at frame ", i);
      } else if (wanted && !p.generate_hint && err.empty()) {
        frame_file([&] {
          const auto& hf = p.clip.hint.frames[i];
          const auto b = header_size(hf);
          if (vin) check_aspect(file, vin->width(), vin->height(), b.width, b.height);
          hint = io::read_image(hf, limits_);
        });
      }
      // Mattes: a video advances with the plates; an image is read for a wanted frame.
      for (auto [v, src, im, what] :
           {std::tuple{vgarbage.get(), &p.mattes.garbage, &garbage, "garbage matte"},
            std::tuple{vholdout.get(), &p.mattes.holdout, &holdout, "holdout matte"}}) {
        if (v) {
          CK_CHECK(v->next(im->image), IoError, src->video, ": ", what, " video ended at frame ", i);
        } else if (wanted && err.empty()) {
          const auto f = matte_file(*src, i);
          if (!f.empty()) frame_file([&] { *im = read_matte(f, limits_); });
        }
      }
    } catch (const std::exception& e) {
      err = e.what();
      stream_broke = true;
    }
    if (!wanted && err.empty()) continue;  // decoded only to advance the stream
    ReadItem it;
    if (err.empty()) {
      try {
        it = prepare(ci, i, std::move(plate), std::move(hint), file, ms_since(t), std::move(meta),
                     std::move(garbage), std::move(holdout));
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    if (!err.empty()) {
      const int index = p.frames[k];
      if (!sink(ReadItem::failed(ci, index, p.stems[index], file, err))) return;
      if (stream_broke) return;  // a broken stream cannot continue
      ++k;  // this frame's own problem (a bad frame file, no backing found): go on
      continue;
    }
    ++k;
    if (!sink(std::move(it))) return;
  }
}

}  // namespace corridorkey::pipeline
