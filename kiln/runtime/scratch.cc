#include "kiln/runtime/scratch.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "kiln/runtime/huge_alloc.h"

namespace kiln::runtime {
namespace {

void* alloc(size_t bytes) {
  void* p = aligned_alloc_huge(std::max<size_t>(bytes, 64));
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

struct Scratch::Slot {
  void* data = nullptr;
  size_t capacity = 0;
  bool busy = false;
  ~Slot() { std::free(data); }
};

Scratch::Scratch(ScratchSlot slot, size_t bytes) {
  thread_local Slot slots[size_t(ScratchSlot::kCount)];
  Slot& s = slots[size_t(slot)];
  if (s.busy) {
    owned_ = alloc(bytes);
    data_ = owned_;
    return;
  }
  if (s.capacity < bytes) {
    std::free(s.data);
    s.data = nullptr;
    s.capacity = 0;
    s.data = alloc(bytes);
    s.capacity = bytes;
  }
  s.busy = true;
  slot_ = &s;
  data_ = s.data;
}

Scratch::~Scratch() {
  if (slot_) slot_->busy = false;
  std::free(owned_);
}

}  // namespace kiln::runtime
