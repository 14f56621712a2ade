// Eager indexing kernels (gather, scatter_add, one_hot) against naive reference loops written
// here. Every dtype the op accepts is covered; inputs come from fixed seeds; bad indices throw.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kiln/runtime/kernels.h"
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

// ---------------------------------------------------------------- references

int64_t index_at(const Array& idx, int64_t j) {
  return idx.dtype == DType::i32 ? idx.data<int32_t>()[j] : idx.data<int64_t>()[j];
}

Array ref_gather(const Array& p, const Array& idx, int axis) {
  Shape os;
  for (int i = 0; i < axis; ++i) os.push_back(p.shape[i]);
  for (int64_t d : idx.shape) os.push_back(d);
  for (int i = axis + 1; i < p.shape.rank(); ++i) os.push_back(p.shape[i]);
  Array out = Array::empty(p.dtype, os);
  const int ir = idx.shape.rank();
  for (int64_t f = 0; f < out.size(); ++f) {
    Index oi = unravel(f, os), pi;
    for (int i = 0; i < axis; ++i) pi.push_back(oi[size_t(i)]);
    Index ii(oi.begin() + axis, oi.begin() + axis + ir);
    pi.push_back(index_at(idx, ravel(ii, idx.shape)));
    for (size_t i = size_t(axis + ir); i < oi.size(); ++i) pi.push_back(oi[i]);
    copy_elem(p, ravel(pi, p.shape), out, f);
  }
  return out;
}

// out = 0; for each update element in row-major order: out[..., idx[j], ...] += u[..., j, ...].
template <typename T>
Array ref_scatter_add(const Array& u, const Array& idx, int axis, int64_t dim) {
  Shape os;
  const int ir = idx.shape.rank();
  for (int i = 0; i < axis; ++i) os.push_back(u.shape[i]);
  os.push_back(dim);
  for (int i = axis + ir; i < u.shape.rank(); ++i) os.push_back(u.shape[i]);
  Array out = Array::zeros(u.dtype, os);
  for (int64_t f = 0; f < u.size(); ++f) {
    Index ui = unravel(f, u.shape), oi;
    for (int i = 0; i < axis; ++i) oi.push_back(ui[size_t(i)]);
    Index ii(ui.begin() + axis, ui.begin() + axis + ir);
    oi.push_back(index_at(idx, ravel(ii, idx.shape)));
    for (size_t i = size_t(axis + ir); i < ui.size(); ++i) oi.push_back(ui[i]);
    out.data<T>()[ravel(oi, os)] += u.data<T>()[f];
  }
  return out;
}

Array random_indices(DType dt, const Shape& s, int64_t dim, std::mt19937_64& rng) {
  Array a = Array::empty(dt, s);
  for (int64_t i = 0; i < a.size(); ++i) {
    int64_t v = int64_t(rng() % uint64_t(dim));
    if (dt == DType::i32)
      a.data<int32_t>()[i] = int32_t(v);
    else
      a.data<int64_t>()[i] = v;
  }
  return a;
}

// ---------------------------------------------------------------- gather

TEST(GatherKernels, AxesAndMultiDimIndices) {
  std::mt19937_64 rng(12);
  const Shape ps{5, 6, 7};
  int case_no = 0;
  for (int axis : {0, 1, 2}) {
    for (const Shape& is : {Shape{}, Shape{4}, Shape{2, 3}, Shape{0, 2}}) {
      for (DType it : {DType::i32, DType::i64}) {
        DType dt = kAllDTypes[size_t(case_no++) % std::size(kAllDTypes)];
        Array p = random_elements(dt, ps, rng);
        Array idx = random_indices(it, is, ps[axis], rng);
        SCOPED_TRACE("axis " + std::to_string(axis) + " indices " + is.to_string());
        expect_same(run(OpKind::Gather, {p, idx}, {{"axis", int64_t(axis)}}),
                    ref_gather(p, idx, axis));
        expect_same(run(OpKind::Gather, {p, idx}, {{"axis", int64_t(axis - 3)}}),
                    ref_gather(p, idx, axis));
      }
    }
  }
}

TEST(GatherKernels, AllDTypesAndLarge) {
  std::mt19937_64 rng(13);
  for (DType dt : kAllDTypes) {
    Array p = random_elements(dt, {1000, 64}, rng);  // an embedding table
    Array idx = random_indices(DType::i64, {50, 40}, 1000, rng);
    expect_same(run(OpKind::Gather, {p, idx}, {{"axis", int64_t{0}}}), ref_gather(p, idx, 0));
    Array q = random_elements(dt, {300, 500}, rng);
    Array jdx = random_indices(DType::i32, {3, 70}, 500, rng);
    expect_same(run(OpKind::Gather, {q, jdx}, {{"axis", int64_t{-1}}}), ref_gather(q, jdx, 1));
  }
}

TEST(GatherKernels, BadIndicesThrowWithDetails) {
  Array p = make<float>({2, 5}, std::vector<float>(10, 1.0f));
  auto expect_error = [&](const Array& idx, const std::vector<std::string>& parts) {
    try {
      run(OpKind::Gather, {p, idx}, {{"axis", int64_t{1}}});
      FAIL() << "expected kiln::Error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  };
  expect_error(make<int32_t>({2, 2}, {0, 4, 5, 1}),
               {"gather", "index 5", "(1, 0)", "[0, 5)", "(2, 5)"});
  expect_error(make<int64_t>({3}, {1, -1, 2}),
               {"gather", "index -1", "(1,)", "[0, 5)", "negative"});
  expect_error(make<int64_t>({1}, {int64_t{1} << 40}), {"index 1099511627776", "(0,)"});
  // Gathering from an empty axis: every index is out of range.
  Array empty = Array::empty(DType::f32, {0, 3});
  EXPECT_THROW(run(OpKind::Gather, {empty, make<int32_t>({1}, {0})}, {{"axis", int64_t{0}}}),
               Error);
}

// ---------------------------------------------------------------- scatter_add

template <typename T>
void check_scatter(DType it, int axis, const Shape& us, int idx_rank, int64_t dim,
                   std::mt19937_64& rng) {
  Array u = random_elements(dtype_of<T>(), us, rng);
  Shape is;
  for (int i = 0; i < idx_rank; ++i) is.push_back(us[axis + i]);
  Array idx = random_indices(it, is, dim, rng);
  SCOPED_TRACE(std::string(dtype_name(dtype_of<T>())) + " axis " + std::to_string(axis) +
               " updates " + us.to_string());
  expect_same(run(OpKind::ScatterAdd, {u, idx}, {{"axis", int64_t(axis)}, {"dim_size", dim}}),
              ref_scatter_add<T>(u, idx, axis, dim));
}

TEST(ScatterAddKernels, AxesRepeatedIndicesAllNumericDTypes) {
  std::mt19937_64 rng(14);
  for (DType it : {DType::i32, DType::i64}) {
    // axis 0 with (2, 3) indices into 4 rows (repeats certain), axis 1, and the last axis.
    check_scatter<float>(it, 0, {2, 3, 5}, 2, 4, rng);
    check_scatter<double>(it, 1, {3, 6, 4}, 1, 3, rng);
    check_scatter<int32_t>(it, 2, {3, 4, 2, 5}, 2, 7, rng);
    check_scatter<int64_t>(it, 1, {2, 0, 3}, 1, 4, rng);  // no updates: zeros
    check_scatter<uint8_t>(it, 0, {10, 3}, 1, 2, rng);
    check_scatter<float>(it, 0, {0}, 1, 0, rng);  // empty everything
  }
}

TEST(ScatterAddKernels, AdjointOfGather) {
  std::mt19937_64 rng(15);
  Array p = random_elements(DType::f64, {4, 9, 3}, rng);
  Array idx = random_indices(DType::i64, {5, 2}, 9, rng);
  Array g = run(OpKind::Gather, {p, idx}, {{"axis", int64_t{1}}});
  Array u = random_elements(DType::f64, g.shape, rng);
  Array s = run(OpKind::ScatterAdd, {u, idx}, {{"axis", int64_t{1}}, {"dim_size", int64_t{9}}});
  ASSERT_EQ(s.shape, p.shape);
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < g.size(); ++i) lhs += g.data<double>()[i] * u.data<double>()[i];
  for (int64_t i = 0; i < p.size(); ++i) rhs += p.data<double>()[i] * s.data<double>()[i];
  EXPECT_NEAR(lhs, rhs, 1e-9 * std::abs(lhs));
}

TEST(ScatterAddKernels, DeterministicAcrossThreadCounts) {
  std::mt19937_64 rng(16);
  Array u = random_elements(DType::f32, {200000, 3}, rng);
  Array idx = random_indices(DType::i32, {200000}, 100, rng);
  Attrs attrs{{"axis", int64_t{0}}, {"dim_size", int64_t{100}}};
  Array one, many;
  {
    ThreadCount t(1);
    one = run(OpKind::ScatterAdd, {u, idx}, attrs);
  }
  {
    ThreadCount t(2);
    many = run(OpKind::ScatterAdd, {u, idx}, attrs);
  }
  expect_same(one, many);
  expect_same(one, ref_scatter_add<float>(u, idx, 0, 100));
}

TEST(ScatterAddKernels, BadIndicesThrow) {
  Array u = make<float>({3}, {1, 2, 3});
  try {
    run(OpKind::ScatterAdd, {u, make<int32_t>({3}, {0, 4, 1})},
        {{"axis", int64_t{0}}, {"dim_size", int64_t{4}}});
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("scatter_add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 4)"), std::string::npos) << msg;
  }
  EXPECT_THROW(run(OpKind::ScatterAdd, {u, make<int64_t>({3}, {0, -2, 1})},
                   {{"axis", int64_t{0}}, {"dim_size", int64_t{4}}}),
               Error);
}

// ---------------------------------------------------------------- one_hot

TEST(OneHotKernels, OutOfRangeGivesZeroRows) {
  Array idx = make<int32_t>({2, 3}, {0, 3, 2, -1, 4, 1});
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Array y = run(OpKind::OneHot, {idx}, {{"depth", int64_t{4}}, {"dtype", dt}});
    ASSERT_EQ(y.shape, Shape({2, 3, 4}));
    Array want = Array::empty(dt, y.shape);
    visit_storage(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::vector<int> bits = {1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0,
                                     0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
      for (size_t i = 0; i < bits.size(); ++i) want.data<T>()[i] = storage_from_double<T>(bits[i]);
    });
    expect_same(y, want);
  }
}

TEST(OneHotKernels, Int64IndicesLargeAndZeroDepth) {
  std::mt19937_64 rng(17);
  Array idx = random_indices(DType::i64, {5000}, 12, rng);
  idx.data<int64_t>()[7] = int64_t{1} << 40;
  Array y = run(OpKind::OneHot, {idx}, {{"depth", int64_t{10}}, {"dtype", DType::f32}});
  for (int64_t j = 0; j < 5000; ++j) {
    const int64_t v = idx.data<int64_t>()[j];
    for (int64_t d = 0; d < 10; ++d)
      ASSERT_EQ(y.data<float>()[j * 10 + d], v == d ? 1.0f : 0.0f) << j << " " << d;
  }
  Array z = run(OpKind::OneHot, {idx}, {{"depth", int64_t{0}}, {"dtype", DType::b8}});
  EXPECT_EQ(z.shape, Shape({5000, 0}));
}

}  // namespace
}  // namespace kiln::runtime
