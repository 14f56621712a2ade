// Eager kernel of cast: every dtype to every dtype (to bool: x != 0; elementwise_loops.h).

#include "kiln/runtime/kernels/elementwise_loops.h"

namespace kiln::runtime {
namespace {

using namespace elementwise;

void cast_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  visit_dtype(in[0].dtype, [&](auto from_tag) {
    using T = typename decltype(from_tag)::type;
    visit_dtype(out.dtype, [&](auto to_tag) {
      using U = typename decltype(to_tag)::type;
      if constexpr (std::is_same_v<U, bool>) {
        unary_loop<T, U>(in[0], out, [](const auto& x) { return x != T(0); });
      } else {
        unary_loop<T, U>(in[0], out, [](const auto& x) { return x.template cast<U>(); });
      }
    });
  });
}

}  // namespace

void register_cast_kernels(KernelTable& t) { t[size_t(OpKind::Cast)] = cast_kernel; }

}  // namespace kiln::runtime
