// Shape and data-movement ops against hand-computed values and naive index loops: reshape,
// transpose, broadcast_to, squeeze, expand_dims, concat, stack, slice, pad, gather,
// scatter_add, one_hot.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"

namespace kiln {
namespace {

using test::expect_tensor;
using test::for_each_index;

// 0, 1, 2, ... as doubles.
std::vector<double> iota(int64_t n, double start = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

Tensor iota_tensor(const Shape& s, DType dt = DType::f32) {
  return tensor(iota(s.num_elements()), s, dt);
}

int64_t flat_index(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

TEST(ShapeOps, Reshape) {
  Tensor x = iota_tensor({2, 3, 4});
  expect_tensor(reshape(x, {4, 6}), DType::f32, Shape{4, 6}, iota(24));
  expect_tensor(reshape(x, {4, -1}), DType::f32, Shape{4, 6}, iota(24));
  expect_tensor(reshape(x, {-1}), DType::f32, Shape{24}, iota(24));
  expect_tensor(reshape(x, {2, -1, 3}), DType::f32, Shape{2, 4, 3}, iota(24));
  expect_tensor(reshape(tensor({7}, Shape{1, 1}, DType::i64), {}), DType::i64, Shape{}, {7});
  expect_tensor(reshape(scalar(5), {1, 1, 1}), DType::f32, Shape{1, 1, 1}, {5});
  expect_tensor(reshape(zeros({0, 3}), {3, 0}), DType::f32, Shape{3, 0}, {});
  expect_tensor(reshape(zeros({0, 3}), {-1, 3}), DType::f32, Shape{0, 3}, {});
}

TEST(ShapeOps, TransposeMatchesIndexLoopForEveryPermutation) {
  const std::vector<int64_t> shape = {2, 3, 4};
  std::vector<int64_t> perm = {0, 1, 2};
  Tensor x = iota_tensor(Shape(shape), DType::i64);
  do {
    SCOPED_TRACE(Shape(perm).to_string());
    std::vector<int64_t> out_shape;
    for (int64_t p : perm) out_shape.push_back(shape[size_t(p)]);
    std::vector<double> want;
    for_each_index(out_shape, [&](int64_t, const std::vector<int64_t>& idx) {
      std::vector<int64_t> in(3);
      for (size_t d = 0; d < 3; ++d) in[size_t(perm[d])] = idx[d];
      want.push_back(double(flat_index(shape, in)));
    });
    expect_tensor(transpose(x, perm), DType::i64, Shape(out_shape), want);
    expect_tensor(permute(x, perm), DType::i64, Shape(out_shape), want);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(ShapeOps, TransposeDefaultReversesAxes) {
  Tensor m = iota_tensor({2, 3});
  expect_tensor(transpose(m), DType::f32, Shape{3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor x = iota_tensor({2, 3, 4});
  EXPECT_EQ(transpose(x).shape(), (Shape{4, 3, 2}));
  expect_tensor(transpose(x), DType::f32, Shape{4, 3, 2},
                transpose(x, {2, 1, 0}).to_vector<double>());
  expect_tensor(transpose(tensor({1.f, 2.f})), DType::f32, Shape{2}, {1, 2});
  expect_tensor(transpose(tensor<bool>({true, false, false, true}, Shape{2, 2})), DType::b8,
                Shape{2, 2}, {1, 0, 0, 1});
}

TEST(ShapeOps, BroadcastTo) {
  Tensor c = tensor({1.f, 2.f, 3.f}, Shape{3, 1});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(j + 1);
  expect_tensor(broadcast_to(c, {2, 3, 4}), DType::f32, Shape{2, 3, 4}, want);
  expect_tensor(broadcast_to(scalar(7, DType::i32), {2, 2}), DType::i32, Shape{2, 2}, {7, 7, 7, 7});
  expect_tensor(broadcast_to(tensor({1.f, 2.f}), {2, 2}), DType::f32, Shape{2, 2}, {1, 2, 1, 2});
  expect_tensor(broadcast_to(tensor({1.f}), {0}), DType::f32, Shape{0}, {});
}

TEST(ShapeOps, SqueezeAndExpandDims) {
  Tensor x = iota_tensor({1, 3, 1, 2});
  expect_tensor(squeeze(x), DType::f32, Shape{3, 2}, iota(6));
  expect_tensor(squeeze(x, {0}), DType::f32, Shape{3, 1, 2}, iota(6));
  expect_tensor(squeeze(x, {-2}), DType::f32, Shape{1, 3, 2}, iota(6));
  expect_tensor(squeeze(x, {0, 2}), DType::f32, Shape{3, 2}, iota(6));
  expect_tensor(squeeze(tensor({4.f}, Shape{1, 1})), DType::f32, Shape{}, {4});

  Tensor m = iota_tensor({2, 3});
  EXPECT_EQ(expand_dims(m, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(expand_dims(m, 1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(expand_dims(m, 2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(expand_dims(m, -1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(expand_dims(m, -3).shape(), (Shape{1, 2, 3}));
  expect_tensor(expand_dims(m, 1), DType::f32, Shape{2, 1, 3}, iota(6));
  expect_tensor(expand_dims(scalar(3), 0), DType::f32, Shape{1}, {3});
}

TEST(ShapeOps, Concat) {
  Tensor a = iota_tensor({2, 3}), b = iota_tensor({1, 3}, DType::f32) + 100.0;
  expect_tensor(concat({a, b}, 0), DType::f32, Shape{3, 3}, {0, 1, 2, 3, 4, 5, 100, 101, 102});
  Tensor c = iota_tensor({2, 1}) + 50.0;
  expect_tensor(concat({a, c}, 1), DType::f32, Shape{2, 4}, {0, 1, 2, 50, 3, 4, 5, 51});
  expect_tensor(concat({c, a, c}, -1), DType::f32, Shape{2, 5}, {50, 0, 1, 2, 50, 51, 3, 4, 5, 51});
  // Zero-sized pieces contribute nothing.
  expect_tensor(concat({zeros({0, 3}), a, zeros({0, 3})}, 0), DType::f32, Shape{2, 3}, iota(6));
  expect_tensor(concat({tensor({1, 2}, Shape{2}, DType::i32), tensor({3}, Shape{1}, DType::i32)}),
                DType::i32, Shape{3}, {1, 2, 3});
  // A single tensor comes back as is.
  expect_tensor(concat({a}, 1), DType::f32, Shape{2, 3}, iota(6));
  // Middle axis of a rank-3 tensor.
  Tensor x = iota_tensor({2, 1, 2}), y = iota_tensor({2, 2, 2}) + 10.0;
  expect_tensor(concat({x, y}, 1), DType::f32, Shape{2, 3, 2},
                {0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17});
}

TEST(ShapeOps, Stack) {
  Tensor a = iota_tensor({2, 3}), b = iota_tensor({2, 3}) + 10.0;
  expect_tensor(stack({a, b}), DType::f32, Shape{2, 2, 3},
                {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  expect_tensor(stack({a, b}, 1), DType::f32, Shape{2, 2, 3},
                {0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15});
  expect_tensor(stack({a, b}, -1), DType::f32, Shape{2, 3, 2},
                {0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15});
  expect_tensor(stack({scalar(1), scalar(2), scalar(3)}), DType::f32, Shape{3}, {1, 2, 3});
}

// numpy x[start:stop:step] along one axis of size d (positive step).
std::vector<int64_t> ref_slice_indices(int64_t d, int64_t start, int64_t stop, int64_t step) {
  auto norm = [d](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + d : v, 0, d); };
  std::vector<int64_t> out;
  for (int64_t i = norm(start); i < norm(stop); i += step) out.push_back(i);
  return out;
}

TEST(ShapeOps, Slice1D) {
  Tensor x = iota_tensor({10}, DType::i32);
  struct Case {
    int64_t start, stop, step;
  };
  for (Case c : std::vector<Case>{{2, 8, 3},
                                  {0, 10, 4},
                                  {-3, 100, 1},
                                  {-100, 3, 1},
                                  {5, 2, 1},
                                  {3, 3, 1},
                                  {-1, 10, 5},
                                  {0, -1, 2},
                                  {1, 10, 20},
                                  {100, 200, 1}}) {
    SCOPED_TRACE(fmt::format("[{}:{}:{}]", c.start, c.stop, c.step));
    std::vector<double> want;
    for (int64_t i : ref_slice_indices(10, c.start, c.stop, c.step)) want.push_back(double(i));
    expect_tensor(slice(x, {c.start}, {c.stop}, {c.step}), DType::i32, Shape{int64_t(want.size())},
                  want);
  }
  expect_tensor(slice(x, {7}, {9}), DType::i32, Shape{2}, {7, 8});
}

TEST(ShapeOps, Slice3D) {
  const std::vector<int64_t> shape = {4, 5, 6};
  Tensor x = iota_tensor(Shape(shape));
  const Axes start = {1, -4, 0}, stop = {100, 5, -1}, step = {2, 2, 3};
  std::vector<std::vector<int64_t>> keep(3);
  for (size_t d = 0; d < 3; ++d) keep[d] = ref_slice_indices(shape[d], start[d], stop[d], step[d]);
  std::vector<double> want;
  for (int64_t i : keep[0])
    for (int64_t j : keep[1])
      for (int64_t k : keep[2]) want.push_back(double(flat_index(shape, {i, j, k})));
  expect_tensor(slice(x, start, stop, step), DType::f32,
                Shape{int64_t(keep[0].size()), int64_t(keep[1].size()), int64_t(keep[2].size())},
                want);
  // A slice of a transposed tensor (non-trivial strides in the source).
  Tensor t = transpose(iota_tensor({3, 4}));
  expect_tensor(slice(t, {1, 0}, {4, 3}, {2, 2}), DType::f32, Shape{2, 2}, {1, 9, 3, 11});
}

// Reference pad with zeros: low/high/interior per axis.
std::vector<double> ref_pad(const std::vector<double>& x, const std::vector<int64_t>& shape,
                            const Axes& low, const Axes& interior,
                            const std::vector<int64_t>& out_shape) {
  std::vector<double> out(size_t(Shape(out_shape).num_elements()), 0.0);
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
    std::vector<int64_t> o(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) o[d] = low[d] + idx[d] * (interior[d] + 1);
    out[size_t(flat_index(out_shape, o))] = x[size_t(flat)];
  });
  return out;
}

TEST(ShapeOps, Pad) {
  expect_tensor(pad(tensor({1.f, 2.f, 3.f}), {2}, {1}, {1}), DType::f32, Shape{8},
                {0, 0, 1, 0, 2, 0, 3, 0});
  expect_tensor(pad(tensor({1, 2}, Shape{2}, DType::i64), {0}, {2}), DType::i64, Shape{4},
                {1, 2, 0, 0});
  // Rank 3 with every kind of padding.
  const std::vector<int64_t> shape = {2, 3, 2};
  const Axes low = {1, 0, 2}, high = {0, 2, 1}, interior = {2, 1, 0};
  std::vector<int64_t> out_shape;
  for (size_t d = 0; d < 3; ++d)
    out_shape.push_back(low[d] + high[d] + shape[d] + (shape[d] - 1) * interior[d]);
  EXPECT_EQ(out_shape, (std::vector<int64_t>{5, 7, 5}));
  Tensor x = iota_tensor(Shape(shape)) + 1.0;
  expect_tensor(pad(x, low, high, interior), DType::f32, Shape(out_shape),
                ref_pad(x.to_vector<double>(), shape, low, interior, out_shape));
  // Empty input: only low + high remain.
  expect_tensor(pad(zeros({0, 2}), {1, 0}, {1, 1}, {3, 0}), DType::f32, Shape{2, 3},
                {0, 0, 0, 0, 0, 0});
}

// Reference numpy take along `axis`.
std::vector<double> ref_gather(const std::vector<double>& p, const std::vector<int64_t>& ps,
                               const std::vector<int64_t>& idx, const std::vector<int64_t>& is,
                               int axis, std::vector<int64_t>& out_shape) {
  out_shape.assign(ps.begin(), ps.begin() + axis);
  out_shape.insert(out_shape.end(), is.begin(), is.end());
  out_shape.insert(out_shape.end(), ps.begin() + axis + 1, ps.end());
  std::vector<double> out;
  for_each_index(out_shape, [&](int64_t, const std::vector<int64_t>& o) {
    std::vector<int64_t> in(o.begin(), o.begin() + axis);
    std::vector<int64_t> j(o.begin() + axis, o.begin() + axis + int64_t(is.size()));
    in.push_back(idx[size_t(flat_index(is, j))]);
    in.insert(in.end(), o.begin() + axis + int64_t(is.size()), o.end());
    out.push_back(p[size_t(flat_index(ps, in))]);
  });
  return out;
}

TEST(ShapeOps, GatherMatchesNumpyTake) {
  const std::vector<int64_t> ps = {3, 4, 2};
  Tensor params = iota_tensor(Shape(ps), DType::f64);
  std::vector<double> p = params.to_vector<double>();
  struct Case {
    std::vector<int64_t> idx, is;
    int axis;
  };
  for (const Case& c : std::vector<Case>{{{2, 0, 2}, {3}, 0},
                                         {{3, 1, 0, 3}, {2, 2}, 1},
                                         {{1}, {}, 2},
                                         {{1, 0, 1, 1, 0, 0}, {3, 2}, 2},
                                         {{}, {0}, 1}}) {
    for (DType it : {DType::i32, DType::i64}) {
      SCOPED_TRACE(
          fmt::format("axis {} indices {} {}", c.axis, Shape(c.is).to_string(), dtype_name(it)));
      std::vector<double> iv(c.idx.begin(), c.idx.end());
      std::vector<int64_t> out_shape;
      std::vector<double> want = ref_gather(p, ps, c.idx, c.is, c.axis, out_shape);
      Tensor idx = tensor(iv, Shape(c.is), it);
      expect_tensor(gather(params, idx, c.axis), DType::f64, Shape(out_shape), want);
      if (c.axis == 2) expect_tensor(gather(params, idx, -1), DType::f64, Shape(out_shape), want);
    }
  }
  // Any dtype can be gathered.
  expect_tensor(gather(tensor<bool>({true, false}), tensor({1, 1, 0}, Shape{3}, DType::i64)),
                DType::b8, Shape{3}, {0, 0, 1});
}

TEST(ShapeOps, ScatterAddSumsDuplicates) {
  Tensor u = iota_tensor({3, 2}) + 1.0;  // [[1, 2], [3, 4], [5, 6]]
  Tensor idx = tensor({1, 0, 1}, Shape{3}, DType::i64);
  expect_tensor(scatter_add(u, idx, 0, 3), DType::f32, Shape{3, 2}, {3, 4, 6, 8, 0, 0});
  // Along axis 1.
  Tensor v = iota_tensor({2, 3}, DType::i32);  // [[0, 1, 2], [3, 4, 5]]
  expect_tensor(scatter_add(v, tensor({3, 3, 0}, Shape{3}, DType::i32), 1, 4), DType::i32,
                Shape{2, 4}, {2, 0, 0, 1, 5, 0, 0, 7});
  // 2-D indices: updates (2, 2, 3), indices (2, 2) at axis 0 -> (5, 3).
  Tensor w = iota_tensor({2, 2, 3});
  Tensor ii = tensor({4, 0, 4, 2}, Shape{2, 2}, DType::i64);
  expect_tensor(scatter_add(w, ii, 0, 5), DType::f32, Shape{5, 3},
                {3, 4, 5, 0, 0, 0, 9, 10, 11, 0, 0, 0, 6, 8, 10});
}

TEST(ShapeOps, ScatterAddIsTheAdjointOfGather) {
  // <gather(p, i), u> == <p, scatter_add(u, i)> for any p, u.
  Tensor p = tensor(test::test_values(20, -1, 1, 1), Shape{4, 5});
  Tensor i = tensor({3, 1, 3, 0, 3, 1}, Shape{2, 3}, DType::i64);
  Tensor u = tensor(test::test_values(24, -1, 1, 2), Shape{4, 2, 3});
  Tensor scattered = scatter_add(u, i, 1, 5);
  EXPECT_EQ(scattered.shape(), (Shape{4, 5}));
  double lhs = sum(gather(p, i, 1) * u).item<double>();
  double rhs = sum(p * scattered).item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-12);
  // And against a direct loop.
  std::vector<double> uv = u.to_vector<double>(), iv = i.to_vector<double>();
  std::vector<double> want(20, 0.0);
  for (size_t r = 0; r < 4; ++r)
    for (size_t j = 0; j < 6; ++j) want[r * 5 + size_t(iv[j])] += uv[r * 6 + j];
  expect_tensor(scattered, DType::f64, Shape{4, 5}, want, 1e-15, 1e-15);
}

TEST(ShapeOps, OneHot) {
  Tensor idx = tensor({0, 2, 1, -1, 3}, Shape{5}, DType::i64);
  expect_tensor(one_hot(idx, 3), DType::f32, Shape{5, 3},
                {1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0});
  expect_tensor(one_hot(tensor({1, 0, 0, 1}, Shape{2, 2}, DType::i32), 2, DType::i32), DType::i32,
                Shape{2, 2, 2}, {0, 1, 1, 0, 1, 0, 0, 1});
  expect_tensor(one_hot(scalar(1, DType::i64), 4, DType::f64), DType::f64, Shape{4}, {0, 1, 0, 0});
  expect_tensor(one_hot(tensor({2}, Shape{1}, DType::i32), 3, DType::b8), DType::b8, Shape{1, 3},
                {0, 0, 1});
}

}  // namespace
}  // namespace kiln
