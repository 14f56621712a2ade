// The data pipeline's transformations on the pulling thread: shuffle (and its equivalence with
// the in-memory fit's order), batch, map, repeat, take, cardinality and argument errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "kiln/kiln.h"
#include "tests/data/pipeline_test_util.h"
#include "tests/support/error_of.h"

namespace kiln::data {
namespace {

using ::kiln::test::error_of;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::kiln::data::test;

TEST(Shuffle, PermutationIsPinned) {
  // Computed by an independent Python transcription of the buffer algorithm (splitmix64,
  // multiply-shift, take buf[j], move the last element into the hole).
  EXPECT_EQ(permutation(10, 7), (std::vector<int64_t>{3, 0, 7, 4, 2, 1, 6, 8, 5, 9}));
  EXPECT_EQ(permutation(10, 8), (std::vector<int64_t>{6, 5, 8, 3, 0, 1, 9, 4, 7, 2}));
  EXPECT_EQ(permutation(5, 7), (std::vector<int64_t>{1, 0, 2, 4, 3}));
  EXPECT_TRUE(permutation(0, 7).empty());
}

// from_tensor_slices(x, y).shuffle(buffer >= n, s).batch(b) gives, on pass k, the rows of
// batch_indices(n, b, true, s + k): the batches the in-memory fit takes in epoch k.
TEST(Shuffle, FullBufferGivesTheInMemoryBatches) {
  const int64_t n = 10, b = 4;
  const uint64_t s = 7;
  Tensor x = rows_x(n), y = rows_y(n);
  for (int64_t buffer : {n, n + 15}) {
    Dataset ds = Dataset::from_tensor_slices(x, y).shuffle(buffer, s).batch(b);
    for (uint64_t k = 0; k < 3; ++k) {
      std::vector<Element> batches = collect(ds, k);
      std::vector<std::vector<int64_t>> expected = batch_indices(n, b, true, s + k);
      ASSERT_EQ(batches.size(), expected.size()) << "buffer " << buffer << " pass " << k;
      for (size_t j = 0; j < batches.size(); ++j) {
        EXPECT_TRUE(same_tensor(batches[j].x.tensors()[0], take_rows(x, expected[j])))
            << "buffer " << buffer << " pass " << k << " batch " << j;
        EXPECT_TRUE(same_tensor(batches[j].y.tensors()[0], take_rows(y, expected[j])));
        EXPECT_TRUE(batches[j].x.single());
        EXPECT_TRUE(batches[j].sample_weight.empty());
      }
    }
  }
  // Pass 0 with seed 7 is the pinned permutation(10, 7) above.
  Dataset ds = Dataset::from_tensor_slices(x, y).shuffle(n, s).batch(b);
  EXPECT_THAT(y_values(collect(ds, 0)), ElementsAre(3, 0, 7, 4, 2, 1, 6, 8, 5, 9));
  // begin_pass() without a number counts passes 0, 1, 2 for this handle and its copies.
  Dataset copy = ds;
  for (uint64_t k = 0; k < 3; ++k) {
    Dataset::Iterator it = (k % 2 ? copy : ds).begin_pass();
    std::vector<int64_t> got;
    while (std::optional<Element> e = it.next())
      for (int64_t v : e->y.tensors()[0].to_vector<int64_t>()) got.push_back(v);
    EXPECT_EQ(got, permutation(n, s + k)) << "pass " << k;
  }
}

TEST(Shuffle, SmallBufferGivesEveryExampleOnceInABoundedOrder) {
  const int64_t n = 8;
  Dataset ds = Dataset::from_tensor_slices(rows_x(n), rows_y(n)).shuffle(3, 5);
  std::vector<int64_t> pass0 = y_values(collect(ds, 0)), pass1 = y_values(collect(ds, 1));
  // Python transcription of the algorithm (pipeline_test's PermutationIsPinned), seeds 5, 6.
  EXPECT_EQ(pass0, (std::vector<int64_t>{1, 2, 0, 5, 6, 3, 4, 7}));
  EXPECT_EQ(pass1, (std::vector<int64_t>{2, 1, 0, 5, 4, 3, 6, 7}));
  for (const std::vector<int64_t>& order : {pass0, pass1}) {
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    // A buffer of 3 can only emit, at output i, one of the first i + 3 examples.
    for (size_t i = 0; i < order.size(); ++i) EXPECT_LE(order[i], int64_t(i) + 2);
  }
  EXPECT_NE(pass0, permutation(n, 5));  // not the full-buffer order
  // Same seed and pass, same order: a second Dataset built alike, and the same pass again.
  Dataset again = Dataset::from_tensor_slices(rows_x(n), rows_y(n)).shuffle(3, 5);
  EXPECT_EQ(y_values(collect(again, 0)), pass0);
  EXPECT_EQ(y_values(collect(ds, 0)), pass0);
  EXPECT_EQ(y_values(collect(ds, 1)), pass1);
  // x rows travel with their y.
  for (const Element& e : collect(ds, 0)) {
    int64_t i = e.y.tensors()[0].item<int64_t>();
    EXPECT_EQ(e.x.tensors()[0].to_vector<float>(),
              (std::vector<float>{float(100 * i), float(100 * i + 1), float(100 * i + 2)}));
  }
}

TEST(Shuffle, RepeatReshufflesEachRepetition) {
  const int64_t n = 6;
  Dataset ds = Dataset::from_tensor_slices(rows_x(n), rows_y(n)).shuffle(n, 11).repeat(2);
  // Pass p holds the shuffle's passes 2p and 2p + 1.
  for (uint64_t p = 0; p < 2; ++p) {
    std::vector<int64_t> expected = permutation(n, 11 + 2 * p);
    std::vector<int64_t> second = permutation(n, 11 + 2 * p + 1);
    expected.insert(expected.end(), second.begin(), second.end());
    EXPECT_EQ(y_values(collect(ds, p)), expected) << "pass " << p;
  }
}

TEST(Batch, KeepsOrDropsTheRemainder) {
  Dataset ds = Dataset::from_tensor_slices(rows_x(10), rows_y(10));
  std::vector<Element> kept = collect(ds.batch(4), 0);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].x.tensors()[0].shape(), Shape({4, 3}));
  EXPECT_EQ(kept[2].x.tensors()[0].shape(), Shape({2, 3}));
  EXPECT_EQ(kept[2].y.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(kept[1].x.tensors()[0].to_vector<float>()[3], 500.0f);  // row 5, column 0
  std::vector<Element> dropped = collect(ds.batch(4, true), 0);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[1].y.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(collect(ds.batch(5, true), 0).size(), 2u);  // no remainder to drop
  EXPECT_EQ(collect(ds.batch(11, true), 0).size(), 0u);
}

TEST(Batch, KeepsListsNamesAndSampleWeights) {
  Tensor a = rows_x(4, 2), b = rows_y(4), w = tensor<float>({0.5f, 1, 2, 4});
  Dataset ds =
      Dataset::from_tensor_slices(Arrays::by_name({{"a", a}, {"b", b}}), std::vector<Tensor>{b}, w)
          .batch(3);
  std::vector<Element> batches = collect(ds, 0);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].x.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(batches[0].x.tensors()[0].shape(), Shape({3, 2}));
  EXPECT_EQ(batches[0].x.tensors()[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FALSE(batches[0].y.single());
  EXPECT_EQ(batches[0].y.size(), 1u);
  EXPECT_TRUE(batches[1].sample_weight.single());
  EXPECT_EQ(batches[1].sample_weight.tensors()[0].to_vector<float>(), (std::vector<float>{4}));
}

TEST(Map, TransformsEveryElement) {
  Dataset ds = Dataset::from_tensor_slices(rows_x(3), rows_y(3)).map([](Element e) {
    Tensor x = e.x.tensors()[0], y = e.y.tensors()[0];
    return Element{x + 1.0, y + y, {sum(x)}};
  });
  EXPECT_EQ(ds.cardinality(), 3);
  std::vector<Element> out = collect(ds.batch(3), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].x.tensors()[0].to_vector<float>(),
            (std::vector<float>{1, 2, 3, 101, 102, 103, 201, 202, 203}));
  EXPECT_EQ(out[0].y.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  // sum of row i: 300 i + 3.
  EXPECT_EQ(out[0].sample_weight.tensors()[0].to_vector<float>(),
            (std::vector<float>{3, 303, 603}));
}

TEST(Repeat, ThenBatchCrossesThePassBoundary) {
  Dataset ds = Dataset::from_tensor_slices(rows_x(5), rows_y(5));
  std::vector<Element> batches = collect(ds.repeat(2).batch(4), 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].y.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[1].y.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{4, 0, 1, 2}));
  EXPECT_EQ(batches[2].y.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ds.repeat(2).batch(4).cardinality(), 3);
  // Endless, cut by take.
  EXPECT_THAT(y_values(collect(ds.repeat().take(12), 0)),
              ElementsAre(0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1));
  EXPECT_TRUE(collect(ds.repeat(0), 0).empty());
  // An endless repeat of an empty pass ends instead of spinning.
  EXPECT_TRUE(collect(ds.take(0).repeat(), 0).empty());
}

TEST(Take, TakesAtMostN) {
  Dataset ds = Dataset::from_tensor_slices(rows_x(5), rows_y(5));
  EXPECT_THAT(y_values(collect(ds.take(3), 0)), ElementsAre(0, 1, 2));
  EXPECT_TRUE(collect(ds.take(0), 0).empty());
  EXPECT_EQ(collect(ds.take(-1), 0).size(), 5u);
  EXPECT_EQ(collect(ds.take(100), 0).size(), 5u);
  // take pulls no more than it returns: a generator sees exactly 2 calls.
  int calls = 0;
  Dataset gen = Dataset::from_generator(
      [&] { return [&]() -> std::optional<Element> { return Element{scalar(double(calls++))}; }; });
  EXPECT_EQ(collect(gen.take(2), 0).size(), 2u);
  EXPECT_EQ(calls, 2);
}

TEST(Cardinality, KnownInfiniteOrUnknown) {
  Dataset ds = Dataset::from_tensor_slices(rows_x(10), rows_y(10));
  Dataset gen = Dataset::from_generator(
      [] { return []() -> std::optional<Element> { return std::nullopt; }; });
  const int64_t inf = Dataset::kInfinite, unknown = Dataset::kUnknown;
  EXPECT_EQ(inf, -1);
  EXPECT_EQ(unknown, -2);
  EXPECT_EQ(ds.cardinality(), 10);
  EXPECT_EQ(ds.batch(3).cardinality(), 4);
  EXPECT_EQ(ds.batch(3, true).cardinality(), 3);
  EXPECT_EQ(ds.take(4).cardinality(), 4);
  EXPECT_EQ(ds.take(40).cardinality(), 10);
  EXPECT_EQ(ds.map([](Element e) { return e; }).cardinality(), 10);
  EXPECT_EQ(ds.shuffle(4, 0).cardinality(), 10);
  EXPECT_EQ(ds.prefetch(2).cardinality(), 10);
  EXPECT_EQ(ds.repeat(3).cardinality(), 30);
  EXPECT_EQ(ds.repeat(0).cardinality(), 0);
  EXPECT_EQ(ds.repeat().cardinality(), inf);
  EXPECT_EQ(ds.repeat().batch(4).cardinality(), inf);
  EXPECT_EQ(ds.repeat().take(5).cardinality(), 5);
  EXPECT_EQ(ds.take(0).repeat().cardinality(), 0);
  EXPECT_EQ(gen.cardinality(), unknown);
  EXPECT_EQ(gen.batch(2).cardinality(), unknown);
  EXPECT_EQ(gen.repeat(2).cardinality(), unknown);
  EXPECT_EQ(gen.repeat().cardinality(), inf);
  EXPECT_EQ(gen.take(3).cardinality(), unknown);
  EXPECT_EQ(gen.take(0).cardinality(), 0);
  EXPECT_EQ(
      Dataset::from_files({"a", "b"}, [](const std::string&) { return Element{}; }).cardinality(),
      2);
}

TEST(Iterator, OutlivesTheDatasetsItCameFrom) {
  Dataset::Iterator it = Dataset::from_tensor_slices(rows_x(3), rows_y(3))
                             .map([](Element e) { return e; })
                             .shuffle(2, 1)
                             .repeat(2)
                             .batch(2)
                             .begin_pass(0);
  int64_t seen = 0;
  while (std::optional<Element> e = it.next()) seen += e->y.tensors()[0].size();
  EXPECT_EQ(seen, 6);
  EXPECT_FALSE(it.next().has_value());  // stays at the end
}

TEST(PipelineErrors, NameTheValues) {
  Dataset ds = Dataset::from_tensor_slices(rows_x(4), rows_y(4));
  EXPECT_THAT(error_of([&] { ds.batch(0); }),
              HasSubstr("Dataset.batch: batch_size must be at least 1, got 0"));
  EXPECT_THAT(error_of([&] { ds.shuffle(0, 1); }),
              HasSubstr("Dataset.shuffle: buffer_size must be at least 1, got 0"));
  EXPECT_THAT(error_of([&] { ds.shuffle(-3, 1); }), HasSubstr("got -3"));
  EXPECT_THAT(error_of([&] { ds.repeat(-2); }),
              HasSubstr("Dataset.repeat: count must be at least -1, got -2"));
  EXPECT_THAT(error_of([&] { ds.take(-7); }),
              HasSubstr("Dataset.take: n must be at least -1, got -7"));
  EXPECT_THAT(error_of([&] { ds.prefetch(0); }),
              HasSubstr("Dataset.prefetch: buffer_size must be at least 1, got 0"));
  EXPECT_THAT(error_of([&] { Dataset::from_tensor_slices(rows_x(4), rows_y(3)); }),
              AllOf(HasSubstr("x has 4 examples (a tensor of shape (4, 3))"),
                    HasSubstr("y has 3 (a tensor of shape (3,))")));
  EXPECT_THAT(error_of([&] { Dataset::from_tensor_slices(scalar(1.0)); }),
              HasSubstr("a tensor is a scalar"));
  EXPECT_THAT(error_of([&] { Dataset::from_tensor_slices(Arrays()); }),
              HasSubstr("no tensors were given"));
}

TEST(PipelineErrors, BatchNamesMismatchedElements) {
  // Elements 0, 1 have x of shape (2,); element 2 has (3,); element 3 is a list.
  auto gen = [] {
    return [i = 0]() mutable -> std::optional<Element> {
      switch (i++) {
        case 0:
        case 1:
          return Element{zeros({2})};
        case 2:
          return Element{zeros({3})};
        case 3:
          return Element{std::vector<Tensor>{zeros({3})}};
        default:
          return std::nullopt;
      }
    };
  };
  Dataset::Iterator it = Dataset::from_generator(gen).batch(3).begin_pass(0);
  EXPECT_THAT(error_of([&] { it.next(); }),
              AllOf(HasSubstr("Dataset.batch: element 2 of the pass (x: float32 (3,))"),
                    HasSubstr("element 0, the first of its batch (x: float32 (2,))")));
  EXPECT_FALSE(it.next().has_value());  // the pass ended with the error
  it = Dataset::from_generator(gen).batch(2).begin_pass(0);
  EXPECT_EQ(it.next()->x.tensors()[0].shape(), Shape({2, 2}));
  EXPECT_THAT(error_of([&] { it.next(); }),
              AllOf(HasSubstr("element 3 of the pass (x: [float32 (3,)])"),
                    HasSubstr("element 2, the first of its batch (x: float32 (3,))")));
  // y present in one element only.
  auto uneven = [] {
    return [i = 0]() mutable -> std::optional<Element> {
      if (i == 2) return std::nullopt;
      return i++ == 0 ? Element{zeros({2})} : Element{zeros({2}), ones({1})};
    };
  };
  EXPECT_THAT(error_of([&] { collect(Dataset::from_generator(uneven).batch(2), 0); }),
              HasSubstr("element 1 of the pass (x: float32 (2,), y: float32 (1,))"));
}

}  // namespace
}  // namespace kiln::data
