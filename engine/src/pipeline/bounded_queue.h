// A bounded blocking queue between pipeline stages: push blocks while full (memory stays
// flat however long the clip), close() wakes everyone, pop() then drains and returns
// nullopt.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace corridorkey::pipeline {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : cap_(capacity) {}

  /// False when the queue was closed (the item is dropped).
  bool push(T v) {
    std::unique_lock<std::mutex> l(m_);
    not_full_.wait(l, [&] { return q_.size() < cap_ || closed_; });
    if (closed_) return false;
    q_.push_back(std::move(v));
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> pop() {
    std::unique_lock<std::mutex> l(m_);
    not_empty_.wait(l, [&] { return !q_.empty() || closed_; });
    if (q_.empty()) return std::nullopt;
    T v = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return v;
  }

  void close() {
    std::lock_guard<std::mutex> l(m_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  size_t cap_;
  std::deque<T> q_;
  bool closed_ = false;
  std::mutex m_;
  std::condition_variable not_empty_, not_full_;
};

}  // namespace corridorkey::pipeline
