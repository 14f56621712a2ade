// Per-thread scratch buffers for kernels (GEMM packing, im2col): 64-byte aligned, grown on
// demand and kept for the thread's life, so a kernel called every step allocates (and the OS
// zeroes pages) once, not per call. Contents are uninitialised. A nested use of the same slot
// on one thread (a kernel called from a task that runs while an outer kernel on this thread
// waits) gets a buffer of its own, freed at scope exit.
#pragma once

#include <cstddef>

namespace kiln::runtime {

// Slots: one per concurrent use within one kernel.
// kConvPartials: a filter gradient's partial sums, held by the calling thread while its tasks
// (on any thread) fill them; kConvFilter: a convolution's rearranged filter (the turned filter
// of a direct input gradient), read by its tasks.
// kBf16Input0..2, kBf16Result: a via-f32 op's widened bf16 operands and its float32 result
// before rounding (runtime/kernels/registry.cc). kGemmRounded: the block of a float32 operand
// a GEMM packer rounds to bf16 before packing it (gemm_pack_bf16.h).
enum class ScratchSlot {
  kGemmA,
  kGemmB,
  kGemmC,
  kGemmRounded,
  kConvColumns,
  kConvPartials,
  kConvFilter,
  kBf16Input0,
  kBf16Input1,
  kBf16Input2,
  kBf16Result,
  kCount
};

class Scratch {
 public:
  Scratch(ScratchSlot slot, size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  struct Slot;
  Slot* slot_ = nullptr;
  void* owned_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace kiln::runtime
