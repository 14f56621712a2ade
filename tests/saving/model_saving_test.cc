// save_model / load_model round trips: Sequential and functional models (shared layers, several
// inputs and outputs), custom layers, models built by their first call, the compile
// configuration; and resuming training: 2 epochs, save, load, 2 more == 4 epochs, bitwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/keras/saving/from_config.h"
#include "kiln/kiln.h"
#include "tests/saving/saving_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::expect_bitwise_equal;
using test::expect_same_variables;
using test::scaled_from_config;
using test::ScaledImpl;
using test::TempDir;

Tensor features(int64_t n, int64_t d, int64_t seed) { return random_normal({n, d}, seed); }
Tensor labels(int64_t n, int64_t classes, int64_t seed) {
  return cast(random_uniform({n}, seed, 0, double(classes) - 1e-6), DType::i32);
}

TEST(SaveModel, SequentialRoundTrip) {
  TempDir tmp;
  clear_session();
  set_random_seed(1);
  Sequential m({Dense(8, {.activation = "relu"}), Dropout(0.2), Dense(3)}, Shape{5}, "mlp");
  m->compile({.optimizer = Adam(),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"}});
  Tensor x = features(32, 5, 2);
  m->fit(x, labels(32, 3, 3), {.batch_size = 8, .epochs = 1, .verbose = 0});
  m->save(tmp.path("mlp"));
  for (const char* f :
       {"metadata.json", "config.json", "model.weights.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(std::filesystem::is_regular_file(tmp.path("mlp/") + f)) << f;

  Model back = load_model(tmp.path("mlp"));
  EXPECT_EQ(back->class_name(), "Sequential");
  EXPECT_EQ(back->get_config(), m->get_config());
  EXPECT_EQ(back->summary_string(), m->summary_string());
  expect_same_variables(m, back);
  expect_bitwise_equal(back->predict(x), m->predict(x), "predictions");
  ASSERT_TRUE(back->compiled());
  EXPECT_EQ(saving_detail::compile_config(back->compile_options()),
            saving_detail::compile_config(m->compile_options()));
}

TEST(SaveModel, WeightEntriesAreNamedByThePlaceInTheModel) {
  TempDir tmp;
  clear_session();
  // Layer names from the process-wide counter ("dense_2", ...) are in the config; the entries
  // are "layers/<layer>/vars/<i>", so a file never depends on which models came before.
  Dense(1);
  Dense(1);
  Sequential m({Dense(2), Dense(1, {.use_bias = false})}, Shape{3});
  m->save(tmp.path("m"));
  std::map<std::string, std::string> meta;
  NamedTensors t = load_safetensors(tmp.path("m/model.weights.safetensors"), &meta);
  std::vector<std::string> names;
  for (const auto& [n, v] : t) names.push_back(n);
  EXPECT_THAT(names,
              ::testing::UnorderedElementsAre("layers/dense_2/vars/0", "layers/dense_2/vars/1",
                                              "layers/dense_3/vars/0"));
  EXPECT_EQ(meta.at("layers/dense_2/vars/1"), "dense_2/bias");
  EXPECT_FALSE(std::filesystem::exists(tmp.path("m/optimizer.safetensors")));  // not compiled
}

TEST(SaveModel, FunctionalWithSharedLayersAndSeveralInputsAndOutputs) {
  TempDir tmp;
  clear_session();
  set_random_seed(4);
  Tensor a = Input({4}, DType::f32, "a"), b = Input({4}, DType::f32, "b");
  Dense shared(6, {.activation = "tanh", .name = "shared"});
  Tensor h = Concatenate()({shared(a), shared(b)});
  h = LayerNormalization()(h);
  // The shared layer's third and fourth nodes feed the second output.
  Tensor cls = Dense(3, {.name = "cls"})(h);
  Tensor reg = Dense(1, {.name = "reg"})(Add()({shared(b), shared(a)}));
  Model m({a, b}, {cls, reg}, "two_heads");
  m->compile({.optimizer = RMSprop({.momentum = 0.5, .centered = true}),
              .loss = LossSpec::by_output(
                  {{"cls", losses::sparse_categorical_crossentropy(true)}, {"reg", "mse"}}),
              .loss_weights = LossWeights::by_output({{"reg", 0.5}}),
              .metrics = MetricSpec::by_output({{"cls", {"accuracy"}}})});
  Tensor xa = features(24, 4, 5), xb = features(24, 4, 6);
  Arrays x = std::vector<Tensor>{xa, xb};
  Arrays y = std::vector<Tensor>{labels(24, 3, 7), features(24, 1, 8)};
  m->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  m->save(tmp.path("two_heads"));

  Model back = load_model(tmp.path("two_heads"));
  EXPECT_EQ(back->get_config(), m->get_config());
  expect_same_variables(m, back);
  std::vector<Tensor> p = m->predict_outputs(x), q = back->predict_outputs(x);
  ASSERT_EQ(q.size(), 2u);
  for (size_t i = 0; i < 2; ++i) expect_bitwise_equal(q[i], p[i], "output " + std::to_string(i));
  EXPECT_EQ(saving_detail::compile_config(back->compile_options()),
            saving_detail::compile_config(m->compile_options()));
  // The loaded model evaluates like the original (same losses, weights, metrics and state).
  Logs le = m->evaluate(x, y, {.verbose = 0}), lb = back->evaluate(x, y, {.verbose = 0});
  EXPECT_EQ(lb, le);
}

TEST(SaveModel, CustomLayerThroughCustomObjectsAndTheRegistry) {
  TempDir tmp;
  clear_session();
  Sequential m({Dense(3), Layer(std::make_shared<ScaledImpl>(0.5, "scaled")), Dense(2)}, Shape{4});
  m->compile(
      {.optimizer = SGD({.learning_rate = 0.1, .momentum = 0.9, .nesterov = true}), .loss = "mse"});
  Tensor x = features(16, 4, 9);
  m->fit(x, features(16, 2, 10), {.batch_size = 4, .epochs = 1, .verbose = 0});
  m->save(tmp.path("custom"));

  EXPECT_THAT(test::error_of([&] { load_model(tmp.path("custom")); }),
              ::testing::HasSubstr("unknown layer class \"Scaled\" (layer \"scaled\")"));
  Model a = load_model(tmp.path("custom"), {.custom_objects = {{"Scaled", scaled_from_config}}});
  expect_same_variables(m, a);
  expect_bitwise_equal(a->predict(x), m->predict(x), "predictions");

  register_layer_class("Scaled", scaled_from_config);
  Model b = load_model(tmp.path("custom"));
  unregister_layer_class("Scaled");
  expect_same_variables(m, b);
}

TEST(SaveModel, SequentialBuiltByItsFirstCall) {
  TempDir tmp;
  clear_session();
  Sequential m({Dense(4), Dense(2)});  // no input shape: built by the call below
  Tensor x = features(3, 5, 11);
  Tensor y = m(x);
  m->save(tmp.path("lazy"));
  Model back = load_model(tmp.path("lazy"));
  ASSERT_TRUE(back->built());
  expect_same_variables(m, back);
  expect_bitwise_equal(back(x), y, "outputs");
}

TEST(SaveModel, RecurrentModelWithIntegerInputs) {
  TempDir tmp;
  clear_session();
  set_random_seed(12);
  Tensor tokens = Input({6}, DType::i32, "tokens");
  Tensor h = Embedding(10, 4, {.mask_zero = true})(tokens);
  h = Bidirectional(LSTM(3, {.return_sequences = true}))(h);
  Model m(tokens, GlobalAveragePooling1D()(h));
  m->save(tmp.path("rnn"));
  Model back = load_model(tmp.path("rnn"));
  Tensor ids = cast(random_uniform({5, 6}, 13, 0, 9.99), DType::i32);
  expect_same_variables(m, back);
  expect_bitwise_equal(back->predict(ids), m->predict(ids), "predictions");
}

TEST(SaveModel, CompileFalseLeavesTheModelUncompiled) {
  TempDir tmp;
  clear_session();
  Sequential m({Dense(2)}, Shape{3});
  m->compile({.optimizer = "adam", .loss = "mse"});
  m->save(tmp.path("m"));
  EXPECT_FALSE(load_model(tmp.path("m"), {.compile = false})->compiled());
}

TEST(SaveModel, SavingAgainReplacesTheModelAndLeavesNoTemporaries) {
  TempDir tmp;
  clear_session();
  Sequential a({Dense(2, {.name = "first"})}, Shape{3});
  Sequential b({Dense(2, {.name = "second"})}, Shape{3});
  a->save(tmp.path("m"));
  b->save(tmp.path("m"));
  EXPECT_EQ(load_model(tmp.path("m"))->layers()[0]->name(), "second");
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.dir())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "m");
  }
  EXPECT_EQ(entries, 1);
}

// ---- resuming training ----

struct ResumeCase {
  const char* name;
  std::function<Optimizer()> optimizer;
  bool run_eagerly = false;
};

void PrintTo(const ResumeCase& c, std::ostream* os) { *os << c.name; }

Model resume_model(const ResumeCase& c) {
  clear_session();
  set_random_seed(21);
  Sequential m({Dense(8, {.activation = "relu"}), Dropout(0.25), Dense(3)}, Shape{5}, "resume");
  m->compile({.optimizer = c.optimizer(),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"},
              .run_eagerly = c.run_eagerly});
  return m;
}

class Resume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(Resume, TwoEpochsSavedLoadedAndTwoMoreEqualFourEpochsBitwise) {
  TempDir tmp;
  const Tensor x = features(40, 5, 22), y = labels(40, 3, 23);
  FitOptions fit{.batch_size = 8, .epochs = 4, .verbose = 0};

  Model straight = resume_model(GetParam());
  straight->fit(x, y, fit);

  Model first = resume_model(GetParam());
  FitOptions half = fit;
  half.epochs = 2;
  first->fit(x, y, half);
  first->save(tmp.path("half"));
  Model resumed = load_model(tmp.path("half"));
  FitOptions rest = fit;
  rest.initial_epoch = 2;
  resumed->fit(x, y, rest);

  expect_same_variables(straight, resumed);
  const OptimizerImpl& a = straight->compile_options().optimizer.impl();
  const OptimizerImpl& b = resumed->compile_options().optimizer.impl();
  EXPECT_EQ(b.iterations(), a.iterations());
  EXPECT_EQ(a.iterations(), 4 * 5);
  std::vector<Variable> va = a.variables(), vb = b.variables();
  ASSERT_EQ(va.size(), vb.size());
  for (size_t i = 0; i < va.size(); ++i) {
    EXPECT_EQ(vb[i].name(), va[i].name());
    expect_bitwise_equal(vb[i].value(), va[i].value(), va[i].name());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, Resume,
    ::testing::Values(
        ResumeCase{"sgd_nesterov",
                   [] { return SGD({.learning_rate = 0.05, .momentum = 0.9, .nesterov = true}); }},
        ResumeCase{"adam_schedule",
                   [] {
                     Optimizer o = Adam();
                     o->set_schedule(schedules::exponential_decay(0.01, 3, 0.5, true));
                     return o;
                   }},
        ResumeCase{"adamw_clipnorm",
                   [] { return AdamW({.weight_decay = 0.01, .clip = {.clipnorm = 1.0}}); }},
        ResumeCase{"rmsprop_centered", [] { return RMSprop({.momentum = 0.5, .centered = true}); }},
        ResumeCase{"adam_eager", [] { return Adam(); }, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kiln
