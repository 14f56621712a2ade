// Data-parallel fit across MPI ranks (FitOptions::data_parallel), run by ctest under
// `mpirun -np 2` and `mpirun -np 3` (tests/CMakeLists.txt); alone it is a world of one and the
// same checks hold trivially.
//
// - N ranks with global batch B give the weights of one process with batch B: compiled and
//   eager, float64 and float32, with 50 examples in batches of 16 (the last global batch has 2
//   rows: with 3 ranks one rank has none). The bound is derived from the computation: each
//   step's gradients differ only by the order of the batch sums (one process sums B rows, a
//   rank its share, then the shares are added), which moves each by at most ~2 B u of the sum of
//   the magnitudes; over S steps with learning rate lr the weights move by at most
//   S * lr * 2 B u * max|gradient term| plus the same error carried through later steps; we
//   allow S * 4 B u * (1 + max|w|), u the unit roundoff of the dtype.
// - The weights and the logs are bitwise equal on every rank.
// - Compiled, the gradients are summed in buckets (one sum per step for this small model) that
//   the gradients are computed in: no packing copy; summing them alone instead gives the same
//   bits (every element is added in the same rank order either way).
// - Only rank 0 writes the CSV log and the checkpoints.
// - A rank with another model or other data is named at the start (kiln::Error on every rank).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "kiln/codegen/compile_graph.h"
#include "kiln/kiln.h"
#include "kiln/runtime/collectives.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kExamples = 50, kBatch = 16, kFeatures = 5, kClasses = 3;
constexpr int kEpochs = 2;

struct Data {
  Tensor x, y;
};

Data make_data(int64_t examples = kExamples, int64_t features = kFeatures) {
  Tensor x = random_normal({examples, features}, /*seed=*/11);
  // Labels from a fixed linear rule, so training has something to learn.
  Tensor w = random_normal({features, kClasses}, /*seed=*/12);
  Tensor y = cast(argmax(matmul(x, w), 1), DType::i64);
  return {x, y};
}

Sequential make_model(DType dtype, bool eager, int64_t hidden = 8, int64_t features = kFeatures) {
  clear_session();
  set_random_seed(3);
  Sequential m(
      {Dense(hidden, {.activation = "tanh", .dtype = dtype}), Dense(kClasses, {.dtype = dtype})},
      Shape{features});
  m->compile({.optimizer = SGD({.learning_rate = 0.1, .momentum = 0.5}),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"},
              .run_eagerly = eager});
  return m;
}

std::vector<double> flat_weights(const Sequential& m) {
  std::vector<double> out;
  for (const Tensor& w : m->get_weights())
    for (double v : w.to_vector<double>()) out.push_back(v);
  return out;
}

struct Run {
  std::vector<double> weights;
  std::vector<double> losses, accuracies;  // per epoch
};

Run train(DType dtype, bool eager, bool data_parallel, std::vector<CallbackPtr> callbacks = {},
          std::optional<size_t> bucket_bytes = std::nullopt) {
  codegen::set_bucket_bytes(bucket_bytes);
  Data d = make_data();
  Sequential m = make_model(dtype, eager);
  auto h = m->fit(d.x, d.y,
                  {.batch_size = kBatch,
                   .epochs = kEpochs,
                   .verbose = 0,
                   .callbacks = callbacks,
                   .shuffle = true,
                   .seed = 7,
                   .data_parallel = data_parallel});
  codegen::set_bucket_bytes(std::nullopt);
  return {flat_weights(m), h->history.at("loss"), h->history.at("accuracy")};
}

// Every rank's `values`, bitwise equal to rank 0's.
void expect_same_on_every_rank(const std::vector<double>& values, const std::string& what) {
  std::string mine(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  std::vector<std::string> all = distributed::all_gather(mine, what);
  for (size_t r = 1; r < all.size(); ++r)
    EXPECT_TRUE(all[r] == all[0]) << what << " of rank " << r << " differ from rank 0's";
}

void expect_equal_to_one_process(DType dtype, bool eager) {
  Run one = train(dtype, eager, false);
  runtime::reset_collective_stats();
  Run parallel = train(dtype, eager, true);
  // Every step summed every gradient (a kernel and a bias per layer) across the ranks: eager
  // one by one, compiled in one bucket (the four gradients: 240 B at most) computed in their
  // bucket.
  const int steps = kEpochs * int((kExamples + kBatch - 1) / kBatch);
  if (distributed::size() > 1) {
    EXPECT_EQ(runtime::collective_stats().calls, steps * (eager ? 4 : 1));
    EXPECT_EQ(runtime::collective_stats().packed, 0) << "a gradient was copied into its bucket";
  }
  ASSERT_EQ(one.weights.size(), parallel.weights.size());
  const double u = dtype == DType::f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  double max_w = 0, max_err = 0;
  for (size_t i = 0; i < one.weights.size(); ++i) {
    max_w = std::max(max_w, std::abs(one.weights[i]));
    max_err = std::max(max_err, std::abs(one.weights[i] - parallel.weights[i]));
  }
  const double bound = steps * 4.0 * kBatch * u * (1 + max_w);
  EXPECT_LE(max_err, bound) << "ranks " << distributed::size() << ", max |w| " << max_w;
  if (distributed::is_output_rank())
    std::printf(
        "[ data ] %s %s, %d ranks: max |w_parallel - w_one| = %.3g (%.3g of max |w| "
        "%.3g; bound %.3g)\n",
        dtype == DType::f64 ? "float64" : "float32", eager ? "eager" : "compiled",
        distributed::size(), max_err, max_err / max_w, max_w, bound);
  for (size_t e = 0; e < one.losses.size(); ++e) {
    EXPECT_NEAR(parallel.losses[e], one.losses[e], bound * 10) << "epoch " << e;
    // (float32 rounding could flip an argmax in a near tie; float64 cannot at these sizes)
    if (dtype == DType::f64) {
      EXPECT_DOUBLE_EQ(parallel.accuracies[e], one.accuracies[e]);
    }
  }
  expect_same_on_every_rank(parallel.weights, "the weights");
  expect_same_on_every_rank(parallel.losses, "the epoch losses");
}

class DataParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { distributed::initialize(); }
};

TEST_F(DataParallel, CompiledFloat64EqualsOneProcess) {
  expect_equal_to_one_process(DType::f64, false);
}
TEST_F(DataParallel, CompiledFloat32EqualsOneProcess) {
  expect_equal_to_one_process(DType::f32, false);
}
TEST_F(DataParallel, EagerFloat64EqualsOneProcess) {
  expect_equal_to_one_process(DType::f64, true);
}
TEST_F(DataParallel, EagerFloat32EqualsOneProcess) {
  expect_equal_to_one_process(DType::f32, true);
}

// Buckets change where the sums run, not what they add: each element is summed in rank order.
TEST_F(DataParallel, BucketsGiveTheBitsOfSummingEachGradientAlone) {
  runtime::reset_collective_stats();
  kiln::Run alone = train(DType::f32, false, true, {}, /*bucket_bytes=*/0);
  const int64_t calls_alone = runtime::collective_stats().calls;
  runtime::reset_collective_stats();
  kiln::Run bucketed = train(DType::f32, false, true);
  if (distributed::size() > 1) {
    EXPECT_EQ(calls_alone, 4 * runtime::collective_stats().calls);
  }
  EXPECT_TRUE(alone.weights == bucketed.weights);
  EXPECT_TRUE(alone.losses == bucketed.losses);
}

// evaluate(data_parallel): each rank evaluates its rows of every batch (uneven shards; with 3
// ranks a last batch of 2 rows where one rank has none); the results are those of evaluating
// everything on one process up to the order of the sums (float64: 4 B u of the loss), and
// bitwise equal on every rank.
TEST_F(DataParallel, ShardedEvaluateEqualsOneProcess) {
  for (bool eager : {false, true}) {
    Data d = make_data();
    Sequential m = make_model(DType::f64, eager);
    m->fit(d.x, d.y, {.batch_size = kBatch, .epochs = 1, .verbose = 0, .data_parallel = true});
    Logs one = m->evaluate(d.x, d.y, {.batch_size = kBatch, .verbose = 0});
    Logs sharded =
        m->evaluate(d.x, d.y, {.batch_size = kBatch, .verbose = 0, .data_parallel = true});
    const double u = std::ldexp(1.0, -53);
    EXPECT_NEAR(sharded.at("loss"), one.at("loss"), 4.0 * kBatch * u * (1 + one.at("loss")))
        << (eager ? "eager" : "compiled");
    EXPECT_EQ(sharded.at("accuracy"), one.at("accuracy"));
    expect_same_on_every_rank({sharded.at("loss"), sharded.at("accuracy")},
                              "the sharded evaluation");
  }
}

TEST_F(DataParallel, OnlyRankZeroWritesFiles) {
  namespace fs = std::filesystem;
  // Each rank points its callbacks at a directory of its own, so a write by any rank shows.
  const fs::path dir = fs::temp_directory_path() / ("kiln_dp_files_" + std::to_string(::getpid()) +
                                                    "_" + std::to_string(distributed::rank()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  train(DType::f32, false, true,
        {std::make_shared<CSVLogger>((dir / "log.csv").string()),
         std::make_shared<ModelCheckpoint>((dir / "weights_{epoch}.safetensors").string(),
                                           ModelCheckpointOptions{.verbose = 0})});
  const bool wrote = fs::exists(dir / "log.csv") && fs::exists(dir / "weights_2.safetensors");
  const bool wrote_any = fs::exists(dir / "log.csv") || fs::exists(dir / "weights_1.safetensors");
  if (distributed::is_output_rank())
    EXPECT_TRUE(wrote);
  else
    EXPECT_FALSE(wrote_any) << "rank " << distributed::rank() << " wrote files";
  fs::remove_all(dir);
}

std::string fit_error(const Sequential& m, const Data& d) {
  try {
    m->fit(d.x, d.y, {.batch_size = kBatch, .epochs = 1, .verbose = 0, .data_parallel = true});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(DataParallel, ARankWithAnotherModelIsNamedAtTheStart) {
  if (distributed::size() == 1) GTEST_SKIP() << "needs two ranks";
  const bool odd = distributed::rank() == distributed::size() - 1;
  Sequential m = make_model(DType::f32, false, odd ? 6 : 8);
  const std::string e = fit_error(m, make_data());
  EXPECT_THAT(e, HasSubstr("the ranks differ in the model, the data or the options of fit"));
  EXPECT_THAT(e, HasSubstr("rank 0 has"));
  EXPECT_THAT(e, HasSubstr(fmt::format("but rank {} has", distributed::size() - 1)));
  EXPECT_THAT(e, HasSubstr("kernel f32[5,8]"));
  EXPECT_THAT(e, HasSubstr("kernel f32[5,6]"));
}

TEST_F(DataParallel, ARankWithOtherDataIsNamedAtTheStart) {
  if (distributed::size() == 1) GTEST_SKIP() << "needs two ranks";
  const bool odd = distributed::rank() == distributed::size() - 1;
  Sequential m = make_model(DType::f32, false);
  const std::string e = fit_error(m, make_data(odd ? 70 : kExamples));
  EXPECT_THAT(e, HasSubstr("the ranks differ"));
  EXPECT_THAT(e, HasSubstr("4 batches per epoch"));
  EXPECT_THAT(e, HasSubstr("5 batches per epoch"));
}

TEST_F(DataParallel, SynchronizedBatchNormalizationIsRefused) {
  // The step does not all-reduce batch statistics: synchronized=true is refused, on every rank,
  // instead of normalizing each rank's rows with their own statistics.
  if (distributed::size() == 1) GTEST_SKIP() << "needs two ranks";
  for (bool synchronized : {true, false}) {
    clear_session();
    set_random_seed(3);
    Sequential m(
        {Dense(8), BatchNormalization(BatchNormalizationOptions{.synchronized = synchronized}),
         Dense(kClasses)},
        Shape{kFeatures});
    m->compile({.optimizer = SGD({.learning_rate = 0.1}),
                .loss = losses::sparse_categorical_crossentropy(true)});
    const std::string e = fit_error(m, make_data());
    if (synchronized) {
      EXPECT_THAT(e, HasSubstr("(BatchNormalization): synchronized=true"));
      EXPECT_THAT(e, HasSubstr("set synchronized=false"));
    } else {
      EXPECT_EQ(e, "");
    }
  }
}

}  // namespace
}  // namespace kiln
