// Eager layout kernels (reshape, transpose, broadcast_to, concat, slice, pad) and the
// strided_copy helper, against naive reference loops written here (indexing kernels:
// indexed_kernels_test.cc). Every dtype the op accepts is covered; inputs come from fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/kernels/strided_copy.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/layout_test_util.h"

namespace kiln::runtime {
namespace {

using layout_test::copy_elem;
using layout_test::expect_same;
using layout_test::Index;
using layout_test::make;
using layout_test::random_elements;
using layout_test::ravel;
using layout_test::run;
using layout_test::ThreadCount;
using layout_test::unravel;
using layout_test::values;

// ---------------------------------------------------------------- references

Array ref_transpose(const Array& x, const Index& perm) {
  Shape os;
  for (int64_t p : perm) os.push_back(x.shape[int(p)]);
  Array out = Array::empty(x.dtype, os);
  for (int64_t f = 0; f < out.size(); ++f) {
    Index oi = unravel(f, os), xi(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) xi[size_t(perm[i])] = oi[i];
    copy_elem(x, ravel(xi, x.shape), out, f);
  }
  return out;
}

Array ref_broadcast(const Array& x, const Shape& to) {
  Array out = Array::empty(x.dtype, to);
  const int off = to.rank() - x.shape.rank();
  for (int64_t f = 0; f < out.size(); ++f) {
    Index oi = unravel(f, to), xi(size_t(x.shape.rank()));
    for (int i = 0; i < x.shape.rank(); ++i)
      xi[size_t(i)] = x.shape[i] == 1 ? 0 : oi[size_t(i + off)];
    copy_elem(x, ravel(xi, x.shape), out, f);
  }
  return out;
}

Array ref_concat(const std::vector<Array>& xs, int axis) {
  Shape os = xs[0].shape;
  os[axis] = 0;
  for (const Array& x : xs) os[axis] += x.shape[axis];
  Array out = Array::empty(xs[0].dtype, os);
  for (int64_t f = 0; f < out.size(); ++f) {
    Index oi = unravel(f, os);
    int64_t a = oi[size_t(axis)];
    size_t piece = 0;
    while (a >= xs[piece].shape[axis]) a -= xs[piece++].shape[axis];
    oi[size_t(axis)] = a;
    copy_elem(xs[piece], ravel(oi, xs[piece].shape), out, f);
  }
  return out;
}

// numpy basic slicing with positive steps, written independently of rules::slice_ranges.
Array ref_slice(const Array& x, const Index& start, const Index& stop, const Index& step) {
  std::vector<Index> picks(size_t(x.shape.rank()));
  Shape os;
  for (int i = 0; i < x.shape.rank(); ++i) {
    const int64_t d = x.shape[i];
    auto norm = [&](int64_t v) {
      if (v < 0) v += d;
      return std::min(std::max<int64_t>(v, 0), d);
    };
    for (int64_t v = norm(start[size_t(i)]); v < norm(stop[size_t(i)]); v += step[size_t(i)])
      picks[size_t(i)].push_back(v);
    os.push_back(int64_t(picks[size_t(i)].size()));
  }
  Array out = Array::empty(x.dtype, os);
  for (int64_t f = 0; f < out.size(); ++f) {
    Index oi = unravel(f, os), xi(oi.size());
    for (size_t i = 0; i < oi.size(); ++i) xi[i] = picks[i][size_t(oi[i])];
    copy_elem(x, ravel(xi, x.shape), out, f);
  }
  return out;
}

Array ref_pad(const Array& x, const Index& low, const Index& high, const Index& interior) {
  Shape os;
  for (int i = 0; i < x.shape.rank(); ++i) {
    const int64_t d = x.shape[i];
    os.push_back(low[size_t(i)] + high[size_t(i)] + d +
                 (d > 0 ? (d - 1) * interior[size_t(i)] : 0));
  }
  Array out = Array::zeros(x.dtype, os);
  for (int64_t f = 0; f < x.size(); ++f) {
    Index xi = unravel(f, x.shape);
    for (size_t i = 0; i < xi.size(); ++i) xi[i] = low[i] + xi[i] * (interior[i] + 1);
    copy_elem(x, f, out, ravel(xi, os));
  }
  return out;
}

// ---------------------------------------------------------------- reshape, transpose

TEST(LayoutKernels, ReshapeCopiesBytes) {
  std::mt19937_64 rng(1);
  for (DType dt : kAllDTypes) {
    Array x = random_elements(dt, {2, 3, 4}, rng);
    Array y = run(OpKind::Reshape, {x}, {{"shape", Index{4, -1}}});
    EXPECT_EQ(y.shape, Shape({4, 6}));
    expect_same(y.reshaped(x.shape), x);
  }
}

TEST(LayoutKernels, TransposeRanks0To6RandomPerms) {
  std::mt19937_64 rng(2);
  int case_no = 0;
  for (int rank = 0; rank <= kMaxRank; ++rank) {
    for (int trial = 0; trial < 8; ++trial, ++case_no) {
      Shape s;
      for (int i = 0; i < rank; ++i) s.push_back(int64_t(1 + rng() % 4));
      if (rank > 0 && trial == 7) s[int(rng() % uint64_t(rank))] = 0;  // an empty tensor
      Index perm(static_cast<size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      DType dt = kAllDTypes[size_t(case_no) % std::size(kAllDTypes)];
      Array x = random_elements(dt, s, rng);
      SCOPED_TRACE(s.to_string() + " " + std::string(dtype_name(dt)));
      expect_same(run(OpKind::Transpose, {x}, {{"perm", perm}}), ref_transpose(x, perm));
    }
  }
}

TEST(LayoutKernels, TransposeLargeParallelPaths) {
  std::mt19937_64 rng(3);
  struct Case {
    Shape shape;
    Index perm;
    DType dtype;
  };
  const std::vector<Case> cases = {
      {{513, 1031}, {1, 0}, DType::f32},       // 2-D tiled, ragged tiles
      {{300, 700}, {1, 0}, DType::f64},        // 8-byte elements
      {{999, 1000}, {1, 0}, DType::u8},        // 1-byte elements
      {{200, 301}, {1, 0}, DType::b8},         // bool
      {{64, 300, 40}, {2, 1, 0}, DType::f32},  // tiled with an outer dimension
      {{64, 300, 40}, {0, 2, 1}, DType::i32},  // batched last-two-axes transpose
      {{64, 300, 40}, {1, 0, 2}, DType::i64},  // rows move, lines stay contiguous
      {{8, 16, 32, 3, 20}, {4, 2, 0, 3, 1}, DType::f32},
      {{3, 40000}, {1, 0}, DType::f32},  // short destination lines
      {{40000, 3}, {1, 0}, DType::f64},  // long destination lines, few of them
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shape.to_string());
    Array x = random_elements(c.dtype, c.shape, rng);
    expect_same(run(OpKind::Transpose, {x}, {{"perm", c.perm}}), ref_transpose(x, c.perm));
  }
}

TEST(LayoutKernels, TransposeSameOnOneAndManyThreads) {
  std::mt19937_64 rng(4);
  Array x = random_elements(DType::f32, {257, 129, 33}, rng);
  Attrs attrs{{"perm", Index{2, 0, 1}}};
  Array one, many;
  {
    ThreadCount t(1);
    one = run(OpKind::Transpose, {x}, attrs);
  }
  {
    ThreadCount t(2);
    many = run(OpKind::Transpose, {x}, attrs);
  }
  expect_same(one, many);
}

// ---------------------------------------------------------------- broadcast_to

TEST(LayoutKernels, BroadcastTo) {
  std::mt19937_64 rng(5);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 1, 4}, {2, 3, 5, 4}},
      {{}, {3, 3}},
      {{1}, {7}},
      {{5}, {2, 5}},
      {{2, 1}, {2, 0}},
      {{1, 1000}, {100, 1000}},
      {{100, 1}, {100, 1000}},
      {{4, 1, 1}, {4, 3, 2}},
      {{2, 3}, {2, 3}},
  };
  for (const auto& [from, to] : cases) {
    for (DType dt : kAllDTypes) {
      SCOPED_TRACE(from.to_string() + " -> " + to.to_string() + " " + std::string(dtype_name(dt)));
      Array x = random_elements(dt, from, rng);
      expect_same(run(OpKind::BroadcastTo, {x}, {{"shape", to.to_vector()}}), ref_broadcast(x, to));
    }
  }
}

// ---------------------------------------------------------------- concat

TEST(LayoutKernels, ConcatEachAxisWithEmptyPieces) {
  std::mt19937_64 rng(6);
  const Shape base{3, 4, 5};
  int case_no = 0;
  for (int axis = 0; axis < 3; ++axis) {
    for (const Index& sizes : {Index{2, 0, 3}, Index{1}, Index{0, 0, 4}, Index{0, 0}}) {
      DType dt = kAllDTypes[size_t(case_no++) % std::size(kAllDTypes)];
      std::vector<Array> xs;
      for (int64_t n : sizes) {
        Shape s = base;
        s[axis] = n;
        xs.push_back(random_elements(dt, s, rng));
      }
      for (int64_t a : {int64_t(axis), int64_t(axis - 3)}) {
        SCOPED_TRACE("axis " + std::to_string(a) + " pieces " + std::to_string(sizes.size()));
        expect_same(run(OpKind::Concat, xs, {{"axis", a}}), ref_concat(xs, axis));
      }
    }
  }
}

TEST(LayoutKernels, ConcatAllDTypesAndLarge) {
  std::mt19937_64 rng(7);
  for (DType dt : kAllDTypes) {
    std::vector<Array> xs = {random_elements(dt, {300, 70}, rng),
                             random_elements(dt, {300, 1}, rng),
                             random_elements(dt, {300, 129}, rng)};
    expect_same(run(OpKind::Concat, xs, {{"axis", int64_t{1}}}), ref_concat(xs, 1));
    std::vector<Array> ys = {random_elements(dt, {40000}, rng), random_elements(dt, {70000}, rng)};
    expect_same(run(OpKind::Concat, ys, {{"axis", int64_t{0}}}), ref_concat(ys, 0));
  }
}

// ---------------------------------------------------------------- slice

Attrs slice_attrs(const Index& start, const Index& stop, const Index& step) {
  return {{"start", start}, {"stop", stop}, {"step", step}};
}

TEST(LayoutKernels, SliceNumpySemantics) {
  Array x = make<int32_t>({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto sl = [&](int64_t b, int64_t e, int64_t s) {
    return values<int32_t>(run(OpKind::Slice, {x}, slice_attrs({b}, {e}, {s})));
  };
  EXPECT_EQ(sl(-3, 100, 1), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(sl(2, -2, 3), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(sl(-100, 5, 2), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(sl(8, 3, 1), (std::vector<int32_t>{}));
  EXPECT_EQ(sl(10, 20, 1), (std::vector<int32_t>{}));
  EXPECT_EQ(sl(0, 10, 20), (std::vector<int32_t>{0}));
}

TEST(LayoutKernels, SliceRandomStepsAndClamping) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = 1 + int(rng() % 4);
    Shape s;
    Index start, stop, step;
    for (int i = 0; i < rank; ++i) {
      const int64_t d = int64_t(rng() % 7);
      s.push_back(d);
      start.push_back(int64_t(rng() % 20) - 10);
      stop.push_back(int64_t(rng() % 20) - 10);
      step.push_back(1 + int64_t(rng() % 3));
    }
    DType dt = kAllDTypes[size_t(trial) % std::size(kAllDTypes)];
    Array x = random_elements(dt, s, rng);
    SCOPED_TRACE(s.to_string());
    expect_same(run(OpKind::Slice, {x}, slice_attrs(start, stop, step)),
                ref_slice(x, start, stop, step));
  }
}

TEST(LayoutKernels, SliceLarge) {
  std::mt19937_64 rng(9);
  Array x = random_elements(DType::f32, {400, 600}, rng);
  for (const auto& a : {std::tuple{Index{10, 3}, Index{-10, 590}, Index{1, 1}},
                        std::tuple{Index{0, 1}, Index{400, 600}, Index{3, 2}},
                        std::tuple{Index{5, 0}, Index{300, 600}, Index{1, 1}}}) {
    const auto& [b, e, st] = a;
    expect_same(run(OpKind::Slice, {x}, slice_attrs(b, e, st)), ref_slice(x, b, e, st));
  }
}

// ---------------------------------------------------------------- pad

Attrs pad_attrs(const Index& low, const Index& high, const Index& interior) {
  return {{"low", low}, {"high", high}, {"interior", interior}};
}

TEST(LayoutKernels, PadInteriorExample) {
  Array x = make<float>({3}, {1, 2, 3});
  Array y = run(OpKind::Pad, {x}, pad_attrs({1}, {2}, {1}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{0, 1, 0, 2, 0, 3, 0, 0}));
}

TEST(LayoutKernels, PadRandomAllDTypes) {
  std::mt19937_64 rng(10);
  for (int trial = 0; trial < 48; ++trial) {
    const int rank = int(rng() % 5);
    Shape s;
    Index low, high, interior;
    for (int i = 0; i < rank; ++i) {
      s.push_back(int64_t(rng() % 5));
      low.push_back(int64_t(rng() % 3));
      high.push_back(int64_t(rng() % 3));
      interior.push_back(int64_t(rng() % 3));
    }
    DType dt = kAllDTypes[size_t(trial) % std::size(kAllDTypes)];
    Array x = random_elements(dt, s, rng);
    SCOPED_TRACE(s.to_string());
    expect_same(run(OpKind::Pad, {x}, pad_attrs(low, high, interior)),
                ref_pad(x, low, high, interior));
  }
}

// pad with interior is the adjoint of a strided slice: slicing it back gives the input.
TEST(LayoutKernels, PadUndoesStridedSlice) {
  std::mt19937_64 rng(11);
  Array x = random_elements(DType::f64, {150, 201}, rng);
  const Index low{3, 0}, high{1, 2}, interior{2, 1};
  Array y = run(OpKind::Pad, {x}, pad_attrs(low, high, interior));
  expect_same(y, ref_pad(x, low, high, interior));
  Array back = run(OpKind::Slice, {y},
                   slice_attrs(low, {y.shape[0] - high[0], y.shape[1] - high[1]},
                               {interior[0] + 1, interior[1] + 1}));
  expect_same(back, x);
}

// ---------------------------------------------------------------- strided_copy

TEST(StridedCopy, ReversedSourceIntoStridedDestination) {
  std::vector<int32_t> src(24), dst(100, -1);
  std::iota(src.begin(), src.end(), 0);
  // src viewed as (4, 6) reversed along both axes; dst: every other column of a (4, 12) grid.
  const Index shape{4, 6}, ss{-6, -1}, ds{12, 2};
  strided_copy(4, shape, src.data(), 23, ss, dst.data(), 1, ds);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(dst[size_t(1 + 12 * i + 2 * j)], 23 - (6 * i + j));
  EXPECT_EQ(dst[0], -1);
  EXPECT_EQ(dst[2], -1);
}

TEST(StridedCopy, OddElementSizeAndBroadcastSource) {
  // 3-byte elements, transposed (the byte-dimension path).
  std::vector<uint8_t> src(2 * 3 * 3), dst(src.size());
  std::iota(src.begin(), src.end(), uint8_t{0});
  strided_copy_to_contiguous(3, Index{3, 2}, src.data(), 0, Index{1, 3}, dst.data());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int b = 0; b < 3; ++b)
        EXPECT_EQ(dst[size_t((i * 2 + j) * 3 + b)], src[size_t((j * 3 + i) * 3 + b)]);
  // A zero source stride repeats one element; long single lines split over threads.
  std::vector<double> one{2.5}, out(200000);
  strided_copy_to_contiguous(8, Index{200000}, one.data(), 0, Index{0}, out.data());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](double v) { return v == 2.5; }));
  std::vector<double> big(200000), copy(200000);
  std::iota(big.begin(), big.end(), 0.0);
  strided_copy_to_contiguous(8, Index{200000}, big.data(), 0, Index{1}, copy.data());
  EXPECT_EQ(big, copy);
}

}  // namespace
}  // namespace kiln::runtime
