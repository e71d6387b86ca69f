// The raw model outputs of keyed frames, kept for frame.repost: least recently used first
// out once the total passes the limit (--cache-mb). Thread-safe.
#pragma once

#include <corridorkey/frame.h>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace corridorkey::serve {

struct CachedFrame {
  explicit CachedFrame(RawFrame raw) : frame(std::move(raw)) {}
  /// The raw result and its despeckle memo (frame.h): a repost that changes only despill (a
  /// slider) reuses the despeckled alpha, as review's tweaks do. The garbage and holdout
  /// mattes it was keyed with are part of it (RawFrame::mattes), so a repost re-applies
  /// them; entries are by frame_id, never looked up by their inputs.
  RepostableFrame frame;
  EngineSettings post;  // the engine's, with the despill / despeckle the frame was keyed with
  std::string model_id, exr_compression;
  std::size_t bytes() const { return frame.bytes(); }
};

class RawCache {
 public:
  explicit RawCache(std::size_t limit_bytes) : limit_(limit_bytes) {}

  /// Stores the frame (false when it alone is larger than the limit: not kept).
  bool put(const std::string& id, std::shared_ptr<const CachedFrame> f) {
    const std::size_t b = f->bytes();
    std::lock_guard<std::mutex> l(m_);
    if (b > limit_) return false;
    order_.push_front(id);
    map_[id] = {std::move(f), order_.begin()};
    used_ += b;
    while (used_ > limit_) {  // evict the least recently used
      auto it = map_.find(order_.back());
      used_ -= it->second.frame->bytes();
      map_.erase(it);
      order_.pop_back();
    }
    return true;
  }
  std::shared_ptr<const CachedFrame> get(const std::string& id) {
    std::lock_guard<std::mutex> l(m_);
    auto it = map_.find(id);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.pos);  // most recently used now
    return it->second.frame;
  }
  std::size_t used_bytes() const {
    std::lock_guard<std::mutex> l(m_);
    return used_;
  }
  std::size_t frames() const {
    std::lock_guard<std::mutex> l(m_);
    return map_.size();
  }
  std::size_t limit_bytes() const { return limit_; }

 private:
  struct Entry {
    std::shared_ptr<const CachedFrame> frame;
    std::list<std::string>::iterator pos;
  };
  const std::size_t limit_;
  mutable std::mutex m_;
  std::list<std::string> order_;
  std::unordered_map<std::string, Entry> map_;
  std::size_t used_ = 0;
};

}  // namespace corridorkey::serve
