// Eager kernels of reductions: sum, mean, max, min, prod and logsumexp over any set of axes
// (attrs axes, keepdims), argmax and argmin along one axis (attrs axis, keepdims; int64 out).
//
// Contract (numpy semantics): an empty reduction gives the identity (sum 0, prod 1, mean NaN,
// logsumexp -inf; the shape rules reject max/min/argmax/argmin of nothing); max, min, argmax
// and argmin propagate NaN (argmax/argmin return the first NaN, else the first extreme value);
// logsumexp is max + log(sum(exp(x - max))) and gives -inf for all -inf and +inf with a +inf;
// integer sum/prod wrap around modulo 2^bits (computed in the unsigned type, no UB).
//
// Plan: size-1 dimensions are dropped and neighbours that are both reduced or both kept are
// merged. The outermost reduced group is then reduced as an [outer, R, inner] problem, and
// this repeats on the (smaller) result until no reduced group is left. Each stage is a row
// reduction (inner == 1) or a column reduction that accumulates whole rows of `inner` with
// Eigen. Results are bitwise identical for any thread count (see reduce_util.h).
#include "kiln/runtime/kernels/reduce_stages.h"

namespace kiln::runtime {

using namespace reduction;

// Sum, mean, prod and logsumexp; max, min, argmax and argmin are in reduce_extrema.cc.
void register_reduce_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Sum, reduce_kernel<Red::Sum>);
  set(OpKind::Mean, reduce_kernel<Red::Mean>);
  set(OpKind::Prod, reduce_kernel<Red::Prod>);
  set(OpKind::LogSumExp, reduce_kernel<Red::LogSumExp>);
}

}  // namespace kiln::runtime
