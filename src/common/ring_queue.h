// RingQueue<T>: a double-ended FIFO over one circular buffer, for queues that take and give one
// element per request (issue 29). std::deque allocates and frees a block every few elements as
// a queue moves through its blocks; this allocates only when the queue grows past its largest
// size so far (doubling), and frees its buffer only when it empties after holding more than
// kKeepCapacity elements (a burst does not pin its memory).
//
// Contracts: T is default-constructible and move-assignable; a removed element's slot keeps a
// moved-from T until it is reused. front() and pop_front() need !empty().
// Thread-safety: none; guard it as a std::deque.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace petal {

template <typename T>
class RingQueue {
 public:
  // Capacity kept when the queue empties.
  static constexpr size_t kKeepCapacity = 1024;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  T& front() { return slots_[head_]; }
  void push_back(T v) {
    Grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(v);
    ++size_;
  }
  void push_front(T v) {
    Grow();
    head_ = (head_ + slots_.size() - 1) & (slots_.size() - 1);
    slots_[head_] = std::move(v);
    ++size_;
  }
  void pop_front() {
    slots_[head_] = T();  // lets go of what the element held now, as std::deque would
    head_ = (head_ + 1) & (slots_.size() - 1);
    if (--size_ == 0) {
      head_ = 0;
      if (slots_.size() > kKeepCapacity) std::vector<T>().swap(slots_);
    }
  }

 private:
  // Room for one more element: the capacity stays a power of two (so that indices wrap with a
  // mask), and the elements move to the start of the new buffer in order.
  void Grow() {
    if (size_ < slots_.size()) return;
    std::vector<T> bigger(slots_.empty() ? 16 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) {
      bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    }
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace petal
