// Test helper: a model of the rounding errors a correct float kernel may make, as a hook of the
// reference executor (runtime::ReferenceOptions::after_op). After each op it moves every float
// result by a random amount no larger than what a correct implementation of that op may be
// off by, in the precision the graph declares (unit roundoff u = 2^-24 for f32, 2^-53 for f64):
//
//   exact ops (neg, abs, max, select, comparisons, layout, gather, casts between equal or
//   wider float types ...)      no change
//   * sqrt cast-to-float        u * |y|           (correctly rounded)
//   + -                         u * (|y| + |a| + |b|)  (an operand may be an unrounded
//                                                  product: FMA contraction)
//   / rsqrt                     2u * |y|          (two roundings when computed as x * (1/y))
//   exp log tanh sigmoid ...    6u * |y|          (vector math: <= 2.2 ulp, docs/codegen.md)
//   gelu                        6u * (|y| + |x|)  (an absolute floor where 1 + tanh cancels)
//   sum mean matmul conv pool   (1 + sqrt(n)) u * op(|inputs|)   (n terms per result, any order)
//   prod                        n u * |y|
//   softmax, log_softmax, logsumexp: the exp/log error plus the sum's, as documented below
//   attention, attention_grad   their unfused decomposition (attention_decomposed.h), every
//                               op of it rounded by this model
//
// The rows above are the rounding classes of ir/ops.def (its `rounding` column, RoundingClass):
// the model switches on an op's class, never on a default, so an op added without a class does
// not compile and one of a class that needs its own case here throws.
//
// Runs of the reference executor with this hook are samples of "some correct rounding", so the
// spread of their results around the float64 value measures how much the rounding of each
// intermediate value can move each result: cancellation, a badly conditioned layer norm or a
// comparison near a tie all show up as a wide spread (tests/support/error_bound.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/kernels.h"
#include "tests/support/attention_decomposed.h"

namespace kiln::testing {

// The elements of `a` (any dtype) as doubles.
inline std::vector<double> as_doubles(const runtime::Array& a) {
  std::vector<double> v(size_t(a.size()));
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(a.raw());
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(p[i]);
  });
  return v;
}

class RoundingModel {
 public:
  explicit RoundingModel(uint64_t seed) : rng_(seed) {}

  void operator()(OpKind op, const Attrs& attrs, std::span<const runtime::Array> in,
                  runtime::Array& out, DType declared) {
    if (declared != DType::f32 && declared != DType::f64) return;
    if (out.dtype != DType::f32 && out.dtype != DType::f64) return;
    const double u = declared == DType::f32 ? 0x1p-24 : 0x1p-53;
    const int64_t size = out.size();
    if (size == 0) return;
    std::vector<double> y = values(out);
    std::vector<double> scale(size_t(size), 0.0);  // the error bound of each element
    // The op's rounding class (the `rounding` column of ir/ops.def): no default, so a class
    // added there fails to compile here (-Wswitch) until it is modelled, and an op of a class
    // that needs the op's own case (accumulation, normalization, decomposed) throws below.
    switch (op_info(op).rounding) {
      case RoundingClass::Exact:
        return;
      case RoundingClass::Addition: {
        // FMA contraction: an operand that is a product may be used unrounded (fma(a, b, c)
        // for a * b + c), so the result may be off by an operand's rounding as well.
        std::vector<double> a = values(in[0]), b = values(in[1]);
        for (int64_t i = 0; i < size; ++i)
          scale[i] = u * (std::abs(y[i]) + std::abs(a[broadcast_index(in[0], out, i)]) +
                          std::abs(b[broadcast_index(in[1], out, i)]));
        break;
      }
      case RoundingClass::Rounded:
        for (int64_t i = 0; i < size; ++i) scale[i] = u * std::abs(y[i]);
        break;
      case RoundingClass::TwoRoundings:
        for (int64_t i = 0; i < size; ++i) scale[i] = 2 * u * std::abs(y[i]);
        break;
      case RoundingClass::VectorMath:
        for (int64_t i = 0; i < size; ++i) scale[i] = kMath * u * std::abs(y[i]);
        break;
      case RoundingClass::VectorMathOperand: {
        std::vector<double> x = values(in[0]);
        for (int64_t i = 0; i < size; ++i)
          scale[i] = kMath * u * (std::abs(y[i]) + std::abs(x[size_t(i)]));
        break;
      }
      case RoundingClass::Product: {
        double n = double(in[0].size()) / double(size);
        for (int64_t i = 0; i < size; ++i) scale[i] = n * u * std::abs(y[i]);
        break;
      }
      case RoundingClass::Normalization:
        normalization(op, attrs, in, y, u, scale);
        break;
      case RoundingClass::Accumulation:
        accumulated(op, attrs, in, terms(op, attrs, in, size), u, scale);
        break;
      case RoundingClass::Decomposed:
        if (op != OpKind::Attention && op != OpKind::AttentionGrad) unmodelled(op);
        // A fused op may be off by what its unfused ops may be off by: the same value computed
        // by them, each of their results moved by this model.
        out =
            attention_decomposed(op, attrs, in,
                                 [&](OpKind o, const Attrs& a, std::span<const runtime::Array> args,
                                     runtime::Array& r) { (*this)(o, a, args, r, declared); });
        return;
    }
    std::uniform_real_distribution<double> r(-1.0, 1.0);
    for (int64_t i = 0; i < size; ++i)
      if (std::isfinite(y[i]) && std::isfinite(scale[i])) y[i] += r(rng_) * scale[i];
    store(out, y);
  }

  // The vector-math allowance in units of u (docs/codegen.md: <= 2.2 ulp = 4.4 u).
  static constexpr double kMath = 6;

  // Whether the model has the op's own case where its rounding class needs one (accumulation:
  // its number of terms; normalization and decomposed: their formulas). The op row
  // completeness test (tests/ops/op_row_completeness_test.cc) asks this of every op.
  static bool models(OpKind op) {
    switch (op_info(op).rounding) {
      case RoundingClass::Accumulation:
        return has_term_count(op);
      case RoundingClass::Normalization:
        return op == OpKind::Softmax || op == OpKind::LogSoftmax || op == OpKind::LogSumExp;
      case RoundingClass::Decomposed:
        return op == OpKind::Attention || op == OpKind::AttentionGrad;
      case RoundingClass::Exact:
      case RoundingClass::Rounded:
      case RoundingClass::Addition:
      case RoundingClass::TwoRoundings:
      case RoundingClass::VectorMath:
      case RoundingClass::VectorMathOperand:
      case RoundingClass::Product:
        return true;
    }
    return false;
  }

 private:
  // Whether terms() knows the op (keep the two in step).
  static bool has_term_count(OpKind op) {
    switch (op) {
      case OpKind::Sum:
      case OpKind::Mean:
      case OpKind::MatMul:
      case OpKind::Conv2D:
      case OpKind::Conv2DBackpropInput:
      case OpKind::Conv2DBackpropFilter:
      case OpKind::ScatterAdd:
      case OpKind::AvgPool2D:
      case OpKind::AvgPool2DGrad:
      case OpKind::MaxPool2DGrad:
        return true;
      default:
        return false;
    }
  }

  [[noreturn]] static void unmodelled(OpKind op) {
    throw std::logic_error(std::string("tests/support/rounding_model.h has no case for op \"") +
                           op_name(op) + "\" of rounding class " +
                           std::string(rounding_class_word(op_info(op).rounding)));
  }

  // The number of terms summed into each result of an accumulation op.
  static double terms(OpKind op, const Attrs& attrs, std::span<const runtime::Array> in,
                      int64_t size) {
    switch (op) {
      case OpKind::Sum:
      case OpKind::Mean:
        return double(in[0].size()) / double(size);
      case OpKind::MatMul: {
        const Shape& a = in[0].shape;
        bool ta = attrs.get_bool("transpose_a", "matmul");
        return double(a[ta ? a.rank() - 2 : a.rank() - 1]);
      }
      case OpKind::Conv2D:
      case OpKind::Conv2DBackpropInput:
      case OpKind::Conv2DBackpropFilter:
      case OpKind::ScatterAdd:  // at most every input element lands on one result
        return double(std::max(in[0].size(), in[1].size()));
      case OpKind::AvgPool2D:
      case OpKind::AvgPool2DGrad:
      case OpKind::MaxPool2DGrad: {
        double n = 1;
        for (int64_t p : attrs.get_ints("pool_size", "pool")) n *= double(p);
        return n;
      }
      default:
        unmodelled(op);
    }
  }

  // softmax, log_softmax, logsumexp: the exp / log error plus the sum's.
  static void normalization(OpKind op, const Attrs& attrs, std::span<const runtime::Array> in,
                            const std::vector<double>& y, double u, std::vector<double>& scale) {
    const size_t size = y.size();
    switch (op) {
      case OpKind::Softmax: {
        // y = exp(x - max) / sum: the exp and the division, the sum of n positive terms, and
        // the rounding of x - max (|x - max| <= |log y| + log n) amplified by exp.
        double n = double(in[0].shape[axis(attrs, in[0])]);
        for (size_t i = 0; i < size; ++i)
          if (y[i] != 0 && std::isfinite(y[i]))
            scale[i] =
                u * std::abs(y[i]) *
                (kMath + 1 + std::sqrt(n) + std::abs(std::log(std::abs(y[i]))) + std::log(n));
        return;
      }
      case OpKind::LogSoftmax: {
        // y = x - (max + log sum): the subtraction of terms up to |x| + |y|, and log's and the
        // sum's relative errors as absolute ones.
        double n = double(in[0].shape[axis(attrs, in[0])]);
        std::vector<double> x = values(in[0]);
        for (size_t i = 0; i < size; ++i)
          scale[i] = u * (2 * std::abs(x[i]) + std::abs(y[i]) + kMath + std::sqrt(n));
        return;
      }
      case OpKind::LogSumExp: {
        // y = max + log sum with max <= y <= max + log n.
        double n = double(in[0].size()) / double(size);
        for (size_t i = 0; i < size; ++i)
          scale[i] = u * (2 * std::abs(y[i]) + std::log(n) + kMath + std::sqrt(n));
        return;
      }
      default:
        unmodelled(op);
    }
  }

  // The element of `in` (broadcast numpy-style to out's shape) that out's element i reads.
  static size_t broadcast_index(const runtime::Array& in, const runtime::Array& out, int64_t i) {
    if (in.size() == out.size()) return size_t(i);
    if (in.size() == 1) return 0;
    int64_t index = 0, stride = 1, rest = i;
    const int rank = out.shape.rank(), in_rank = in.shape.rank();
    for (int d = rank - 1; d >= 0; --d) {
      int64_t coord = rest % out.shape[d];
      rest /= out.shape[d];
      int id = d - (rank - in_rank);
      if (id < 0) break;
      if (in.shape[id] != 1) index += coord * stride;
      stride *= in.shape[id];
    }
    return size_t(index);
  }

  static int64_t axis(const Attrs& attrs, const runtime::Array& x) {
    int64_t a = attrs.get_int("axis", "softmax");
    return a < 0 ? a + x.shape.rank() : a;
  }

  // Sums of n terms in any order: (1 + sqrt(n)) u times the same op on |inputs| (a sum's
  // rounding error is at most (n - 1) u sum|x|, and about sqrt(n) u sum|x| for errors of
  // random sign; the 1 is the final rounding). Index inputs (integers) and max_pool2d_grad's
  // first input (it selects positions) are kept as they are.
  static void accumulated(OpKind op, const Attrs& attrs, std::span<const runtime::Array> in,
                          double n, double u, std::vector<double>& scale) {
    std::vector<runtime::Array> abs_in(in.begin(), in.end());
    for (size_t k = 0; k < abs_in.size(); ++k) {
      bool is_float = in[k].dtype == DType::f32 || in[k].dtype == DType::f64;
      if (!is_float || (op == OpKind::MaxPool2DGrad && k == 0)) continue;
      runtime::Array one[1] = {in[k]};
      abs_in[k] = runtime::run_op(OpKind::Abs, one, {});
    }
    std::vector<double> m = values(runtime::run_op(op, abs_in, attrs));
    double k = 1 + std::sqrt(std::max(n, 1.0));
    for (size_t i = 0; i < scale.size() && i < m.size(); ++i) scale[i] = k * u * m[i];
  }

  static std::vector<double> values(const runtime::Array& a) { return as_doubles(a); }

  // Replaces `a` by a new array holding `v` (a kernel may have returned an input's storage).
  static void store(runtime::Array& a, const std::vector<double>& v) {
    a = runtime::Array::empty(a.type());
    if (a.dtype == DType::f32) {
      float* p = a.data<float>();
      for (size_t i = 0; i < v.size(); ++i) p[i] = float(v[i]);
    } else {
      double* p = a.data<double>();
      for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace kiln::testing
