// An experiment, not a check (DISABLED_: run it by hand, docs/distributed.md "Same answer as one
// process"): where the float32 difference between N ranks and one process comes from. The CNN of
// `kiln train --model cnn` on the digits (45 steps of 32 rows per epoch, 5 epochs) is trained
// three times from the same initial weights: float32 on one process, float32 on the ranks, and
// float64 on one process (the reference). After chosen steps it prints, relative to max |w|:
// ranks vs one process (float32), and each float32 run vs the float64 reference. With SGD and
// with Adam.
//
//   KILN_NUM_THREADS=1 mpirun --oversubscribe --bind-to none -np 2
//       build/tests/kiln_distributed_tests --gtest_also_run_disabled_tests
//       --gtest_filter='*Float32Drift*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "kiln/kiln.h"

namespace kiln {
namespace {

std::vector<double> flat(const Sequential& m) {
  std::vector<double> out;
  for (const Tensor& w : m->get_weights())
    for (double v : w.to_vector<double>()) out.push_back(v);
  return out;
}

// The weights after every step.
class Trajectory : public Callback {
 public:
  explicit Trajectory(Sequential m) : m_(std::move(m)) {}
  void on_train_batch_end(int, const Logs&) override { steps.push_back(flat(m_)); }
  std::vector<std::vector<double>> steps;

 private:
  Sequential m_;
};

Sequential cnn(DType dtype) {
  return Sequential({Conv2D(16, {3, 3}, {.padding = "same", .activation = "relu", .dtype = dtype}),
                     MaxPooling2D({2, 2}),
                     Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu", .dtype = dtype}),
                     Flatten(), Dense(10, {.dtype = dtype})},
                    Shape{8, 8, 1});
}

std::vector<std::vector<double>> train(DType dtype, bool data_parallel, bool adam,
                                       const std::vector<Tensor>& initial,
                                       const data::Examples& d) {
  clear_session();
  Sequential m = cnn(dtype);
  std::vector<Tensor> w;
  for (const Tensor& t : initial) w.push_back(cast(t, dtype));
  m->set_weights(w);
  m->compile({.optimizer = adam ? Adam({.learning_rate = 1e-3})
                                : SGD({.learning_rate = 0.05, .momentum = 0.9}),
              .loss = losses::sparse_categorical_crossentropy(true)});
  auto trajectory = std::make_shared<Trajectory>(m);
  m->fit(d.x, d.y,
         {.batch_size = 32,
          .epochs = 5,
          .verbose = 0,
          .callbacks = {trajectory},
          .shuffle = true,
          .seed = 7,
          .data_parallel = data_parallel});
  return trajectory->steps;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(DataParallelExperiment, DISABLED_Float32DriftAgainstAFloat64Reference) {
  distributed::initialize();
  data::Examples all = data::load_digits();
  const int64_t n = 1440;  // 45 batches of 32
  data::Examples d{reshape(slice(all.x, {0, 0}, {n, 64}), {n, 8, 8, 1}), slice(all.y, {0}, {n})};
  clear_session();
  set_random_seed(3);
  Sequential init = cnn(DType::f32);
  const std::vector<Tensor> initial = init->get_weights();
  for (bool adam : {false, true}) {
    auto one32 = train(DType::f32, false, adam, initial, d);
    auto dp32 = train(DType::f32, true, adam, initial, d);
    auto one64 = train(DType::f64, false, adam, initial, d);
    if (!distributed::is_output_rank()) continue;
    std::printf(
        "[ drift ] %s, %d rank(s): step, then max |dw| / max |w| for ranks-vs-one (f32), "
        "one-vs-f64, ranks-vs-f64\n",
        adam ? "Adam 1e-3" : "SGD 0.05 momentum 0.9", distributed::size());
    for (size_t s : {1, 2, 5, 10, 20, 45, 90, 135, 180, 225}) {
      if (s > one32.size()) break;
      const double w = max_abs(one64[s - 1]);
      std::printf("[ drift ] %4zu  %.3g  %.3g  %.3g\n", s, max_diff(dp32[s - 1], one32[s - 1]) / w,
                  max_diff(one32[s - 1], one64[s - 1]) / w,
                  max_diff(dp32[s - 1], one64[s - 1]) / w);
    }
  }
}

}  // namespace
}  // namespace kiln
