// Internal to the elementwise kernel files (elementwise_*.cc): the loops every elementwise
// kernel runs. Eigen array expressions (vectorised) over contiguous runs, numpy broadcasting
// through BroadcastPlan, chunks spread over kiln's TBB arena. Each op family instantiates them
// in a file of its own, so the families compile in parallel.
#pragma once

#include <Eigen/Core>

#include "kiln/runtime/kernels/broadcast.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime::elementwise {

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using CMap = Eigen::Map<const Vec<T>>;
template <typename T>
using MMap = Eigen::Map<Vec<T>>;

// Runs out = Op(a, b) over broadcast runs; Op::eval takes two Eigen expressions.
template <typename Op, typename T, typename U>
void binary_loop(const Array& a, const Array& b, Array& out) {
  BroadcastPlan<2> plan(out.shape, {&a.shape, &b.shape});
  const T* pa = static_cast<const T*>(a.raw());
  const T* pb = static_cast<const T*>(b.raw());
  U* po = static_cast<U*>(out.raw());
  parallel_for(plan.total, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    plan.for_each_run(begin, end, [&](int64_t o, auto off, auto st, int64_t n) {
      MMap<U> y(po + o, n);
      if ((st[0] && st[1]) || n == 1) {  // one element reads the same either way
        y = Op::eval(CMap<T>(pa + off[0], n), CMap<T>(pb + off[1], n));
      } else if (st[0]) {
        y = Op::eval(CMap<T>(pa + off[0], n), Vec<T>::Constant(n, pb[off[1]]));
      } else if (st[1]) {
        y = Op::eval(Vec<T>::Constant(n, pa[off[0]]), CMap<T>(pb + off[1], n));
      } else {
        // Both operands broadcast along the run: the output's dimension would be 1 for a
        // binary op's own broadcast, so runs of one element take the first branch; any other
        // caller gets the same value n times. (No third expression type: fewer instantiations
        // for the compiler, the same arithmetic.)
        for (int64_t i = 0; i < n; ++i)
          MMap<U>(po + o + i, 1) = Op::eval(CMap<T>(pa + off[0], 1), CMap<T>(pb + off[1], 1));
      }
    });
  });
}

// Runs out = f(x) over contiguous chunks of the same shape; f takes an Eigen expression.
template <typename T, typename U, typename F>
void unary_loop(const Array& x, Array& out, F&& f) {
  const T* px = static_cast<const T*>(x.raw());
  U* po = static_cast<U*>(out.raw());
  parallel_for(out.size(), kElementwiseGrain,
               [&](int64_t b, int64_t e) { MMap<U>(po + b, e - b) = f(CMap<T>(px + b, e - b)); });
}

}  // namespace kiln::runtime::elementwise
