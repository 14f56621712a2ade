#include <fmt/format.h>

#include <cstring>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

KernelTable build() {
  KernelTable t{};
  register_arithmetic_kernels(t);
  register_comparison_kernels(t);
  register_unary_kernels(t);
  register_cast_kernels(t);
  register_reduce_kernels(t);
  register_extremum_kernels(t);
  register_softmax_kernels(t);
  register_matmul_kernels(t);
  register_conv_kernels(t);
  register_pool_kernels(t);
  register_layout_kernels(t);
  register_gather_kernels(t);
  register_random_kernels(t);
  register_attention_kernels(t);
  register_collective_kernels(t);
  return t;
}

const KernelTable& table() {
  static const KernelTable t = build();
  return t;
}

// ---- the bf16 column's ViaF32 rule, in one place: bf16 inputs widened to float32 (exact), the
// op's float32 kernel, each bf16 output rounded once (nearest even); dtype attributes naming
// bf16 ask that kernel for float32. While profiling, the conversions are events of category
// "bf16" ("bf16 widen", "bf16 round", with the bytes they move), so a profile shows that a bf16
// op ran through float32, and what that cost beside its float32 kernel's own events (a
// product's "gemm" event and plan).

void round_into_bf16(const Array& f, Array& out) {
  ProfileScope event("bf16 round", "bf16", 0, double(out.size()) * 6);
  const float* src = f.data<float>();
  auto* dst = static_cast<bfloat16*>(out.raw());
  parallel_for(out.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = bfloat16::from_float(src[i]);
  });
}

bool names_bf16(const Attrs& attrs) {
  for (const auto& [name, value] : attrs.items()) {
    const DType* d = std::get_if<DType>(&value);
    if (d != nullptr && *d == DType::bf16) return true;
  }
  return false;
}

void run_via_f32(OpKind kind, KernelFn fn, std::span<const Array> in, const Attrs& attrs,
                 Array& out) {
  bool any = out.dtype == DType::bf16 || names_bf16(attrs);
  for (const Array& a : in) any = any || a.dtype == DType::bf16;
  if (!any) return fn(in, attrs, out);
  constexpr ScratchSlot kInputSlots[] = {ScratchSlot::kBf16Input0, ScratchSlot::kBf16Input1,
                                         ScratchSlot::kBf16Input2};
  std::vector<Array> wide(in.begin(), in.end());
  size_t widened = 0;
  for (Array& a : wide) {
    if (a.dtype != DType::bf16) continue;
    // (More bf16 operands than slots: a fresh array each.)
    a = widened_bf16(a, widened < std::size(kInputSlots)
                            ? std::optional<ScratchSlot>(kInputSlots[widened++])
                            : std::nullopt);
  }
  Attrs wide_attrs;
  for (const auto& [name, value] : attrs.items()) {
    const DType* d = std::get_if<DType>(&value);
    wide_attrs.set(name, d != nullptr && *d == DType::bf16 ? AttrValue(DType::f32) : value);
  }
  if (out.dtype != DType::bf16) {
    fn(wide, wide_attrs, out);
    // A kernel that hands an input on as its result must not return scratch memory.
    for (const Array& a : wide)
      if (out.storage && out.storage == a.storage && a.storage->is_borrowed()) {
        Array copy = Array::empty(out.type());
        std::memcpy(copy.raw(), out.raw(), out.nbytes());
        out = std::move(copy);
      }
    return;
  }
  Array f = scratch_f32(ScratchSlot::kBf16Result, out.shape);
  fn(wide, wide_attrs, f);
  KILN_ASSERT(f.dtype == DType::f32,
              fmt::format("{}: the float32 kernel changed its output dtype", op_name(kind)));
  round_into_bf16(f, out);
}

template <size_t K>
void via_f32(std::span<const Array> in, const Attrs& attrs, Array& out) {
  run_via_f32(OpKind(K), table()[K], in, attrs, out);
}

template <size_t... K>
constexpr KernelTable via_f32_table(std::index_sequence<K...>) {
  return KernelTable{&via_f32<K>...};
}

}  // namespace

Array scratch_f32(ScratchSlot slot, const Shape& shape) {
  const size_t bytes = size_t(std::max<int64_t>(shape.num_elements(), 1)) * sizeof(float);
  auto scratch = std::make_shared<Scratch>(slot, bytes);
  void* data = scratch->as<void>();
  return Array{DType::f32, shape, Storage::borrow(data, bytes, std::move(scratch))};
}

Array widened_bf16(const Array& a, std::optional<ScratchSlot> slot) {
  ProfileScope event("bf16 widen", "bf16", 0, double(a.size()) * 6);
  Array w = slot ? scratch_f32(*slot, a.shape) : Array::empty(DType::f32, a.shape);
  const auto* src = static_cast<const bfloat16*>(a.raw());
  float* dst = w.data<float>();
  parallel_for(a.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = src[i].to_float();
  });
  return w;
}

static const KernelTable& bf16_table() {
  static const KernelTable t = [] {
    KernelTable b{};
    register_matmul_bf16_kernels(b);
    register_conv_bf16_kernels(b);
    register_attention_bf16_kernels(b);
    return b;
  }();
  return t;
}

void run_via_f32_kernel(OpKind kind, std::span<const Array> in, const Attrs& attrs, Array& out) {
  run_via_f32(kind, table()[size_t(kind)], in, attrs, out);
}

KernelFn kernel_for(OpKind kind) {
  static constexpr KernelTable kViaF32 = via_f32_table(std::make_index_sequence<kNumOps>{});
  KernelFn fn = table()[size_t(kind)];
  if (fn && op_info(kind).bf16 == Bf16Rule::ViaF32)
    return bf16_table()[size_t(kind)] ? bf16_table()[size_t(kind)] : kViaF32[size_t(kind)];
  if (!fn)
    throw Error(
        fmt::format("op \"{}\" has no eager kernel (every op in ir/ops.def needs one in "
                    "runtime/kernels/)",
                    op_name(kind)));
  return fn;
}

Array run_kernel(OpKind kind, std::span<const Array> inputs, const Attrs& attrs,
                 const TensorType& out_type) {
  Array out = Array::empty(out_type);
  kernel_for(kind)(inputs, attrs, out);
  return out;
}

Array run_op(OpKind kind, std::span<const Array> inputs, const Attrs& attrs) {
  TensorType types[8];
  std::vector<TensorType> many;
  std::span<const TensorType> span;
  if (inputs.size() <= 8) {
    for (size_t i = 0; i < inputs.size(); ++i) types[i] = inputs[i].type();
    span = {types, inputs.size()};
  } else {
    for (const Array& a : inputs) many.push_back(a.type());
    span = many;
  }
  return run_kernel(kind, inputs, attrs, infer_type(kind, span, attrs));
}

}  // namespace kiln::runtime
