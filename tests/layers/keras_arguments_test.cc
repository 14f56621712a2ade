// Keras arguments of the built-in layers that kiln honours:
//  - data_format="channels_first" on the convolution, pooling, global pooling and Flatten
//    layers: the same weights on the transposed input give the transposed channels-last output
//    (eagerly exactly: the same NHWC kernels run on the same numbers; traced within a bound);
//  - weight constraints after one optimizer step equal Keras' formula applied to the
//    unconstrained update (an identical model without the constraint), eagerly and compiled.
// The argument walk over every layer's get_config is keras_argument_walk_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/keras/saving/from_config.h"
#include "kiln/kiln.h"
#include "tests/saving/saving_test_util.h"

namespace kiln {
namespace {

Tensor random_input(const Shape& shape, int64_t seed) {
  return random_uniform(shape, seed, -1.0, 1.0);
}

// [b, c, d1, ..., dn] <-> [b, d1, ..., dn, c].
Tensor cf_from_cl(const Tensor& x) {
  Axes perm{0, x.rank() - 1};
  for (int d = 1; d < x.rank() - 1; ++d) perm.push_back(d);
  return transpose(x, perm);
}

struct ArgumentCase {
  std::string what;
  std::function<Layer(const std::string& data_format)> make;
  Shape input_cl;                 // channels-last input shape
  bool output_has_channels_axis;  // false: Flatten / global pooling without keepdims
  int64_t terms;                  // values summed (or compared) per output element
};

std::vector<ArgumentCase> channels_first_cases() {
  auto conv2d = [](Conv2DOptions o) {
    return [o](const std::string& f) mutable {
      set_random_seed(5);
      o.data_format = f;
      o.activation = "relu";
      return Layer(Conv2D(4, {3, 3}, o));
    };
  };
  auto conv1d = [](Conv1DOptions o) {
    return [o](const std::string& f) mutable {
      set_random_seed(5);
      o.data_format = f;
      return Layer(Conv1D(3, 3, o));
    };
  };
  return {
      {"Conv2D", conv2d({}), {2, 8, 8, 3}, true, 27},
      {"Conv2D same strided",
       conv2d({.strides = {2, 2}, .padding = "same"}),
       {2, 7, 6, 3},
       true,
       27},
      {"Conv2D dilated", conv2d({.dilation_rate = {2, 1}}), {2, 9, 6, 2}, true, 18},
      {"Conv1D", conv1d({}), {2, 10, 4}, true, 12},
      {"Conv1D causal", conv1d({.padding = "causal", .dilation_rate = 2}), {2, 10, 4}, true, 12},
      {"MaxPooling2D",
       [](const std::string& f) {
         return Layer(MaxPooling2D({2, 2}, {.padding = "same", .data_format = f}));
       },
       {2, 5, 6, 3},
       true,
       4},
      {"AveragePooling2D",
       [](const std::string& f) {
         return Layer(AveragePooling2D({3, 2}, {.strides = {1, 2}, .data_format = f}));
       },
       {2, 6, 6, 3},
       true,
       6},
      {"MaxPooling1D",
       [](const std::string& f) { return Layer(MaxPooling1D(2, {.data_format = f})); },
       {2, 9, 3},
       true,
       3},
      {"AveragePooling1D",
       [](const std::string& f) {
         return Layer(AveragePooling1D(3, {.strides = 1, .padding = "same", .data_format = f}));
       },
       {2, 9, 3},
       true,
       3},
      {"GlobalAveragePooling2D keepdims",
       [](const std::string& f) {
         return Layer(GlobalAveragePooling2D({.keepdims = true, .data_format = f}));
       },
       {2, 4, 5, 3},
       true,
       20},
      {"GlobalMaxPooling2D",
       [](const std::string& f) { return Layer(GlobalMaxPooling2D({.data_format = f})); },
       {2, 4, 5, 3},
       false,
       20},
      {"GlobalAveragePooling1D",
       [](const std::string& f) { return Layer(GlobalAveragePooling1D({.data_format = f})); },
       {2, 6, 3},
       false,
       6},
      {"GlobalMaxPooling1D keepdims",
       [](const std::string& f) {
         return Layer(GlobalMaxPooling1D({.keepdims = true, .data_format = f}));
       },
       {2, 6, 3},
       true,
       6},
      {"Flatten",
       [](const std::string& f) { return Layer(Flatten({.data_format = f})); },
       {2, 3, 4, 5},
       false,
       0},
  };
}

TEST(ChannelsFirst, Conv2DShapesAsKeras) {
  // Keras: Conv2D(4, (3, 3), data_format="channels_first") on [2, 3, 8, 8] -> (2, 4, 6, 6),
  // kernel (3, 3, 3, 4) as in channels_last.
  Conv2D conv(4, {3, 3}, {.data_format = "channels_first"});
  Tensor y = conv(random_input({2, 3, 8, 8}, 1));
  EXPECT_EQ(y.shape(), Shape({2, 4, 6, 6}));
  EXPECT_EQ(conv->kernel.shape(), Shape({3, 3, 3, 4}));
  EXPECT_EQ(conv->get_config()["data_format"], "channels_first");
  EXPECT_EQ(conv->compute_output_shape({Shape{-1, 3, 8, 8}})[0], Shape({-1, 4, 6, 6}));
  // A channels-last call of the channels-first layer is refused by the input spec (3 channels
  // on axis 1), not silently computed with an 8-channel kernel.
  EXPECT_THROW(conv(random_input({2, 8, 8, 3}, 1)), Error);

  Layer loaded = layer_from_config(
      {{"class_name", "Conv2D"},
       {"config", {{"filters", 4}, {"kernel_size", {3, 3}}, {"data_format", "channels_first"}}}});
  EXPECT_EQ(loaded(random_input({2, 3, 8, 8}, 1)).shape(), Shape({2, 4, 6, 6}));
  Layer pool = layer_from_config(
      {{"class_name", "MaxPooling2D"}, {"config", {{"data_format", "channels_first"}}}});
  EXPECT_EQ(pool(random_input({2, 3, 8, 6}, 1)).shape(), Shape({2, 3, 4, 3}));
  Layer conv1 = layer_from_config(
      {{"class_name", "Conv1D"},
       {"config", {{"filters", 5}, {"kernel_size", 3}, {"data_format", "channels_first"}}}});
  EXPECT_EQ(conv1(random_input({2, 4, 10}, 1)).shape(), Shape({2, 5, 8}));
  EXPECT_THROW(Conv2D(4, {3, 3}, {.data_format = "channels_middle"}), Error);
}

TEST(ChannelsFirst, EqualsTransposedChannelsLastEagerly) {
  for (const ArgumentCase& c : channels_first_cases()) {
    SCOPED_TRACE(c.what);
    Layer last = c.make("channels_last"), first = c.make("channels_first");
    Tensor x = random_input(c.input_cl, 11);
    Tensor y_last = last(x);
    first->maybe_build({cf_from_cl(x).shape()});
    first->set_weights(last->get_weights());  // same kernel layout in both formats
    Tensor y_first = first(cf_from_cl(x));
    Tensor expected = c.output_has_channels_axis ? cf_from_cl(y_last) : y_last;
    ASSERT_EQ(y_first.shape(), expected.shape());
    if (c.what.rfind("GlobalAverage", 0) == 0) {
      // The mean over the channels-first spatial axes sums in another order: `terms` float32
      // roundings of values |x| <= 1.
      std::vector<float> a = y_first.to_vector<float>(), b = expected.to_vector<float>();
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_LE(std::abs(double(a[i]) - double(b[i])), double(c.terms + 2) * 0x1p-23) << i;
      }
    } else {
      // The same NHWC kernels on the same numbers: exactly equal.
      EXPECT_EQ(y_first.to_vector<float>(), expected.to_vector<float>());
    }
    EXPECT_EQ(first->compute_output_shape({cf_from_cl(x).shape()})[0], expected.shape());
    EXPECT_EQ(first->get_config()["data_format"], "channels_first");
    // The config round-trips the format.
    Layer again = layer_from_config(serialize_layer(first));
    EXPECT_EQ(again->get_config()["data_format"], "channels_first");
  }
}

TEST(ChannelsFirst, TracedAgreesWithChannelsLast) {
  for (const ArgumentCase& c : channels_first_cases()) {
    SCOPED_TRACE(c.what);
    Layer last = c.make("channels_last"), first = c.make("channels_first");
    Tensor x = random_input(c.input_cl, 12);
    Tensor y_last = last(x);
    first->maybe_build({cf_from_cl(x).shape()});
    first->set_weights(last->get_weights());
    auto f = function([first](const Tensor& in) { return first(in); }, {.name = c.what});
    Tensor xf = cf_from_cl(x);
    Tensor expected = c.output_has_channels_axis ? cf_from_cl(y_last) : y_last;
    // Bound: each output is a sum of `terms` products of |x| <= 1 and weights <= wmax (plus a
    // bias, an activation), or a max / mean of `terms` inputs; the compiled kernel may order
    // and fuse the float32 roundings differently: (terms + 4) roundings of a value of at most
    // terms * wmax.
    double wmax = 1;
    for (const Tensor& w : last->get_weights())
      for (float v : w.to_vector<float>()) wmax = std::max(wmax, double(std::abs(v)));
    const double bound =
        double(c.terms + 4) * 0x1p-23 * double(std::max<int64_t>(c.terms, 1)) * wmax;
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      Tensor y = f.concrete(xf).run({xf}, mode)[0];
      ASSERT_EQ(y.shape(), expected.shape()) << execution_mode_name(mode);
      std::vector<float> a = y.to_vector<float>(), b = expected.to_vector<float>();
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_LE(std::abs(double(a[i]) - double(b[i])), bound)
            << execution_mode_name(mode) << " element " << i;
      }
    }
    // The trace records the transposes around the NHWC op.
    if (c.what.rfind("Conv2D", 0) == 0) {
      EXPECT_NE(f.concrete(xf).ir_text().find("transpose"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------- constraints

// Keras' formula on a float64 copy of a 2-D (or 1-D) weight, norms over axis 0.
std::vector<double> keras_constraint(const Constraint& c, const std::vector<float>& w, int64_t rows,
                                     int64_t cols) {
  std::vector<double> out(w.begin(), w.end());
  const double eps = 1e-7;
  if (c.kind() == Constraint::Kind::kNonNeg) {
    for (double& v : out) v = v >= 0 ? v : 0;
    return out;
  }
  for (int64_t j = 0; j < cols; ++j) {
    double ss = 0;
    for (int64_t i = 0; i < rows; ++i) ss += out[size_t(i * cols + j)] * out[size_t(i * cols + j)];
    const double norm = std::sqrt(ss);
    double factor = 0;
    if (c.kind() == Constraint::Kind::kUnitNorm) {
      factor = 1 / (eps + norm);
    } else {
      double lo = c.kind() == Constraint::Kind::kMaxNorm ? 0 : c.min_value();
      double clipped = std::min(std::max(norm, lo), c.max_value());
      double desired = c.kind() == Constraint::Kind::kMaxNorm
                           ? clipped
                           : c.rate() * clipped + (1 - c.rate()) * norm;
      factor = desired / (eps + norm);
    }
    for (int64_t i = 0; i < rows; ++i) out[size_t(i * cols + j)] *= factor;
  }
  return out;
}

Sequential dense_model(const Constraint& c, bool run_eagerly) {
  clear_session();
  set_random_seed(21);
  Sequential m({Dense(4, {.kernel_constraint = c, .bias_constraint = c})}, Shape{6});
  m->compile({.optimizer = SGD({.learning_rate = 0.5}),
              .loss = losses::mean_squared_error(),
              .run_eagerly = run_eagerly});
  return m;
}

TEST(Constraints, DenseAfterOneStepMatchKerasFormula) {
  const std::vector<Constraint> cases = {
      constraints::non_neg(), constraints::max_norm(0.5), constraints::unit_norm(),
      constraints::min_max_norm(0.6, 0.9, 0.7), Constraint("unit_norm")};
  Tensor x = random_input({8, 6}, 3), y = random_input({8, 4}, 4);
  for (bool eager : {true, false}) {
    for (const Constraint& c : cases) {
      SCOPED_TRACE(fmt::format("{} {}", c.config().dump(), eager ? "eager" : "compiled"));
      Sequential plain = dense_model({}, eager), constrained = dense_model(c, eager);
      ASSERT_EQ(plain->get_weights()[0].to_vector<float>(),
                constrained->get_weights()[0].to_vector<float>());
      plain->train_on_batch(x, y);
      constrained->train_on_batch(x, y);
      std::vector<Tensor> wp = plain->get_weights(), wc = constrained->get_weights();
      for (size_t k = 0; k < 2; ++k) {
        // kernel [6, 4]: norms of the columns (axis 0); bias [4]: of the whole vector.
        const int64_t rows = k == 0 ? 6 : 4, cols = k == 0 ? 4 : 1;
        std::vector<double> expected = keras_constraint(c, wp[k].to_vector<float>(), rows, cols);
        std::vector<float> got = wc[k].to_vector<float>();
        double scale = 0;
        for (float v : wp[k].to_vector<float>()) scale = std::max(scale, double(std::abs(v)));
        for (double v : expected) scale = std::max(scale, std::abs(v));
        // Float32 roundings: the update (a few per element, possibly fused differently in the
        // two compiled steps), the sum of `rows` squares, sqrt, the division and the product.
        const double bound = double(rows + 12) * 0x1p-23 * scale;
        ASSERT_EQ(got.size(), expected.size());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_LE(std::abs(double(got[i]) - expected[i]), bound) << "weight " << k << " " << i;
        }
        if (c.kind() == Constraint::Kind::kNonNeg) {
          for (float v : got) {
            EXPECT_GE(v, 0.0f);
          }
        }
      }
      // The projection changed something: the constraint binds on this step.
      EXPECT_NE(wp[0].to_vector<float>(), wc[0].to_vector<float>());
    }
  }
}

TEST(Constraints, ConfigAsKeras) {
  Dense d(3, {.kernel_constraint = "non_neg", .bias_constraint = constraints::max_norm(2.5, {0})});
  Json c = d->get_config();
  EXPECT_EQ(c["kernel_constraint"], Json::parse(R"({"module": "keras.constraints",
      "class_name": "NonNeg", "config": {}, "registered_name": null})"));
  EXPECT_EQ(c["bias_constraint"]["config"], Json::parse(R"({"max_value": 2.5, "axis": 0})"));
  Layer again = layer_from_config(serialize_layer(d));
  EXPECT_EQ(again->get_config(), c);
  // Keras' class form without module, and names.
  Layer named = layer_from_config(Json::parse(R"({"class_name": "Dense", "config": {"units": 2,
      "kernel_constraint": {"class_name": "MinMaxNorm", "config": {"min_value": 0.5,
      "max_value": 1.5, "rate": 0.5, "axis": [0]}}, "bias_constraint": "unit_norm"}})"));
  EXPECT_EQ(named->get_config()["kernel_constraint"]["config"],
            Json::parse(R"({"min_value": 0.5, "max_value": 1.5, "rate": 0.5, "axis": 0})"));
  EXPECT_EQ(named->get_config()["bias_constraint"]["class_name"], "UnitNorm");
  // Unknown names and arguments are errors naming the entry.
  try {
    layer_from_config(Json::parse(
        R"({"class_name": "Dense", "config": {"name": "d9", "units": 2, "kernel_constraint": "positive"}})"));
    FAIL() << "an unknown constraint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel_constraint"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("d9"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layer_from_config(Json::parse(R"({"class_name": "Dense", "config": {"units": 2,
      "kernel_constraint": {"class_name": "MaxNorm", "config": {"max": 3}}}})")),
               Error);
}

// Non-negativity on each layer kind's constrained weights: after one eager step the weight is
// exactly the unconstrained one with its negatives zeroed (the projection multiplies by 1 or 0).
TEST(Constraints, EveryLayerKindProjectsItsWeights) {
  struct LayerCase {
    std::string what;
    std::function<Layer(bool constrained)> make;
    Shape input;
    Shape output;
    bool integer_input = false;
  };
  const Constraint nn = constraints::non_neg();
  std::vector<LayerCase> cases = {
      {"Conv2D kernel+bias",
       [&](bool on) {
         return Layer(Conv2D(2, {2, 2},
                             {.kernel_constraint = on ? nn : Constraint(),
                              .bias_constraint = on ? nn : Constraint()}));
       },
       {5, 4, 4, 2},
       {5, 3, 3, 2}},
      {"Conv1D kernel",
       [&](bool on) { return Layer(Conv1D(2, 2, {.kernel_constraint = on ? nn : Constraint()})); },
       {5, 4, 3},
       {5, 3, 2}},
      {"Embedding",
       [&](bool on) {
         return Layer(Embedding(6, 3, {.embeddings_constraint = on ? nn : Constraint()}));
       },
       {5, 4},
       {5, 4, 3},
       true},
      {"BatchNormalization gamma+beta",
       [&](bool on) {
         return Layer(BatchNormalization({.beta_constraint = on ? nn : Constraint(),
                                          .gamma_constraint = on ? nn : Constraint()}));
       },
       {5, 3},
       {5, 3}},
      {"LayerNormalization gamma+beta",
       [&](bool on) {
         return Layer(LayerNormalization({.beta_constraint = on ? nn : Constraint(),
                                          .gamma_constraint = on ? nn : Constraint()}));
       },
       {5, 3},
       {5, 3}},
      {"LSTM kernel+recurrent+bias",
       [&](bool on) {
         RecurrentOptions o;
         if (on) o.kernel_constraint = o.recurrent_constraint = o.bias_constraint = nn;
         return Layer(LSTM(3, o));
       },
       {5, 4, 2},
       {5, 3}},
      {"GRU recurrent",
       [&](bool on) {
         RecurrentOptions o;
         if (on) o.recurrent_constraint = nn;
         return Layer(GRU(3, o));
       },
       {5, 4, 2},
       {5, 3}},
  };
  for (const LayerCase& c : cases) {
    SCOPED_TRACE(c.what);
    Tensor x = c.integer_input ? random_integers(c.input, 5, 0, 6) : random_input(c.input, 5);
    Tensor y = random_input(c.output, 6);
    auto model = [&](bool on) {
      clear_session();
      set_random_seed(8);
      Sequential m({c.make(on)});
      m->compile({.optimizer = SGD({.learning_rate = 0.5}),
                  .loss = losses::mean_squared_error(),
                  .run_eagerly = true});
      return m;
    };
    // Each model is built (its initial weights drawn from the reset seed) and trained before
    // the next is made, so both start from the same weights.
    Sequential plain = model(false);
    plain->train_on_batch(x, y);
    Sequential constrained = model(true);
    constrained->train_on_batch(x, y);
    std::vector<Variable> vp = plain->trainable_weights(), vc = constrained->trainable_weights();
    ASSERT_EQ(vp.size(), vc.size());
    bool any_negative = false;
    for (size_t k = 0; k < vp.size(); ++k) {
      SCOPED_TRACE(vc[k].name());
      const bool constrained_weight = bool(vc[k].constraint());
      std::vector<float> p = vp[k].value().to_vector<float>(), q = vc[k].value().to_vector<float>();
      for (size_t i = 0; i < p.size(); ++i) {
        any_negative = any_negative || (constrained_weight && p[i] < 0);
        EXPECT_EQ(q[i], constrained_weight && p[i] < 0 ? 0.0f : p[i]) << "element " << i;
      }
    }
    EXPECT_TRUE(any_negative) << "the constraint never bound: the test would not see it missing";
  }
}

TEST(Constraints, SavedModelKeepsChannelsFirstAndConstraints) {
  // The arguments come back from a saved model's config.json: the same predictions, and the
  // constraint still projects after an update of the loaded (compiled) model.
  test::TempDir dir;
  clear_session();
  set_random_seed(4);
  Sequential m(
      {Conv2D(3, {3, 3},
              {.kernel_constraint = constraints::non_neg(), .data_format = "channels_first"}),
       MaxPooling2D({2, 2}, {.data_format = "channels_first"}),
       Flatten({.data_format = "channels_first"}), Dense(2)},
      Shape{2, 8, 8});
  m->compile({.optimizer = SGD({.learning_rate = 0.5}), .loss = losses::mean_squared_error()});
  Tensor x = random_input({4, 2, 8, 8}, 1), y = random_input({4, 2}, 2);
  m->train_on_batch(x, y);
  m->save(dir.path("m"));
  Model loaded = load_model(dir.path("m"));
  EXPECT_EQ(loaded->get_config(), m->get_config());
  EXPECT_EQ(loaded->predict(x).to_vector<float>(), m->predict(x).to_vector<float>());
  Tensor y_big = y * 50.0;  // large updates: some kernel entries would go negative
  for (int i = 0; i < 3; ++i) loaded->train_on_batch(x, y_big);
  int zeros = 0;
  for (float v : loaded->get_weights()[0].to_vector<float>()) {
    EXPECT_GE(v, 0.0f);
    zeros += v == 0 ? 1 : 0;
  }
  EXPECT_GT(zeros, 0) << "the projection never bound: the test would not see it missing";
}

}  // namespace
}  // namespace kiln
