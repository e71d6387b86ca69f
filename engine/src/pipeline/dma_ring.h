// Device -> host copies of the model outputs that overlap the next frame's compute.
//
// On CUDA: `slots` pinned host buffers (dma_buffers); the inference thread records an event
// on the compute stream, queues a non-blocking copy into a free pinned slot on a separate
// copy stream and moves on to the next frame; a writer waits for that copy's event before
// reading, then releases the slot. At most `slots` frames are in flight, which bounds host
// memory. On CPU / MPS the outputs are simply moved to host memory synchronously.
#pragma once

#include <corridorkey/image.h>

#include <torch/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace corridorkey::detail {

class DmaRing {
 public:
  struct Ticket {
    int slot = -1;                  // -1: synchronous (no slot held)
    torch::Tensor alpha, fg;        // host tensors, valid once wait() returned
    std::shared_ptr<void> event;    // CUDA event of the copy (opaque)
  };

  DmaRing(const torch::Device& device, int slots);
  ~DmaRing();

  /// Inference thread: start copying alpha [1,1,S,S] and fg [1,3,S,S] to the host.
  /// Blocks while all slots are held by writers.
  Ticket start(const torch::Tensor& alpha, const torch::Tensor& fg);
  /// Writer: wait for the copy; the ticket's tensors are then readable.
  void wait(Ticket& t);
  /// Writer: converts to images and frees the slot for the next frame.
  void finish(Ticket& t, Image& alpha, Image& fg);

 private:
  torch::Device device_;
  int slots_;
  std::vector<torch::Tensor> alpha_buf_, fg_buf_;
  std::vector<bool> busy_;
  std::mutex m_;
  std::condition_variable freed_;
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace corridorkey::detail
