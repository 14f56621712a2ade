// Keras dtype policies: parsing and errors, the global policy, layers under "mixed_bfloat16"
// (float32 variables, bfloat16 outputs, values as the float32 layer on bfloat16-rounded inputs
// and weights, gradients reaching the float32 variables), under "float64", configs, losses, and
// a short eager training run of the digits MLP.
//
// Bounds: u = 2^-8 is bfloat16's unit roundoff (8 significand bits: a rounding is off by at most
// u times the magnitude). The core computes every bfloat16 op through float32 and rounds once,
// so a layer's bfloat16 output is its float32 computation on the same (rounded) operands with
// one rounding per op; where the test repeats those ops in float32 and rounds the same way the
// results agree bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"
#include "tests/saving/saving_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::HasSubstr;

constexpr double kPolicyU = 0x1p-8;     // bfloat16 unit roundoff
constexpr double kPolicyU32 = 0x1p-24;  // float32 unit roundoff

// x rounded to bfloat16 and widened back to float32 (exact).
Tensor policy_bf16_rounded(const Tensor& x) { return cast(cast(x, DType::bf16), DType::f32); }

std::vector<double> policy_values(const Tensor& t) {
  return cast(t, DType::f64).to_vector<double>();
}

void policy_expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  std::vector<double> va = policy_values(a), vb = policy_values(b);
  for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(va[i], vb[i]) << what << " element " << i;
}

TEST(DTypePolicyTest, NamesAndDtypes) {
  DTypePolicy f32;
  EXPECT_EQ(f32.name(), "float32");
  EXPECT_EQ(f32.compute_dtype(), DType::f32);
  DTypePolicy mixed("mixed_bfloat16");
  EXPECT_EQ(mixed.compute_dtype(), DType::bf16);
  EXPECT_EQ(mixed.variable_dtype(), DType::f32);
  EXPECT_TRUE(mixed.mixed());
  EXPECT_EQ(DTypePolicy("bfloat16").variable_dtype(), DType::bf16);
  EXPECT_EQ(DTypePolicy("float64").compute_dtype(), DType::f64);
  EXPECT_EQ(DTypePolicy("f64").name(), "float64");  // kiln's short names, standardized
  EXPECT_EQ(DTypePolicy(DType::i32).name(), "int32");
  EXPECT_EQ(mixed.repr(), "<DTypePolicy \"mixed_bfloat16\">");
}

TEST(DTypePolicyTest, Float16AndUnknownNamesAreErrors) {
  for (const char* name : {"float16", "mixed_float16"}) {
    std::string e = error_of([&] { DTypePolicy p(name); });
    EXPECT_THAT(e, HasSubstr("no float16")) << name;
    EXPECT_THAT(e, HasSubstr("mixed_bfloat16")) << name;
  }
  EXPECT_THAT(error_of([] { DTypePolicy p("mixed_float32"); }),
              HasSubstr("Cannot convert \"mixed_float32\""));
  EXPECT_THAT(error_of([] { Dense d(2, {.dtype = "float16"}); }), HasSubstr("no float16"));
}

TEST(DTypePolicyTest, SerializesAsKeras3AndReadsBothForms) {
  const Json keras = Json::parse(
      R"({"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_bfloat16"},
          "registered_name": null})");
  EXPECT_EQ(DTypePolicy("mixed_bfloat16").serialize(), keras);
  EXPECT_EQ(DTypePolicy::deserialize(keras), DTypePolicy("mixed_bfloat16"));
  EXPECT_EQ(DTypePolicy::deserialize(Json("float64")), DTypePolicy("float64"));
  Json quantized = keras;
  quantized["class_name"] = "QuantizedDTypePolicy";
  EXPECT_THAT(error_of([&] { DTypePolicy::deserialize(quantized); }),
              HasSubstr("QuantizedDTypePolicy"));
  EXPECT_THAT(error_of([] { DTypePolicy::deserialize(Json(3)); }), HasSubstr("got 3"));
}

TEST(DTypePolicyTest, GlobalPolicyIsReadAtConstructionAndRestored) {
  ASSERT_EQ(mixed_precision::global_policy(), DTypePolicy("float32"));
  Dense made_under_mixed(2);
  {
    mixed_precision::PolicyScope scope("mixed_bfloat16");
    EXPECT_EQ(mixed_precision::global_policy().name(), "mixed_bfloat16");
    made_under_mixed = Dense(2);
    Dense explicit_f32(2, {.dtype = "float32"});
    EXPECT_EQ(explicit_f32->compute_dtype(), DType::f32);
  }
  EXPECT_EQ(mixed_precision::global_policy().name(), "float32");
  EXPECT_EQ(made_under_mixed->dtype_policy().name(), "mixed_bfloat16");
  EXPECT_EQ(Dense(2)->dtype_policy().name(), "float32");
}

TEST(DTypePolicyTest, PolicyCannotChangeAfterBuild) {
  Dense d(2);
  d(ones({1, 3}));
  EXPECT_THAT(error_of([&] { d->set_dtype_policy("mixed_bfloat16"); }), HasSubstr("after it"));
}

TEST(MixedBfloat16Test, DenseMatchesFloat32OnRoundedOperandsBitForBit) {
  clear_session();
  Dense d(5, {.bias_initializer = "glorot_uniform", .dtype = "mixed_bfloat16"});
  Tensor x = gradcheck::uniform({4, 7}, 11, -2, 2, DType::f32);
  Tensor y = d(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(d->kernel.dtype(), DType::f32);
  EXPECT_EQ(d->bias.dtype(), DType::f32);
  EXPECT_EQ(d->dtype(), DType::f32);
  EXPECT_EQ(d->compute_dtype(), DType::bf16);
  // The same ops in float32 on the rounded operands, each result rounded once.
  Tensor xr = policy_bf16_rounded(x), kr = policy_bf16_rounded(d->kernel.value()),
         br = policy_bf16_rounded(d->bias.value());
  Tensor expected = cast(policy_bf16_rounded(matmul(xr, kr)) + br, DType::bf16);
  policy_expect_bitwise(y, expected, "mixed Dense");
  // Against exact math on the rounded operands: the product's float32 accumulation (7 terms)
  // and two bfloat16 roundings (product, sum), each relative to the magnitudes involved.
  std::vector<double> xv = policy_values(xr), kv = policy_values(kr), bv = policy_values(br),
                      yv = policy_values(y);
  for (int r = 0; r < 4; ++r)
    for (int u = 0; u < 5; ++u) {
      double exact = 0, mag = 0;
      for (int i = 0; i < 7; ++i) {
        exact += xv[size_t(r * 7 + i)] * kv[size_t(i * 5 + u)];
        mag += std::abs(xv[size_t(r * 7 + i)] * kv[size_t(i * 5 + u)]);
      }
      const double bound = (7 * kPolicyU32 + kPolicyU) * mag +
                           kPolicyU * (mag + std::abs(bv[size_t(u)])) * (1 + kPolicyU);
      EXPECT_LE(std::abs(yv[size_t(r * 5 + u)] - (exact + bv[size_t(u)])), bound);
    }
}

TEST(MixedBfloat16Test, GradientsReachTheFloat32Variables) {
  clear_session();
  Dense d(3, {.dtype = "mixed_bfloat16"});
  Tensor x = gradcheck::uniform({6, 4}, 5, -1, 1, DType::f32);
  d->maybe_build({x.shape()});
  GradientTape tape;
  Tensor loss = sum(cast(d(x), DType::f32));
  std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{d->kernel, d->bias});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].dtype(), DType::f32);
  EXPECT_EQ(g[1].dtype(), DType::f32);
  // d loss / d kernel[i, u] = sum_r x[r, i] (the bfloat16 x; the product's gradient is one
  // bfloat16 op: a float32 sum of 6 terms rounded once); d loss / d bias = 6 (exact).
  std::vector<double> xv = policy_values(policy_bf16_rounded(x)), gk = policy_values(g[0]),
                      gb = policy_values(g[1]);
  for (int i = 0; i < 4; ++i) {
    double exact = 0, mag = 0;
    for (int r = 0; r < 6; ++r)
      exact += xv[size_t(r * 4 + i)], mag += std::abs(xv[size_t(r * 4 + i)]);
    for (int u = 0; u < 3; ++u)
      EXPECT_LE(std::abs(gk[size_t(i * 3 + u)] - exact),
                (6 * kPolicyU32 + kPolicyU) * mag * (1 + kPolicyU));
  }
  for (double v : gb) EXPECT_EQ(v, 6.0);
  // An optimizer step updates the float32 variables.
  Tensor before = copy(d->kernel.value());
  Optimizer sgd = SGD({.learning_rate = 0.1});
  sgd->apply_gradients(g, {d->kernel, d->bias});
  EXPECT_EQ(d->kernel.dtype(), DType::f32);
  EXPECT_NE(policy_values(before), policy_values(d->kernel.value()));
}

TEST(MixedBfloat16Test, Conv2DWithinTheRoundingBound) {
  clear_session();
  Conv2D c(3, {2, 2}, {.bias_initializer = "glorot_uniform", .dtype = "mixed_bfloat16"});
  Tensor x = gradcheck::uniform({2, 5, 5, 2}, 21, -1, 1, DType::f32);
  Tensor y = c(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(c->kernel.dtype(), DType::f32);
  // The float32 convolution on the rounded operands: each output is a sum of 2*2*2 = 8
  // products rounded to bfloat16, plus the rounded bias rounded again.
  Tensor xr = policy_bf16_rounded(x), kr = policy_bf16_rounded(c->kernel.value()),
         br = policy_bf16_rounded(c->bias.value());
  Tensor ref = conv2d(cast(xr, DType::f64), cast(kr, DType::f64), {1, 1}, "valid", {1, 1});
  Tensor mag =
      conv2d(abs(cast(xr, DType::f64)), abs(cast(kr, DType::f64)), {1, 1}, "valid", {1, 1});
  std::vector<double> rv = policy_values(ref + cast(br, DType::f64)), mv = policy_values(mag),
                      yv = policy_values(y);
  std::vector<double> bv = policy_values(br);
  for (size_t i = 0; i < yv.size(); ++i) {
    const double b = std::abs(bv[i % 3]);
    EXPECT_LE(std::abs(yv[i] - rv[i]),
              (8 * kPolicyU32 + kPolicyU) * mv[i] + kPolicyU * (mv[i] + b) * (1 + kPolicyU))
        << i;
  }
}

TEST(MixedBfloat16Test, EmbeddingRowsAreTheRoundedTable) {
  clear_session();
  Embedding e(10, 4, {.dtype = "mixed_bfloat16"});
  Tensor ids = tensor(std::vector<double>{1, 3, 9, 0, 3, 2}, {2, 3}, DType::i32);
  Tensor y = e(ids);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(e->embeddings.dtype(), DType::f32);
  policy_expect_bitwise(y, cast(gather(e->embeddings.value(), ids, 0), DType::bf16), "embedding");
  // Floating indices are not autocast (Keras' Embedding has autocast off): 9.0 stays 9.
  Tensor fy = e(cast(ids, DType::f32));
  policy_expect_bitwise(fy, y, "float indices");
}

TEST(MixedBfloat16Test, LayerNormalizationComputesInFloat32) {
  clear_session();
  LayerNormalization ln({.dtype = "mixed_bfloat16"});
  Tensor x = cast(gradcheck::uniform({3, 8}, 31, -3, 3, DType::f32), DType::bf16);
  Tensor y = ln(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(ln->gamma.dtype(), DType::f32);
  // The float32 layer on the widened input, rounded once at the end.
  LayerNormalization ref;
  Tensor expected = cast(ref(cast(x, DType::f32)), DType::bf16);
  policy_expect_bitwise(y, expected, "LayerNormalization");
  // A float32 input is not cast to bfloat16 first (autocast off), as in Keras.
  Tensor x32 = gradcheck::uniform({3, 8}, 32, -3, 3, DType::f32);
  policy_expect_bitwise(ln(x32), cast(ref(x32), DType::bf16), "float32 input");
}

TEST(MixedBfloat16Test, BatchNormalizationStatisticsInFloat32) {
  clear_session();
  BatchNormalization bn({.dtype = "mixed_bfloat16"});
  Tensor x = gradcheck::uniform({6, 4}, 41, -3, 3, DType::f32);
  Tensor y = bn(x, true);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(bn->moving_mean.dtype(), DType::f32);
  BatchNormalization ref;
  policy_expect_bitwise(y, cast(ref(policy_bf16_rounded(x), true), DType::bf16),
                        "BatchNormalization");
  policy_expect_bitwise(cast(bn->moving_mean.value(), DType::f64),
                        cast(ref->moving_mean.value(), DType::f64), "moving mean");
}

TEST(MixedBfloat16Test, LstmWithinTheRoundingBound) {
  clear_session();
  const int steps = 4, units = 3;
  LSTM mixed(units, {.dtype = "mixed_bfloat16"});
  Tensor x = gradcheck::uniform({2, steps, 5}, 51, -1, 1, DType::f32);
  Tensor y = mixed(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  for (const Variable& v : mixed->weights()) EXPECT_EQ(v.dtype(), DType::f32) << v.name();
  // The float64 LSTM with the rounded weights on the rounded input.
  LSTM ref(units, {.dtype = "float64"});
  ref->maybe_build({x.shape()});
  std::vector<Tensor> w;
  for (const Tensor& t : mixed->get_weights())
    w.push_back(cast(policy_bf16_rounded(t), DType::f64));
  ref->set_weights(w);
  std::vector<double> rv = policy_values(ref(cast(policy_bf16_rounded(x), DType::f64))),
                      yv = policy_values(y);
  // Per step about 8 bfloat16 roundings (the two products, their sum, the bias add, the gate
  // activation, c = f c + i g, tanh c and h = o tanh c), each off by u of a magnitude below
  // M = 5 max|W| + 3 max|U| + max|b| + 1 + steps (|x| <= 1, |h| < 1, |c| <= steps). An error of
  // h or c enters the next step at most A = 1 + 3 max|U| times larger (the gates and tanh are
  // 1-Lipschitz, c is carried); the steps' errors add up.
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double v : policy_values(t)) m = std::max(m, std::abs(v));
    return m;
  };
  const double wk = max_abs(w[0]), uk = max_abs(w[1]), bk = max_abs(w[2]);
  const double m = 5 * wk + units * uk + bk + 1 + steps, a = 1 + units * uk;
  double bound = 0;
  for (int t = 0; t < steps; ++t) bound += 8 * kPolicyU * m * std::pow(a, t);
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_LE(std::abs(yv[i] - rv[i]), bound) << i;
}

TEST(Float64PolicyTest, DenseAndLayerNormalizationComputeInFloat64) {
  clear_session();
  Dense d(3, {.dtype = "float64"});
  Tensor x = gradcheck::uniform({2, 4}, 61, -1, 1, DType::f32);
  Tensor y = d(x);  // the float32 input is autocast to float64
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(d->kernel.dtype(), DType::f64);
  std::vector<double> xv = policy_values(x), kv = policy_values(d->kernel.value()),
                      yv = policy_values(y), ref;
  for (int r = 0; r < 2; ++r)
    for (int u = 0; u < 3; ++u) {
      double acc = 0;
      for (int i = 0; i < 4; ++i) acc += xv[size_t(r * 4 + i)] * kv[size_t(i * 3 + u)];
      ref.push_back(acc);
    }
  test::expect_close(yv, ref, 4, "float64 Dense");
  LayerNormalization ln({.dtype = "float64"});
  Tensor x64 = gradcheck::uniform({2, 4}, 62, -1, 1);
  Tensor z = ln(x64);
  EXPECT_EQ(z.dtype(), DType::f64);
  EXPECT_EQ(ln->gamma.dtype(), DType::f64);
}

TEST(DTypePolicyConfigTest, DtypeEntryAsKeras3WritesIt) {
  clear_session();
  Dense d(2, {.dtype = "mixed_bfloat16"});
  const Json c = d->get_config();
  EXPECT_EQ(c["dtype"], DTypePolicy("mixed_bfloat16").serialize());
  EXPECT_EQ(Dense(2)->get_config()["dtype"]["config"]["name"], "float32");
  // Read back from both forms.
  Json old = c;
  old["dtype"] = "mixed_bfloat16";
  for (const Json& cfg : {c, old}) {
    Layer back = layer_from_config(Json{{"class_name", "Dense"}, {"config", cfg}});
    EXPECT_EQ(back->dtype_policy().name(), "mixed_bfloat16");
  }
  // A layer without weights keeps its policy too (and autocasts its input).
  Layer act = layer_from_config(Json::parse(
      R"({"class_name": "Activation", "config": {"name": "a", "activation": "relu",
          "dtype": {"module": "keras", "class_name": "DTypePolicy",
                    "config": {"name": "mixed_bfloat16"}, "registered_name": null}}})"));
  EXPECT_EQ(act->dtype_policy().name(), "mixed_bfloat16");
  EXPECT_EQ(act(ones({2, 2})).dtype(), DType::bf16);
  EXPECT_EQ(act->get_config()["dtype"], DTypePolicy("mixed_bfloat16").serialize());
  Json f16 = c;
  f16["dtype"]["config"]["name"] = "mixed_float16";
  EXPECT_THAT(error_of([&] {
                layer_from_config(Json{{"class_name", "Dense"}, {"config", f16}});
              }),
              HasSubstr("no float16"));
}

// A .keras file Keras 3 saved under the global "mixed_bfloat16" policy (its values against
// Keras' predictions are checked in tests/python/test_mixed_precision.py): the policies load,
// the model computes in bfloat16 eagerly, and kiln's own file of it reloads bit for bit with
// the policies written as Keras writes them.
TEST(DTypePolicyConfigTest, KerasMixedBfloat16FileLoadsAndRoundTrips) {
  const std::string dir = std::string(KILN_SOURCE_DIR) + "/tests/saving/keras_files/";
  Model model = load_model(dir + "mlp_mixed_bf16.keras");
  Tensor x = load_npy(dir + "mlp_mixed_bf16.x0.npy");
  int dense = 0;
  for (const Layer& l : model->layers())
    if (l->class_name() == "Dense") {
      ++dense;
      EXPECT_EQ(l->dtype_policy().name(), "mixed_bfloat16");
      for (const Variable& v : l->weights()) EXPECT_EQ(v.dtype(), DType::f32);
    }
  EXPECT_EQ(dense, 2);
  Tensor y = model(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  test::TempDir tmp;
  model->save(tmp.path("again.keras"));
  Model again = load_model(tmp.path("again.keras"));
  policy_expect_bitwise(again(x), y, "reloaded");
  for (const Layer& l : again->layers()) {
    if (l->class_name() == "Dense") {
      EXPECT_EQ(l->get_config()["dtype"], DTypePolicy("mixed_bfloat16").serialize());
    }
  }
}

TEST(DTypePolicyLossTest, LossesComputeInFloat32) {
  Tensor y_pred = cast(tensor(std::vector<double>{0.5, 1.5, -1, 2}, {2, 2}), DType::bf16);
  Tensor y_true = tensor(std::vector<double>{0, 1, 0, 1}, {2, 2}, DType::f32);
  Tensor l = Loss("mse")(y_true, y_pred);
  EXPECT_EQ(l.dtype(), DType::f32);
  EXPECT_DOUBLE_EQ(l.item<float>(), (0.25 + 0.25 + 1 + 1) / 4);
}

// The digits MLP trained under mixed_bfloat16 reaches the float32 run's test accuracy within 2%
// (absolute), eagerly and with compiled steps. Same seed, same data order, 8 epochs.
TEST(MixedBfloat16TrainingTest, DigitsMlpWithinTwoPercentOfFloat32) {
  auto [train, test] = data::train_test_split(data::load_digits(), 0.2, 0);
  auto run = [&](const char* policy, bool eager) {
    mixed_precision::PolicyScope scope(policy);
    clear_session();
    set_random_seed(0);
    Sequential m({Dense(64, {.activation = "relu"}), Dense(10)}, Shape{64});
    m->compile({.optimizer = Adam({.learning_rate = 2e-3}),
                .loss = losses::sparse_categorical_crossentropy(true),
                .metrics = {"accuracy"},
                .run_eagerly = eager});
    m->fit(train.x, train.y, {.batch_size = 32, .epochs = 8, .verbose = 0, .seed = 0});
    if (std::string(policy) == "mixed_bfloat16") {
      EXPECT_EQ(m->predict(test.x).dtype(), DType::bf16);
      for (const Variable& v : m->weights()) EXPECT_EQ(v.dtype(), DType::f32);
    }
    return m->evaluate(test.x, test.y, {.verbose = 0}).at("accuracy");
  };
  const double f32 = run("float32", true);
  EXPECT_GE(f32, 0.9);
  for (bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "eager" : "compiled");
    ScopedExecutionMode compiled(ExecutionMode::kCompiled);  // (kiln_tests runs the reference)
    const double bf16 = run("mixed_bfloat16", eager);
    EXPECT_GE(bf16, f32 - 0.02) << "float32 " << f32 << ", mixed_bfloat16 " << bf16;
  }
}

}  // namespace
}  // namespace kiln
