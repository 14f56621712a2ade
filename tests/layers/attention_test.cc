// MultiHeadAttention against naive loops (tests/layers/attention_reference.h), finite
// differences, its traced forms (reference executor and compiled, shape-polymorphic too),
// causal and padding masks, attention scores, dropout, functional models, Keras' weights and
// config, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/layers/attention_reference.h"
#include "tests/layers/layer_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::MhaReference;
using ::testing::HasSubstr;
using ::testing::Not;

// float64 layers: the comparisons below are then limited by summation order only.
MultiHeadAttentionOptions mha_f64(MultiHeadAttentionOptions o = {}) {
  o.dtype = DType::f64;
  return o;
}

// |a - b| <= terms * u * scale element by element, u = 2^-52, scale the largest magnitude (of
// a and b, or `scale_floor` if larger): the two differ only in the order of at most `terms`
// rounded operations per element.
void expect_attention_close(const std::vector<double>& a, const std::vector<double>& b,
                            double terms, const std::string& what, double scale_floor = 0) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = std::max(scale_floor, 1e-300);
  for (size_t j = 0; j < a.size(); ++j) scale = std::max({scale, std::abs(a[j]), std::abs(b[j])});
  for (size_t j = 0; j < a.size(); ++j)
    ASSERT_LE(std::abs(a[j] - b[j]), terms * 0x1p-52 * scale)
        << what << " element " << j << ": " << a[j] << " vs " << b[j];
}

// Builds the layer on `inputs` and sets every weight to random values in [-0.6, 0.6] (nonzero
// biases: zeros would hide bias bugs).
void build_with_random_weights(const Layer& layer, const std::vector<Tensor>& inputs,
                               uint64_t seed) {
  layer(inputs);
  std::vector<Tensor> w = layer->get_weights();
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = gradcheck::uniform(w[i].shape(), seed + i, -0.6, 0.6, w[i].dtype());
  layer->set_weights(w);
}

// A [batch, Tq, Tv] mask with a kept key in every row.
std::vector<int> some_mask(int64_t b, int64_t tq, int64_t tv) {
  std::vector<int> m;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < tq; ++t)
      for (int64_t s = 0; s < tv; ++s) m.push_back((i + 2 * t + s) % 3 != 0);
  return m;
}

Tensor bool_tensor(const std::vector<int>& m, const Shape& shape) {
  return tensor(std::vector<bool>(m.begin(), m.end()), shape);
}

// Rows [0, length) of sequence b of a [batch, T, F] tensor as a [1, length, F] tensor.
Tensor prefix(const Tensor& x, int64_t b, int64_t length) {
  return slice(x, {b, 0, 0}, {b + 1, length, x.shape()[2]});
}

// ---------------------------------------------------------------- against the naive loops

TEST(MultiHeadAttention, MatchesTheNaiveLoops) {
  const int64_t B = 2, Tq = 3, Tv = 5, H = 3, K = 2, V = 4;
  Tensor q = gradcheck::uniform({B, Tq, 4}, 1), v = gradcheck::uniform({B, Tv, 6}, 2),
         k = gradcheck::uniform({B, Tv, 3}, 3);
  const std::vector<int> mask = some_mask(B, Tq, Tv);
  for (bool with_key : {false, true})
    for (bool with_mask : {false, true})
      for (bool use_bias : {true, false}) {
        SCOPED_TRACE(fmt::format("key={} mask={} bias={}", with_key, with_mask, use_bias));
        MultiHeadAttentionOptions o = mha_f64({.value_dim = V, .use_bias = use_bias});
        o.return_attention_scores = true;
        if (with_key) o.output_shape = 7;
        MultiHeadAttention mha(H, K, o);
        std::vector<Tensor> in{q, v};
        if (with_key || with_mask) in.push_back(with_key ? k : v);
        if (with_mask) in.push_back(bool_tensor(mask, {B, Tq, Tv}));
        build_with_random_weights(mha, in, 10);
        std::vector<Tensor> out = mha(in);
        ASSERT_EQ(out.size(), 2u);
        EXPECT_EQ(out[0].shape(), (Shape{B, Tq, with_key ? 7 : 4}));
        EXPECT_EQ(out[1].shape(), (Shape{B, H, Tq, Tv}));
        MhaReference ref = MhaReference::of(mha, q, v, with_key ? k : v);
        if (with_mask) ref.mask = mask;
        MhaReference::Result want = ref.run();
        expect_attention_close(out[0].to_vector<double>(), want.output, ref.terms(), "output");
        expect_attention_close(out[1].to_vector<double>(), want.scores, ref.terms(), "scores");
      }
}

TEST(MultiHeadAttention, AttentionMaskBroadcastsAndMayBeNumeric) {
  const int64_t B = 2, Tq = 3, Tv = 4;
  Tensor q = gradcheck::uniform({B, Tq, 3}, 4), v = gradcheck::uniform({B, Tv, 3}, 5);
  MultiHeadAttention mha(2, 2, mha_f64());
  build_with_random_weights(mha, {q, v}, 20);
  std::vector<int> one = some_mask(1, Tq, Tv), both;
  for (int64_t b = 0; b < B; ++b) both.insert(both.end(), one.begin(), one.end());
  std::vector<double> full =
      mha->attend(q, v, {}, {.attention_mask = bool_tensor(both, {B, Tq, Tv})})[0]
          .to_vector<double>();
  MhaReference ref = MhaReference::of(mha, q, v, v);
  ref.mask = both;
  expect_attention_close(full, ref.run().output, ref.terms(), "[B, Tq, Tv]");
  // [Tq, Tv], [1, Tq, Tv] and a float 0/1 mask: the same attention.
  std::vector<double> as_double(one.begin(), one.end());
  for (const Tensor& m : {bool_tensor(one, {Tq, Tv}), bool_tensor(one, {1, Tq, Tv}),
                          tensor(as_double, {Tq, Tv}, DType::f64)})
    EXPECT_EQ(mha->attend(q, v, {}, {.attention_mask = m})[0].to_vector<double>(), full)
        << m.shape().to_string();
}

TEST(MultiHeadAttention, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, Tq = 2, Tv = 3;
  Tensor q = gradcheck::uniform({B, Tq, 3}, 6), v = gradcheck::uniform({B, Tv, 2}, 7),
         k = gradcheck::uniform({B, Tv, 2}, 8);
  // A value mask (sequence 1 has two real steps) and the causal mask: `where` in the path.
  Tensor value_mask = bool_tensor({1, 1, 1, 1, 1, 0}, {B, Tv});
  for (bool causal : {false, true}) {
    SCOPED_TRACE(fmt::format("causal={}", causal));
    MultiHeadAttentionOptions o = mha_f64({.value_dim = 3});
    o.use_causal_mask = causal;
    o.return_attention_scores = true;
    MultiHeadAttention mha(2, 2, o);
    build_with_random_weights(mha, {q, v, k}, 30);
    std::vector<Tensor> inputs{q, v, k};
    for (const Tensor& w : mha->get_weights()) inputs.push_back(w);
    const std::vector<Tensor> original = mha->get_weights();
    for (size_t output : {0u, 1u}) {
      auto f = [&](const std::vector<Tensor>& xs) {
        mha->set_weights(std::vector<Tensor>(xs.begin() + 3, xs.end()));
        return mha({xs[0], xs[1].with_keras_mask(value_mask), xs[2]})[output];
      };
      EXPECT_TRUE(gradcheck::check_gradients(f, inputs)) << "output " << output;
    }
    mha->set_weights(original);
  }
}

// ---------------------------------------------------------------- the fused attention op

// Without attention scores (and without dropout in training) the layer runs kiln::attention, one
// fused op; with return_attention_scores it composes matmul, where and softmax. Both give the
// same outputs and gradients (float64: up to summation order), with every kind of mask.
TEST(MultiHeadAttention, FusedAndComposedPathsAgree) {
  const int64_t B = 2, Tq = 5, Tv = 7;
  Tensor q = gradcheck::uniform({B, Tq, 4}, 61), v = gradcheck::uniform({B, Tv, 3}, 62),
         k = gradcheck::uniform({B, Tv, 5}, 63);
  // Query 4 of sequence 1 is padding: with the causal mask its row has no kept key.
  Tensor query_mask = bool_tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 0}, {B, Tq});
  Tensor value_mask = bool_tensor({1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0}, {B, Tv});
  Tensor attention_mask = bool_tensor(some_mask(B, Tq, Tv), {B, Tq, Tv});
  MultiHeadAttention mha(3, 2, mha_f64({.value_dim = 3}));
  build_with_random_weights(mha, {q, v, k}, 70);
  for (bool causal : {false, true})
    for (bool explicit_mask : {false, true}) {
      SCOPED_TRACE(fmt::format("causal={} attention_mask={}", causal, explicit_mask));
      auto run = [&](bool scores) {
        GradientTape tape(/*persistent=*/true);
        tape.watch(q);
        tape.watch(v);
        tape.watch(k);
        AttentionCallOptions call{.use_causal_mask = causal, .return_attention_scores = scores};
        if (explicit_mask) call.attention_mask = attention_mask;
        Tensor out =
            mha->attend(q.with_keras_mask(query_mask), v.with_keras_mask(value_mask), k, call)[0];
        Tensor loss = sum(out * out);
        std::vector<Tensor> r{out, tape.gradient(loss, q), tape.gradient(loss, v),
                              tape.gradient(loss, k)};
        for (const Tensor& g : tape.gradient(loss, mha->trainable_weights())) r.push_back(g);
        return r;
      };
      std::vector<Tensor> fused = run(false), composed = run(true);
      const double terms = 2 * MhaReference::of(mha, q, v, k).terms();
      double largest = 0;
      for (size_t i = 1; i < composed.size(); ++i)
        for (double g : composed[i].to_vector<double>()) largest = std::max(largest, std::abs(g));
      ASSERT_EQ(fused.size(), composed.size());
      for (size_t i = 0; i < fused.size(); ++i)
        expect_attention_close(fused[i].to_vector<double>(), composed[i].to_vector<double>(), terms,
                               fmt::format("result {}", i), i == 0 ? 0 : largest);
    }
}

// Which path a traced call records: the fused op, unless scores are returned or the
// probabilities drop out in training.
TEST(MultiHeadAttention, TracesTheFusedOpWhenItCan) {
  Tensor x = gradcheck::uniform({2, 4, 6}, 64, -1, 1, DType::f32);
  auto traced = [&](MultiHeadAttentionOptions o, bool training) {
    MultiHeadAttention mha(2, 3, o);
    auto f = function([&](const Tensor& t) { return mha(std::vector<Tensor>{t}, training)[0]; },
                      {.name = "mha"});
    return f.concrete(x).ir_text();
  };
  EXPECT_THAT(traced({.use_causal_mask = true}, true), HasSubstr("= attention("));
  EXPECT_THAT(traced({.dropout = 0.5}, false), HasSubstr("= attention("));
  EXPECT_THAT(traced({.dropout = 0.5}, true), Not(HasSubstr("= attention(")));
  EXPECT_THAT(traced({.return_attention_scores = true}, false), Not(HasSubstr("= attention(")));
}

// ---------------------------------------------------------------- traced

TEST(MultiHeadAttention, TracedAgreesWithEager) {
  const int64_t B = 2, Tq = 4, Tv = 6, Dq = 5, H = 2, K = 3;
  Tensor q = gradcheck::uniform({B, Tq, Dq}, 9), v = gradcheck::uniform({B, Tv, 3}, 10);
  Tensor w = gradcheck::uniform({B, Tq, Dq}, 11);
  Tensor value_mask = bool_tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, {B, Tv});
  MultiHeadAttention mha(H, K, mha_f64());
  build_with_random_weights(mha, {q, v}, 40);
  // The loss and its gradients with respect to the query, the value and every weight.
  auto grads = [&](const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& wt) {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    tape.watch(y);
    Tensor loss = sum(mha({x, y.with_keras_mask(m)})[0] * wt);
    std::vector<Tensor> out{loss, tape.gradient(loss, x), tape.gradient(loss, y)};
    for (const Tensor& g : tape.gradient(loss, mha->trainable_weights())) out.push_back(g);
    return out;
  };
  auto body = [&](const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& wt) {
    return grads(x, y, m, wt);
  };
  std::vector<Tensor> args{q, v, value_mask, w};
  std::vector<Tensor> eager = grads(q, v, value_mask, w);
  MhaReference ref = MhaReference::of(mha, q, v, v);
  // Gradients run the chain backwards as well: twice the terms. Every gradient sums products
  // of the same backward chain, so its rounding scales with the largest gradient, not with
  // its own size (the key bias's gradient is zero in exact arithmetic: the softmax ignores a
  // constant added to a row).
  const double terms = 2 * ref.terms();
  double largest_gradient = 0;
  for (size_t i = 1; i < eager.size(); ++i)
    for (double g : eager[i].to_vector<double>())
      largest_gradient = std::max(largest_gradient, std::abs(g));
  auto fixed = function(body, {.name = "mha"});
  // Shape-polymorphic: any batch size, or any lengths.
  auto polymorphic =
      function(body, {.name = "mha_any_batch",
                      .input_signature = std::vector<TensorSpec>{{Shape{-1, Tq, Dq}, DType::f64},
                                                                 {Shape{-1, Tv, 3}, DType::f64},
                                                                 {Shape{-1, Tv}, DType::b8},
                                                                 {Shape{-1, Tq, Dq}, DType::f64}}});
  auto any_length =
      function(body, {.name = "mha_any_length",
                      .input_signature = std::vector<TensorSpec>{{Shape{B, -1, Dq}, DType::f64},
                                                                 {Shape{B, -1, 3}, DType::f64},
                                                                 {Shape{B, -1}, DType::b8},
                                                                 {Shape{B, -1, Dq}, DType::f64}}});
  for (auto* f : {&fixed, &polymorphic, &any_length})
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      std::vector<Tensor> traced = f->concrete(q, v, value_mask, w).run(args, mode);
      ASSERT_EQ(traced.size(), eager.size());
      for (size_t i = 0; i < traced.size(); ++i)
        expect_attention_close(
            traced[i].to_vector<double>(), eager[i].to_vector<double>(), terms,
            fmt::format("{} {} output {}", f->name(), execution_mode_name(mode), i),
            i == 0 ? 0 : largest_gradient);
    }
}

// ---------------------------------------------------------------- masks

TEST(MultiHeadAttention, CausalMask) {
  // Self-attention: the output at position i does not change when later positions change.
  const int64_t T = 6, D = 4;
  MultiHeadAttention mha(2, 3, mha_f64({.use_causal_mask = true}));
  Tensor x = gradcheck::uniform({1, T, D}, 12);
  build_with_random_weights(mha, {x}, 50);
  std::vector<double> base = mha(x).to_vector<double>(), xv = x.to_vector<double>();
  for (int64_t i = 0; i < T; ++i) {
    std::vector<double> changed = xv;
    for (size_t j = size_t((i + 1) * D); j < changed.size(); ++j) changed[j] += 0.5;
    std::vector<double> y = mha(tensor(changed, {1, T, D}, DType::f64)).to_vector<double>();
    for (size_t j = 0; j < size_t((i + 1) * D); ++j) EXPECT_EQ(y[j], base[j]) << i << " " << j;
    if (i + 1 < T) {
      EXPECT_NE(y.back(), base.back());
    }
  }
  // Tq != Tv (Keras: query i sees the keys j <= i), as a per-call option of attend.
  const int64_t B = 2, Tq = 3, Tv = 5;
  MultiHeadAttention cross(2, 2, mha_f64());
  Tensor q = gradcheck::uniform({B, Tq, 3}, 13), v = gradcheck::uniform({B, Tv, 2}, 14);
  build_with_random_weights(cross, {q, v}, 60);
  std::vector<Tensor> out =
      cross->attend(q, v, {}, {.use_causal_mask = true, .return_attention_scores = true});
  MhaReference ref = MhaReference::of(cross, q, v, v);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tv; ++j) ref.mask.push_back(j <= i);
  MhaReference::Result want = ref.run();
  expect_attention_close(out[0].to_vector<double>(), want.output, ref.terms(), "causal output");
  expect_attention_close(out[1].to_vector<double>(), want.scores, ref.terms(), "causal scores");
  EXPECT_EQ(cross(std::vector<Tensor>{q, v}).size(), 1u);  // the layer's own options again
}

// A padded batch gives each sequence the outputs it has alone (at its real query positions),
// eagerly and traced; the output carries the query's mask.
TEST(MultiHeadAttention, PaddedBatchEqualsEachSequenceAlone) {
  const int64_t Tq = 5, Tv = 6, Dq = 4, Dv = 3;
  const std::vector<int64_t> q_len{5, 2, 4}, v_len{6, 3, 1};
  const int64_t B = int64_t(q_len.size());
  Tensor q = gradcheck::uniform({B, Tq, Dq}, 15), v = gradcheck::uniform({B, Tv, Dv}, 16);
  std::vector<int> qm, vm;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Tq; ++t) qm.push_back(t < q_len[size_t(b)]);
    for (int64_t t = 0; t < Tv; ++t) vm.push_back(t < v_len[size_t(b)]);
  }
  Tensor q_mask = bool_tensor(qm, {B, Tq}), v_mask = bool_tensor(vm, {B, Tv});
  MultiHeadAttention mha(2, 3, mha_f64());
  build_with_random_weights(mha, {q, v}, 70);
  Tensor masked = mha({q.with_keras_mask(q_mask), v.with_keras_mask(v_mask)})[0];
  auto traced_fn =
      function([&](const Tensor& a, const Tensor& am, const Tensor& c, const Tensor& cm) {
        return mha({a.with_keras_mask(am), c.with_keras_mask(cm)})[0];
      });
  Tensor traced = traced_fn(q, q_mask, v, v_mask);
  ASSERT_TRUE(masked.keras_mask().defined());
  EXPECT_EQ(masked.keras_mask().to_vector<int>(), qm);
  const double terms = MhaReference::of(mha, q, v, v).terms();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lq = q_len[size_t(b)];
    std::vector<double> want =
        mha({prefix(q, b, lq), prefix(v, b, v_len[size_t(b)])})[0].to_vector<double>();
    for (const Tensor* got : {&masked, &traced}) {
      std::vector<double> all = got->to_vector<double>();
      std::vector<double> rows(all.begin() + b * Tq * Dq, all.begin() + (b * Tq + lq) * Dq);
      expect_attention_close(rows, want, terms, fmt::format("sequence {}", b));
    }
  }
}

TEST(MultiHeadAttention, EmbeddingMaskZeroThroughASequentialModel) {
  // Self-attention over token embeddings: token 0 is padding.
  Embedding emb(10, 4, {.mask_zero = true, .dtype = DType::f64});
  MultiHeadAttention mha(2, 3, mha_f64());
  Sequential model({emb, mha});
  Tensor padded = tensor<int64_t>({3, 1, 4, 0, 0}, {1, 5});
  Tensor plain = tensor<int64_t>({3, 1, 4}, {1, 3});
  Tensor a = model(padded), b = model(plain);
  std::vector<double> av = a.to_vector<double>();
  Tensor e = emb(padded);
  expect_attention_close(std::vector<double>(av.begin(), av.begin() + 12), b.to_vector<double>(),
                         MhaReference::of(mha, e, e, e).terms(), "real positions");
  EXPECT_EQ(a.keras_mask().to_vector<int>(), (std::vector<int>{1, 1, 1, 0, 0}));
}

TEST(MultiHeadAttention, ScoresSumToOneWithZerosAtMaskedKeys) {
  const int64_t B = 2, Tq = 3, Tv = 4, H = 3;
  Tensor q = gradcheck::uniform({B, Tq, 2}, 17), v = gradcheck::uniform({B, Tv, 2}, 18);
  Tensor v_mask = bool_tensor({1, 1, 1, 1, 1, 0, 1, 0}, {B, Tv});
  // With dropout in training: the scores are the probabilities before the dropout (Keras).
  MultiHeadAttention mha(H, 2,
                         mha_f64({.dropout = 0.5, .seed = 1, .return_attention_scores = true}));
  build_with_random_weights(mha, {q, v}, 80);
  for (bool training : {false, true}) {
    std::vector<Tensor> out = mha({q, v.with_keras_mask(v_mask)}, training);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_FALSE(out[1].keras_mask().defined());
    std::vector<double> s = out[1].to_vector<double>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t row = 0; row < H * Tq; ++row) {
        double total = 0;
        for (int64_t j = 0; j < Tv; ++j) {
          double p = s[size_t(((b * H * Tq) + row) * Tv + j)];
          total += p;
          if (!(b == 1 && (j == 1 || j == 3))) continue;
          EXPECT_EQ(p, 0.0) << "masked key " << j;
        }
        // Rounding: the softmax's sum (Tv terms), its divisions, and this sum (Tv terms).
        EXPECT_NEAR(total, 1.0, (2.0 * Tv + 2) * 0x1p-52);
      }
  }
}

// ---------------------------------------------------------------- dropout and models

TEST(MultiHeadAttention, DropoutOnlyInTrainingAndSeeded) {
  Tensor q = gradcheck::uniform({2, 4, 3}, 19), v = gradcheck::uniform({2, 5, 3}, 20);
  MultiHeadAttention mha(2, 4, {.dropout = 0.5, .seed = 3});
  MultiHeadAttention plain(2, 4);
  plain({q, v});
  build_with_random_weights(mha, {q, v}, 90);
  plain->set_weights(mha->get_weights());
  std::vector<float> inference = mha({q, v})[0].to_vector<float>();
  EXPECT_EQ(inference, plain({q, v})[0].to_vector<float>());
  std::vector<float> a = mha({q, v}, true)[0].to_vector<float>();
  EXPECT_NE(a, inference);
  EXPECT_NE(a, mha({q, v}, true)[0].to_vector<float>());  // a new mask per call
  MultiHeadAttention same_seed(2, 4, {.dropout = 0.5, .seed = 3});
  same_seed({q, v});
  same_seed->set_weights(mha->get_weights());
  EXPECT_EQ(same_seed({q, v}, true)[0].to_vector<float>(), a);
}

TEST(MultiHeadAttention, FunctionalModelWithAnAttentionMaskInput) {
  clear_session();
  Tensor q = Input({3, 4}), v = Input({5, 2}), m = Input({3, 5}, DType::b8);
  MultiHeadAttention mha(2, 3, {.return_attention_scores = true});
  std::vector<Tensor> outs = mha({q, v, v, m});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].shape().to_string(), "(None, 3, 4)");
  EXPECT_EQ(outs[1].shape().to_string(), "(None, 2, 3, 5)");
  Model model({q, v, m}, outs);
  Tensor qc = gradcheck::uniform({2, 3, 4}, 21, -1, 1, DType::f32);
  Tensor vc = gradcheck::uniform({2, 5, 2}, 22, -1, 1, DType::f32);
  Tensor mc = bool_tensor(some_mask(2, 3, 5), {2, 3, 5});
  std::vector<Tensor> got = model(std::vector<Tensor>{qc, vc, mc});
  std::vector<Tensor> want = mha->attend(qc, vc, {}, {.attention_mask = mc});
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>());
  // Per-call flags other than the layer's cannot be recorded in a model.
  EXPECT_THAT(error_of([&] { mha->attend(q, v, {}, {.return_attention_scores = false}); }),
              HasSubstr("set them in MultiHeadAttentionOptions"));
}

// ---------------------------------------------------------------- weights and config

TEST(MultiHeadAttention, KerasWeightShapesNamesAndConfig) {
  clear_session();
  EXPECT_EQ(MultiHeadAttention(2, 3)->name(), "multi_head_attention");
  MultiHeadAttention mha(2, 3, {.value_dim = 4, .output_shape = 5, .name = "mha"});
  mha({gradcheck::uniform({2, 3, 6}, 1, -1, 1, DType::f32),
       gradcheck::uniform({2, 4, 7}, 2, -1, 1, DType::f32),
       gradcheck::uniform({2, 4, 8}, 3, -1, 1, DType::f32)});
  const std::vector<std::pair<std::string, Shape>> want{{"mha/query/kernel", {6, 2, 3}},
                                                        {"mha/query/bias", {2, 3}},
                                                        {"mha/key/kernel", {8, 2, 3}},
                                                        {"mha/key/bias", {2, 3}},
                                                        {"mha/value/kernel", {7, 2, 4}},
                                                        {"mha/value/bias", {2, 4}},
                                                        {"mha/attention_output/kernel", {2, 4, 5}},
                                                        {"mha/attention_output/bias", {5}}};
  std::vector<Variable> w = mha->weights();
  ASSERT_EQ(w.size(), want.size());
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].name(), want[i].first);
    EXPECT_EQ(w[i].shape(), want[i].second) << want[i].first;
  }
  EXPECT_EQ(mha->count_params(), 36 + 6 + 48 + 6 + 56 + 8 + 40 + 5);
  Json c = mha->get_config();
  EXPECT_EQ(c["name"], "mha");
  EXPECT_EQ(c["num_heads"], 2);
  EXPECT_EQ(c["key_dim"], 3);
  EXPECT_EQ(c["value_dim"], 4);
  EXPECT_EQ(c["output_shape"], Json::array({5}));
  EXPECT_EQ(c["dropout"], 0.0);
  EXPECT_EQ(c["use_bias"], true);
  EXPECT_EQ(c["kernel_initializer"], "glorot_uniform");
  EXPECT_EQ(c["bias_initializer"], "zeros");
  EXPECT_TRUE(c["attention_axes"].is_null());
  EXPECT_TRUE(c["seed"].is_null());
  EXPECT_EQ(c["dtype"], DTypePolicy("float32").serialize());
  EXPECT_EQ(c["use_causal_mask"], false);

  MultiHeadAttention plain(2, 3, {.use_bias = false, .kernel_regularizer = regularizers::l2(0.1)});
  Tensor x = gradcheck::uniform({1, 2, 4}, 4, -1, 1, DType::f32);
  plain(x);
  EXPECT_EQ(plain->weights().size(), 4u);
  EXPECT_EQ(plain->weights()[3].shape(), (Shape{2, 3, 4}));  // output back to the query's 4
  EXPECT_EQ(plain->get_config()["value_dim"], 3);
  EXPECT_TRUE(plain->get_config()["output_shape"].is_null());
  EXPECT_EQ(plain->losses().size(), 4u);  // one per kernel
  EXPECT_EQ(plain->compute_output_shape({Shape{-1, 2, 4}}), (std::vector<Shape>{{-1, 2, 4}}));
  MultiHeadAttention active(2, 3, {.activity_regularizer = regularizers::l1(0.1)});
  active(x);
  EXPECT_EQ(active->losses().size(), 4u);  // the four projections' outputs
}

// ---------------------------------------------------------------- bad input

TEST(MultiHeadAttention, BadInput) {
  MultiHeadAttention mha(2, 3, {.name = "mha_bad"});
  Tensor q = zeros({2, 3, 4}), v = zeros({2, 5, 6});
  EXPECT_THAT(error_of([&] {
                mha(zeros({2, 4}));
              }),
              HasSubstr("layer \"mha_bad\": the query must have shape [batch, length, features]"));
  EXPECT_THAT(error_of([&] {
                mha({q, zeros({5, 6})});
              }),
              HasSubstr("the value must have shape [batch, length, features] with known "
                        "features, got (5, 6)"));
  EXPECT_THAT(error_of([&] {
                mha({q, zeros({3, 5, 6})});
              }),
              HasSubstr("same batch size; got query (2, 3, 4), value (3, 5, 6)"));
  EXPECT_THAT(error_of([&] {
                mha({q, v, zeros({2, 4, 6})});
              }),
              HasSubstr("the key and the value must have the same length"));
  EXPECT_THAT(error_of([&] { mha({q, v, v, v, v}); }), HasSubstr("got 5 inputs"));
  mha({q, v});
  EXPECT_THAT(error_of([&] {
                mha({zeros({2, 3, 5}), v});
              }),
              HasSubstr("the query has 5 features (shape (2, 3, 5)), but the layer was built "
                        "for 4 (weight query/kernel (4, 2, 3))"));
  Tensor wrong = cast(ones({2, 5, 3}), DType::b8);
  EXPECT_THAT(error_of([&] { mha->attend(q, v, {}, {.attention_mask = wrong}); }),
              HasSubstr("the attention_mask must have shape [batch, Tq, Tv] = (2, 3, 5)"));
  Tensor mask = cast(ones({2, 4}), DType::b8);
  EXPECT_THAT(error_of([&] {
                mha({q, v.with_keras_mask(mask)});
              }),
              HasSubstr("the value's mask must have shape [batch, length] = (2, 5)"));
  EXPECT_THAT(error_of([&] {
                mha({q.with_keras_mask(mask), v});
              }),
              HasSubstr("the query's mask must have shape [batch, length] = (2, 3)"));
  // Causal masks need the lengths when traced.
  MultiHeadAttention causal(2, 3, {.use_causal_mask = true});
  causal({q, v});
  auto f = function(
      [&](const Tensor& a, const Tensor& b) {
        return causal({a, b})[0];
      },
      {.input_signature =
           std::vector<TensorSpec>{{Shape{2, -1, 4}, DType::f32}, {Shape{2, -1, 6}, DType::f32}}});
  EXPECT_THAT(error_of([&] { f(q, v); }), HasSubstr("use_causal_mask needs the query and value "
                                                    "lengths"));
  // Splitting the heads needs the batch size or the length.
  auto g = function(
      [&](const Tensor& a, const Tensor& b) {
        return mha({a, b})[0];
      },
      {.input_signature =
           std::vector<TensorSpec>{{Shape{-1, -1, 4}, DType::f32}, {Shape{2, -1, 6}, DType::f32}}});
  EXPECT_THAT(error_of([&] { g(q, v); }),
              HasSubstr("traced with the query's batch size and length both unknown (shape "
                        "(None, None, 4)); trace with one of them known"));
  EXPECT_THAT(error_of([] { MultiHeadAttention(0, 3); }), HasSubstr("num_heads"));
  EXPECT_THAT(error_of([] { MultiHeadAttention(2, 3, {.dropout = 1.0}); }), HasSubstr("dropout"));
  EXPECT_THAT(error_of([] { MultiHeadAttention(2, 3, {.output_shape = 0}); }),
              HasSubstr("output_shape"));
}

}  // namespace
}  // namespace kiln
