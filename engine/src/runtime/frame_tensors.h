// Conversions between plain images and tensors, and the model-side pre-processing.
#pragma once

#include <corridorkey/image.h>

#include <torch/types.h>

#include <string>

namespace corridorkey::detail {

/// HWC float32 tensor on CPU holding the first `max_channels` channels of the view, scaled
/// to 0..1 for integer types. Throws IoError for malformed views (naming `what`).
torch::Tensor view_to_tensor(const ImageView& view, int max_channels, const char* what);

/// The hint as one channel [H,W,1] float. One channel: itself; grey + alpha: the grey.
/// Three or more: R when R, G and B are equal (a grey matte saved as RGB, as the reference
/// reads it); else, when the colour channels are black and there is an alpha channel, the
/// alpha; else max(R, G, B) per pixel, so a matte drawn in any colour channel is not read
/// as black. `note` receives a line saying which rule applied when it was not the plain one.
torch::Tensor hint_to_tensor(const ImageView& hint, std::string* note = nullptr);
/// hint x (1 - garbage): a one-channel hint [h,w,1] and a garbage matte plane [H,W,1] (0..1);
/// a matte of another size than the hint (a hint resized with its plate) is resized to it
/// first, bilinear with antialiasing as the model's input is, and clamped to 0..1.
torch::Tensor garbage_on_hint(const torch::Tensor& hint, const ImageView& garbage);

/// Reference pre-processing: plate [H,W,3] + hint [h,w,1] (CPU float) -> [1,4,S,S] on
/// `device`: bilinear + antialias resize to S x S (aspect squashed), linear -> sRGB after
/// the resize when input_is_linear, ImageNet normalisation of rgb; hint stays raw.
torch::Tensor preprocess(const torch::Tensor& plate, const torch::Tensor& hint, int64_t size,
                         bool input_is_linear, const torch::Device& device);

/// [C,H,W] or [1,C,H,W] tensor (any device / dtype) -> owned HWC float Image.
Image tensor_to_image(const torch::Tensor& chw);

torch::Tensor linear_to_srgb(const torch::Tensor& x);
torch::Tensor srgb_to_linear(const torch::Tensor& x);

}  // namespace corridorkey::detail
