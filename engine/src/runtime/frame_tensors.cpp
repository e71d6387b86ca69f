#include "runtime/frame_tensors.h"

#include <corridorkey/check.h>

#include <torch/nn/functional/upsampling.h>

#include <cstring>

namespace corridorkey::detail {
namespace F = torch::nn::functional;

torch::Tensor view_to_tensor(const ImageView& v, int max_channels, const char* what) {
  CK_CHECK(v.data && v.width > 0 && v.height > 0 && v.channels > 0, IoError, what,
           ": empty image view (", v.width, "x", v.height, "x", v.channels, ")");
  CK_CHECK(v.stride() >= static_cast<size_t>(v.width) * v.channels * v.bytes_per_sample(),
           IoError, what, ": row stride ", v.stride(), " bytes is smaller than a row");
  const int c = std::min(v.channels, max_channels);
  const auto type = v.type == PixelType::UInt8    ? torch::kUInt8
                    : v.type == PixelType::UInt16 ? torch::kUInt16
                    : v.type == PixelType::Float16 ? torch::kHalf
                                                  : torch::kFloat;
  const int64_t es = static_cast<int64_t>(v.bytes_per_sample());
  // A strided view over the caller's memory, then one copy into a float tensor.
  auto src = torch::from_blob(const_cast<void*>(v.data), {v.height, v.width, c},
                              {static_cast<int64_t>(v.stride()) / es, v.channels, 1},
                              torch::TensorOptions().dtype(type));
  // One owned contiguous float copy whatever the source type or stride.
  auto out = src.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true,
                    torch::MemoryFormat::Contiguous);
  if (v.type == PixelType::UInt8) out.div_(255.0);
  if (v.type == PixelType::UInt16) out.div_(65535.0);
  return out;
}

torch::Tensor hint_to_tensor(const ImageView& hint, std::string* note) {
  if (hint.channels <= 2) return view_to_tensor(hint, 1, "hint");
  const auto all = view_to_tensor(hint, 4, "hint");  // [H,W,C] float
  const auto rgb = all.slice(2, 0, 3);
  const auto r = rgb.slice(2, 0, 1);
  // Black colour with an alpha that says something: a matte a paint tool saved as alpha.
  // Checked before grey (black is grey too, which made this rule unreachable); opaque black
  // stays an all-background hint.
  if (all.size(2) == 4 && rgb.abs().max().item<float>() == 0.f &&
      !torch::equal(all.slice(2, 3, 4), torch::ones_like(all.slice(2, 3, 4)))) {
    if (note) *note = "hint's colour channels are black: using its alpha channel";
    return all.slice(2, 3, 4).contiguous();
  }
  if (torch::equal(r.expand_as(rgb), rgb)) return r.contiguous();  // grey saved as RGB
  if (note) *note = "hint's colour channels differ: using max(R, G, B) per pixel";
  return std::get<0>(rgb.max(2, /*keepdim=*/true)).contiguous();
}

torch::Tensor garbage_on_hint(const torch::Tensor& hint, const ImageView& garbage) {
  auto g = view_to_tensor(garbage, 1, "garbage matte");
  if (g.size(0) != hint.size(0) || g.size(1) != hint.size(1)) {
    auto nchw = g.permute({2, 0, 1}).unsqueeze(0);
    g = F::interpolate(nchw, F::InterpolateFuncOptions()
                                 .size(std::vector<int64_t>{hint.size(0), hint.size(1)})
                                 .mode(torch::kBilinear)
                                 .align_corners(false)
                                 .antialias(true))
            .squeeze(0)
            .permute({1, 2, 0})
            .clamp(0, 1);
  }
  return hint * (1 - g);
}

torch::Tensor linear_to_srgb(const torch::Tensor& x0) {
  auto x = x0.clamp_min(0);
  return torch::where(x <= 0.0031308, x * 12.92, 1.055 * x.pow(1.0 / 2.4) - 0.055);
}

torch::Tensor srgb_to_linear(const torch::Tensor& x0) {
  auto x = x0.clamp_min(0);
  return torch::where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055).pow(2.4));
}

torch::Tensor preprocess(const torch::Tensor& plate, const torch::Tensor& hint, int64_t S,
                         bool input_is_linear, const torch::Device& device) {
  // MPS has no antialiased bilinear kernel: resize on CPU there (same numbers as reference).
  const auto resize_dev = device.is_mps() ? torch::Device(torch::kCPU) : device;
  auto resize = [&](const torch::Tensor& hwc) {
    auto nchw = hwc.permute({2, 0, 1}).unsqueeze(0).to(resize_dev);
    return F::interpolate(nchw, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{S, S})
                                    .mode(torch::kBilinear)
                                    .align_corners(false)
                                    .antialias(true));
  };
  auto rgb = resize(plate.slice(2, 0, 3));
  if (input_is_linear) rgb = linear_to_srgb(rgb);
  const auto opts = rgb.options();
  auto mean = torch::tensor({0.485f, 0.456f, 0.406f}, opts).view({1, 3, 1, 1});
  auto stdv = torch::tensor({0.229f, 0.224f, 0.225f}, opts).view({1, 3, 1, 1});
  rgb = (rgb - mean) / stdv;
  auto h = resize(hint.slice(2, 0, 1));
  return torch::cat({rgb, h}, 1).to(device);
}

Image tensor_to_image(const torch::Tensor& t) {
  auto chw = t.dim() == 4 ? t[0] : t;
  auto hwc = chw.to(torch::kCPU, torch::kFloat).permute({1, 2, 0}).contiguous();
  Image im;
  im.height = static_cast<int>(hwc.size(0));
  im.width = static_cast<int>(hwc.size(1));
  im.channels = static_cast<int>(hwc.size(2));
  im.pixels.resize(static_cast<size_t>(hwc.numel()));
  std::memcpy(im.pixels.data(), hwc.data_ptr<float>(), im.pixels.size() * sizeof(float));
  return im;
}

}  // namespace corridorkey::detail
