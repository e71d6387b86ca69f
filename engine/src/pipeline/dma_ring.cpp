#include "pipeline/dma_ring.h"

#include "runtime/frame_tensors.h"

#ifdef CK_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace corridorkey::detail {

struct DmaRing::Cuda {
#ifdef CK_WITH_CUDA
  c10::cuda::CUDAStream copy_stream;
  explicit Cuda(const torch::Device& d)
      : copy_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index())) {}
#endif
};

DmaRing::DmaRing(const torch::Device& device, int slots) : device_(device), slots_(slots) {
#ifdef CK_WITH_CUDA
  if (device_.is_cuda()) {
    cuda_ = std::make_unique<Cuda>(device_);
    busy_.assign(static_cast<size_t>(slots_), false);
    alpha_buf_.resize(static_cast<size_t>(slots_));
    fg_buf_.resize(static_cast<size_t>(slots_));
  }
#endif
}

DmaRing::~DmaRing() = default;

DmaRing::Ticket DmaRing::start(const torch::Tensor& alpha, const torch::Tensor& fg) {
  Ticket t;
#ifdef CK_WITH_CUDA
  if (cuda_) {
    {
      std::unique_lock<std::mutex> l(m_);
      freed_.wait(l, [&] { return std::find(busy_.begin(), busy_.end(), false) != busy_.end(); });
      t.slot = static_cast<int>(std::find(busy_.begin(), busy_.end(), false) - busy_.begin());
      busy_[static_cast<size_t>(t.slot)] = true;
    }
    auto& a = alpha_buf_[static_cast<size_t>(t.slot)];
    auto& f = fg_buf_[static_cast<size_t>(t.slot)];
    const auto pinned = torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true);
    if (!a.defined() || a.sizes() != alpha.sizes()) a = torch::empty(alpha.sizes(), pinned);
    if (!f.defined() || f.sizes() != fg.sizes()) f = torch::empty(fg.sizes(), pinned);
    // The copy stream waits for the compute stream's work on these outputs, then copies
    // while the compute stream starts the next frame.
    at::cuda::CUDAEvent computed;
    computed.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    computed.block(cuda_->copy_stream);
    {
      c10::cuda::CUDAStreamGuard g(cuda_->copy_stream);
      a.copy_(alpha, /*non_blocking=*/true);
      f.copy_(fg, /*non_blocking=*/true);
      // Keep the device tensors alive until the copy has run.
      alpha.record_stream(cuda_->copy_stream);
      fg.record_stream(cuda_->copy_stream);
    }
    auto copied = std::make_shared<at::cuda::CUDAEvent>();
    copied->record(cuda_->copy_stream);
    t.event = copied;
    t.alpha = a;
    t.fg = f;
    return t;
  }
#endif
  t.alpha = alpha.to(torch::kCPU, torch::kFloat);
  t.fg = fg.to(torch::kCPU, torch::kFloat);
  return t;
}

void DmaRing::wait(Ticket& t) {
#ifdef CK_WITH_CUDA
  if (t.event) static_cast<at::cuda::CUDAEvent*>(t.event.get())->synchronize();
#endif
  (void)t;
}

void DmaRing::finish(Ticket& t, Image& alpha, Image& fg) {
  wait(t);
  alpha = tensor_to_image(t.alpha);
  fg = tensor_to_image(t.fg);
  if (t.slot >= 0) {
    std::lock_guard<std::mutex> l(m_);
    busy_[static_cast<size_t>(t.slot)] = false;
    freed_.notify_one();
  }
  t = Ticket{};
}

}  // namespace corridorkey::detail
