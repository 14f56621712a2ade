// compile/fit/evaluate/predict for a functional model with two inputs and two outputs:
// per-output losses and loss weights, sample and class weights, per-output (weighted) metrics,
// Keras' log names; logged values against sums computed by hand in double; eager, traced
// (reference executor) and compiled fits agree; bad input gives clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::HasSubstr;

struct TwoByTwo {
  Model model;
  Dense reg, cls;
};

// a [3] -> "reg" = Dense(1)(a);  [a, b] [5] -> "cls" = Dense(3)(concat(a, b)) (logits).
TwoByTwo two_by_two(bool run_eagerly) {
  clear_session();
  set_random_seed(11);
  Tensor a = Input({3}, DType::f32, "a"), b = Input({2}, DType::f32, "b");
  Dense reg(1, {.name = "reg"}), cls(3, {.name = "cls"});
  Model m({a, b}, {reg(a), cls(Concatenate()({a, b}))});
  m->compile({.optimizer = SGD({.learning_rate = 0.1}),
              .loss = LossSpec::by_output(
                  {{"reg", "mse"}, {"cls", losses::sparse_categorical_crossentropy(true)}}),
              .loss_weights = LossWeights::by_output({{"reg", 0.5}, {"cls", 2.0}}),
              .metrics = MetricSpec::by_output({{"cls", {"accuracy"}}}),
              .weighted_metrics = MetricSpec::by_output({{"reg", {"mae"}}}),
              .run_eagerly = run_eagerly});
  return {m, reg, cls};
}

// A fixed batch of 4.
struct Batch {
  std::vector<double> a{0.5, -1, 2, 1, 0, -0.5, -2, 1.5, 0.25, 0.75, 0.5, -1};  // [4, 3]
  std::vector<double> b{1, -1, 0.5, 2, -1.5, 0, 0.25, -0.75};                   // [4, 2]
  std::vector<double> y_reg{1, -2, 0.5, 3};
  std::vector<int64_t> y_cls{2, 0, 1, 1};
  std::vector<double> w_reg{1, 0, 2, 0.5}, w_cls{0.5, 1, 1, 2};
  Tensor ta() const { return tensor(a, {4, 3}, DType::f32); }
  Tensor tb() const { return tensor(b, {4, 2}, DType::f32); }
  Tensor treg() const { return tensor(y_reg, {4, 1}, DType::f32); }
  Tensor tcls() const { return tensor<int64_t>(y_cls); }
  Tensor twreg() const { return tensor(w_reg, {4}, DType::f32); }
  Tensor twcls() const { return tensor(w_cls, {4}, DType::f32); }
};

// The logs Keras would write for the batch, in double from the layers' current weights, and
// a bound on |kiln's float32 value - this|: every term's magnitude times 64 float32 epsilons.
struct Expected {
  Logs logs;
  double bound = 0;
};

Expected expected_logs(const TwoByTwo& m, const Batch& d, const std::map<int64_t, double>& cw) {
  auto weights = [](const Dense& l) {
    std::vector<std::vector<double>> w;
    for (const Tensor& t : l->get_weights()) w.push_back(t.to_vector<double>());
    return w;
  };
  auto wr = weights(m.reg), wc = weights(m.cls);
  double reg_sum = 0, cls_sum = 0, mae_sum = 0, mae_w = 0, correct = 0, magnitude = 0;
  for (int i = 0; i < 4; ++i) {
    double pred = wr[1][0];
    for (int k = 0; k < 3; ++k) pred += d.a[size_t(i * 3 + k)] * wr[0][size_t(k)];
    const double err = pred - d.y_reg[size_t(i)];
    reg_sum += d.w_reg[size_t(i)] * err * err;
    mae_sum += d.w_reg[size_t(i)] * std::abs(err), mae_w += d.w_reg[size_t(i)];
    std::vector<double> in{d.a[size_t(i * 3)], d.a[size_t(i * 3 + 1)], d.a[size_t(i * 3 + 2)],
                           d.b[size_t(i * 2)], d.b[size_t(i * 2 + 1)]};
    std::vector<double> logit(3);
    for (int c = 0; c < 3; ++c) {
      logit[size_t(c)] = wc[1][size_t(c)];
      for (int k = 0; k < 5; ++k) logit[size_t(c)] += in[size_t(k)] * wc[0][size_t(k * 3 + c)];
    }
    double top = std::max({logit[0], logit[1], logit[2]}), s = 0;
    for (double v : logit) s += std::exp(v - top);
    const int64_t label = d.y_cls[size_t(i)];
    const double ce = top + std::log(s) - logit[size_t(label)];
    auto it = cw.find(label);
    cls_sum += d.w_cls[size_t(i)] * (it == cw.end() ? 1.0 : it->second) * ce;
    int arg = 0;
    for (int c = 1; c < 3; ++c) arg = logit[size_t(c)] > logit[size_t(arg)] ? c : arg;
    correct += double(arg == label);
    magnitude +=
        std::abs(pred) + std::abs(d.y_reg[size_t(i)]) + top + std::abs(logit[size_t(label)]);
  }
  Expected e;
  e.logs["reg_loss"] = 0.5 * reg_sum / 4;
  e.logs["cls_loss"] = 2.0 * cls_sum / 4;
  e.logs["loss"] = e.logs["reg_loss"] + e.logs["cls_loss"];
  e.logs["cls_accuracy"] = correct / 4;
  e.logs["reg_mae"] = mae_sum / mae_w;
  e.bound = 64 * 0x1p-24 * magnitude * magnitude;  // squares and weights scale the terms
  return e;
}

void expect_logs_near(const Logs& got, const Expected& want) {
  ASSERT_EQ(got.size(), want.logs.size());
  for (const auto& [key, value] : want.logs) {
    ASSERT_TRUE(got.count(key)) << key;
    EXPECT_NEAR(got.at(key), value, want.bound) << key;
  }
}

TEST(MultiOutputFit, LoggedLossesAreTheHandComputedWeightedSums) {
  for (bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "eager" : "traced");
    TwoByTwo m = two_by_two(eager);
    Batch d;
    const std::map<int64_t, double> cw{{0, 1.0}, {1, 3.0}, {2, 0.5}};
    // train_on_batch logs the values before its update.
    Expected before = expected_logs(m, d, cw);
    Logs logs =
        m.model->train_on_batch({d.ta(), d.tb()}, {d.treg(), d.tcls()}, {d.twreg(), d.twcls()},
                                ClassWeight::by_output({{"cls", cw}}));
    expect_logs_near(logs, before);
    // test_on_batch after the update, targets and weights by name, no class weights.
    Expected after = expected_logs(m, d, {});
    Logs test = m.model->test_on_batch(Arrays::by_name({{"b", d.tb()}, {"a", d.ta()}}),
                                       Arrays::by_name({{"cls", d.tcls()}, {"reg", d.treg()}}),
                                       Arrays::by_name({{"reg", d.twreg()}, {"cls", d.twcls()}}));
    expect_logs_near(test, after);
    EXPECT_NE(before.logs.at("loss"), after.logs.at("loss"));  // the update happened
    // evaluate over the same 4 examples in batches of 3 and 1 averages by batch size.
    Logs ev =
        m.model->evaluate({d.ta(), d.tb()}, {d.treg(), d.tcls()},
                          {.batch_size = 3, .verbose = 0, .sample_weight = {d.twreg(), d.twcls()}});
    EXPECT_NEAR(ev.at("loss"), after.logs.at("loss"), after.bound);
    EXPECT_NEAR(ev.at("cls_accuracy"), after.logs.at("cls_accuracy"), 1e-12);
    EXPECT_NEAR(ev.at("reg_mae"), after.logs.at("reg_mae"), after.bound);
  }
}

// 10 examples of the two inputs and targets, seeded.
struct Data {
  Tensor a, b, y_reg, y_cls, w_reg;
  Data() {
    a = random_uniform({10, 3}, 1, -1, 1);
    b = random_uniform({10, 2}, 2, -1, 1);
    y_reg = random_uniform({10, 1}, 3, -2, 2);
    y_cls = random_integers({10}, 4, 0, 3);
    w_reg = random_uniform({10}, 5, 0, 2);
  }
};

FitOptions fit_options() {
  return {.batch_size = 3,
          .epochs = 3,
          .verbose = 0,
          .validation_split = 0.2,
          .sample_weight = Arrays::by_name({{"reg", Data().w_reg}}),
          .class_weight = ClassWeight::by_output({{"cls", {{1, 2.0}, {2, 0.5}}}})};
}

TEST(MultiOutputFit, EagerTracedAndCompiledFitsAgree) {
  Data d;
  auto fit = [&](bool eager) {
    TwoByTwo m = two_by_two(eager);
    auto h = m.model->fit({d.a, d.b}, {d.y_reg, d.y_cls}, fit_options());
    return std::make_pair(m, h->history);
  };
  auto [eager, eager_history] = fit(true);
  {
    ScopedExecutionMode reference(ExecutionMode::kReference);
    auto [traced, traced_history] = fit(false);
    EXPECT_EQ(eager_history, traced_history);  // bitwise: same kernels, same order
    std::vector<Tensor> we = eager.model->get_weights(), wt = traced.model->get_weights();
    for (size_t i = 0; i < we.size(); ++i)
      EXPECT_EQ(we[i].to_vector<float>(), wt[i].to_vector<float>()) << i;
  }
  for (const char* key : {"loss", "reg_loss", "cls_loss", "cls_accuracy", "reg_mae", "val_loss",
                          "val_reg_loss", "val_cls_loss", "val_cls_accuracy", "val_reg_mae"})
    EXPECT_EQ(eager_history.at(key).size(), 3u) << key;
  // JIT-compiled: the same arithmetic up to FMA contraction and vector reassociation. Each of
  // the 9 SGD steps changes a weight by lr * gradient; its rounding differences are a few
  // float32 epsilons of the terms (|w|, |x| <= 2 here), so 9 steps * 64 eps * (1 + |w|) bounds
  // the drift.
  auto [compiled, compiled_history] = fit(false);
  std::vector<Tensor> we = eager.model->get_weights(), wc = compiled.model->get_weights();
  for (size_t i = 0; i < we.size(); ++i) {
    std::vector<float> e = we[i].to_vector<float>(), c = wc[i].to_vector<float>();
    for (size_t j = 0; j < e.size(); ++j)
      EXPECT_NEAR(c[j], e[j], 9 * 64 * 0x1p-24 * (1 + std::abs(e[j]))) << i << "," << j;
  }
}

TEST(MultiOutputFit, PredictGivesOneTensorPerOutput) {
  TwoByTwo m = two_by_two(false);
  Data d;
  std::vector<Tensor> out = m.model->predict_outputs({d.a, d.b}, {.batch_size = 4});
  ASSERT_EQ(out.size(), 2u);
  std::vector<Tensor> direct = m.model({d.a, d.b});
  for (size_t o = 0; o < 2; ++o) {
    EXPECT_EQ(out[o].shape(), direct[o].shape());
    std::vector<float> p = out[o].to_vector<float>(), q = direct[o].to_vector<float>();
    for (size_t i = 0; i < p.size(); ++i)
      EXPECT_NEAR(p[i], q[i], 16 * 0x1p-24 * (1 + std::abs(q[i])));
  }
  EXPECT_THAT(error_of([&] { m.model->predict({d.a, d.b}); }), HasSubstr("predict_outputs"));
}

TEST(MultiOutputFit, OneLossAndFlatMetricsServeEveryOutputWithTheirOwnState) {
  clear_session();
  set_random_seed(2);
  Tensor a = Input({3}, DType::f32, "a");
  Model m({a}, {Dense(2, {.name = "p"})(a), Dense(2, {.name = "q"})(a)});
  m->compile({.optimizer = "sgd", .loss = "mse", .metrics = {"mae"}});
  Data d;
  Tensor y = zeros({10, 2});
  Logs logs = m->evaluate(d.a, {y, y}, {.verbose = 0});
  for (const char* key : {"loss", "p_loss", "q_loss", "p_mae", "q_mae"})
    EXPECT_TRUE(logs.count(key)) << key;
  EXPECT_NEAR(logs.at("loss"), logs.at("p_loss") + logs.at("q_loss"), 1e-6 * logs.at("loss"));
  EXPECT_NE(logs.at("p_mae"), logs.at("q_mae"));
}

TEST(MultiOutputFit, BadInputNamesWhatWasGivenAndExpected) {
  TwoByTwo m = two_by_two(true);
  Data d;
  Tensor y2 = d.y_cls;
  EXPECT_THAT(error_of([&] {
                m.model->fit({d.a, d.b, d.a}, {d.y_reg, y2}, {.verbose = 0});
              }),
              HasSubstr("the model has 2 inputs [\"a\", \"b\"], but 3 tensors"));
  EXPECT_THAT(
      error_of([&] {
        m.model->fit({d.a, d.b}, d.y_reg, {.verbose = 0});
      }),
      HasSubstr("the model has 2 targets [\"reg\", \"cls\"], but a tensor of shape (10, 1)"));
  EXPECT_THAT(error_of([&] {
                m.model->fit({d.a, d.b}, Arrays::by_name({{"reg", d.y_reg}, {"klass", y2}}),
                             {.verbose = 0});
              }),
              HasSubstr("no model target is named \"klass\""));
  EXPECT_THAT(error_of([&] {
                m.model->fit({d.a, d.b}, {d.y_reg, y2},
                             {.verbose = 0, .sample_weight = {d.w_reg, d.w_reg, d.w_reg}});
              }),
              HasSubstr("2 sample weights"));
  EXPECT_THAT(error_of([&] {
                m.model->fit({d.a, d.b}, {d.y_reg, y2},
                             {.verbose = 0, .sample_weight = Tensor(d.w_reg * -1.0)});
              }),
              HasSubstr("weights must be finite and >= 0"));
  EXPECT_THAT(
      error_of([&] {
        m.model->fit({d.a, d.b}, {d.y_reg, y2}, {.verbose = 0, .sample_weight = zeros({10, 4})});
      }),
      HasSubstr("sample_weight has shape (10, 4)"));
  EXPECT_THAT(error_of([&] {
                m.model->fit({d.a, d.b}, {d.y_reg, y2},
                             {.verbose = 0, .class_weight = {{0, 1.0}, {1, 2.0}}});
              }),
              HasSubstr("one class-weight map was given for a model with 2 outputs"));
  EXPECT_THAT(error_of([&] {
                m.model->fit(
                    {d.a, d.b}, {d.y_reg, y2},
                    {.verbose = 0, .class_weight = ClassWeight::by_output({{"cls", {{1, -1.0}}}})});
              }),
              HasSubstr("class 1 of output \"cls\" has weight -1"));
  EXPECT_THAT(error_of([&] {
                m.model->fit({d.a, data::take_rows(d.b, {0, 1, 2})}, {d.y_reg, y2}, {.verbose = 0});
              }),
              HasSubstr("same number of examples"));
  // compile checks output names and counts against the model.
  EXPECT_THAT(error_of([&] {
                m.model->compile({.loss = LossSpec::by_output({{"nope", "mse"}})});
              }),
              HasSubstr("no output named \"nope\"; its outputs are [\"reg\", \"cls\"]"));
  EXPECT_THAT(error_of([&] {
                m.model->compile({.loss = {"mse", "mse", "mse"}});
              }),
              HasSubstr("3 losses given for a model with 2 outputs"));
  EXPECT_THAT(error_of([&] {
                m.model->compile({.loss = "mse", .loss_weights = {1.0, -2.0}});
              }),
              HasSubstr("the weight of output \"cls\" is -2"));
}

}  // namespace
}  // namespace kiln
