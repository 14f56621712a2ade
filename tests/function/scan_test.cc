// kiln::scan (frontend/function/scan.cc): every step's state, eagerly and traced (a stacked
// while whose stacks are typed [steps, ...]); gradients through the stacked states and the
// final state equal the eager ones and central finite differences, on the reference executor
// and compiled; a stacked while whose declared trip count is wrong is an error in both.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/codegen/compile_graph.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/verifier.h"
#include "kiln/kiln.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/function/loop_gradient_check.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::expect_close;
using test::expect_matches_fd;
using test::finite_difference;
using test::Forward;
using ::testing::HasSubstr;

using test::kModes;

// h <- tanh(h * w + x[k]) for k = 0 .. steps-1 (steps = x's leading dimension); returns
// [stacked states, final state].
std::vector<Tensor> recurrence(const Tensor& h0, const Tensor& x, const Tensor& w) {
  ScanResult r = scan(x.shape()[0],
                      [x, w](const Tensor& k, const std::vector<Tensor>& s) {
                        return std::vector<Tensor>{tanh(s[0] * w + gather(x, k, 0))};
                      },
                      {h0});
  return {r.stacked[0], r.final_state[0]};
}

// L = sum(stacked * ws) + sum(final * wf) and its gradients with respect to h0, x and w.
std::vector<Tensor> recurrence_grads(const Tensor& h0, const Tensor& x, const Tensor& w,
                                     const Tensor& ws, const Tensor& wf) {
  GradientTape tape;
  tape.watch({h0, x, w});
  std::vector<Tensor> out = recurrence(h0, x, w);
  Tensor loss = sum(out[0] * ws) + sum(out[1] * wf);
  std::vector<Tensor> g = tape.gradient(loss, {h0, x, w}, UnconnectedGradients::kZero);
  g.insert(g.begin(), loss);
  return g;
}

TEST(Scan, StatesAndGradientsMatchEagerAndFiniteDifferences) {
  for (int64_t steps : {1, 2, 6}) {
    Tensor h0 = gradcheck::uniform({2, 3}, 1);
    Tensor x = gradcheck::uniform({steps, 2, 3}, 2);
    Tensor w = gradcheck::uniform({3}, 3);
    Tensor ws = gradcheck::uniform({steps, 2, 3}, 4);
    Tensor wf = gradcheck::uniform({2, 3}, 5);
    std::vector<Tensor> eager = recurrence_grads(h0, x, w, ws, wf);
    // The loss as one function of the inputs, for finite differences: sum(out * weights)
    // with out = [stacked; final] and weights = [ws; wf].
    Tensor weights = concat({ws, expand_dims(wf, 0)}, 0);
    Forward fwd = [](const std::vector<Tensor>& a) {
      std::vector<Tensor> out = recurrence(a[0], a[1], a[2]);
      return concat({out[0], expand_dims(out[1], 0)}, 0);
    };
    auto f = function(recurrence_grads, {.name = "scan_grads"});
    ConcreteFunction c = f.concrete(h0, x, w, ws, wf);
    for (ExecutionMode mode : kModes) {
      std::vector<Tensor> t = c.run({h0, x, w, ws, wf}, mode);
      std::string what = fmt::format("{} steps, {}", steps, execution_mode_name(mode));
      ASSERT_EQ(t.size(), 4u);
      const double terms = 8.0 * double(steps + 1) * 6;
      expect_close(t[0], eager[0], terms, what + ", loss");
      for (size_t i = 0; i < 3; ++i) {
        expect_close(t[1 + i], eager[1 + i], terms, fmt::format("{}, d/d input {}", what, i));
        expect_matches_fd(t[1 + i], finite_difference(fwd, {h0, x, w}, i, weights, 1e-6),
                          fmt::format("{}, d/d input {}", what, i));
      }
    }
  }
}

TEST(Scan, StackedStatesEqualTheEagerLoopBitwise) {
  // Integer-valued float arithmetic is exact: every path gives the same bits.
  Tensor h0 = tensor({1.0f, -2.0f, 3.0f}, {3});
  Tensor x =
      tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f}, {4, 3});
  auto run = [](const Tensor& h, const Tensor& xs) {
    ScanResult r = scan(4,
                        [xs](const Tensor& k, const std::vector<Tensor>& s) {
                          return std::vector<Tensor>{s[0] * 2.0f + gather(xs, k, 0)};
                        },
                        {h});
    return std::vector<Tensor>{r.stacked[0], r.final_state[0]};
  };
  std::vector<Tensor> eager = run(h0, x);
  ASSERT_EQ(eager[0].shape(), Shape({4, 3}));
  // By hand: h1 = 2 h0 + x0, ...
  std::vector<float> h = {1, -2, 3}, want;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j) {
      h[size_t(j)] = h[size_t(j)] * 2 + float(3 * k + j + 1);
      want.push_back(h[size_t(j)]);
    }
  EXPECT_EQ(eager[0].to_vector<float>(), want);
  EXPECT_EQ(eager[1].to_vector<float>(), std::vector<float>(want.end() - 3, want.end()));
  auto f = function(run, {.name = "scan_exact"});
  for (ExecutionMode mode : kModes) {
    std::vector<Tensor> t = f.concrete(h0, x).run({h0, x}, mode);
    EXPECT_EQ(t[0].to_vector<float>(), want) << execution_mode_name(mode);
    EXPECT_EQ(t[1].to_vector<float>(), eager[1].to_vector<float>()) << execution_mode_name(mode);
  }
  // Traced without a tape, the loop is still stacked, its stacks typed with the step count.
  std::string ir = f.concrete(h0, x).ir_text();
  EXPECT_THAT(ir, HasSubstr("f32[4,3]"));
  EXPECT_THAT(ir, HasSubstr("stacked"));
  EXPECT_THAT(ir, ::testing::Not(HasSubstr("f32[?,3]")));
}

// The compiled while takes its stacks from pools reused across calls (runtime/executable_while.cc):
// a stack the caller still holds is never written by a later call, and once released its
// buffer serves a later call again.
TEST(Scan, CompiledStacksAreReusedOnlyOnceReleased) {
  auto run = [](const Tensor& h, const Tensor& xs) {
    ScanResult r = scan(16,
                        [xs](const Tensor& k, const std::vector<Tensor>& s) {
                          return std::vector<Tensor>{s[0] * 2.0f + gather(xs, k, 0)};
                        },
                        {h});
    return std::vector<Tensor>{r.stacked[0], r.final_state[0]};
  };
  auto f = function(run, {.name = "scan_pooled"});
  Tensor h0 = zeros({64}), x1 = ones({16, 64}), x2 = full({16, 64}, 3.0f);
  auto call = [&](const Tensor& x) {
    return f.concrete(h0, x).run({h0, x}, ExecutionMode::kCompiled);
  };
  std::vector<Tensor> first = call(x1);
  const std::vector<float> first_values = first[0].to_vector<float>();
  std::vector<Tensor> second = call(x2);
  EXPECT_EQ(first[0].to_vector<float>(), first_values) << "a held stack was overwritten";
  EXPECT_NE(first[0].data<float>(), second[0].data<float>());
  // By hand: row k of the stack is (2^(k+1) - 1) * x.
  for (int k : {0, 5, 15}) {
    EXPECT_EQ(first_values[size_t(k * 64)], float((2 << k) - 1));
    EXPECT_EQ(second[0].to_vector<float>()[size_t(k * 64 + 7)], float((2 << k) - 1) * 3.0f);
  }
  const float* buffers[] = {first[0].data<float>(), second[0].data<float>()};
  first.clear();
  second.clear();
  std::vector<Tensor> third = call(x1);
  EXPECT_EQ(third[0].to_vector<float>(), first_values);
  EXPECT_TRUE(third[0].data<float>() == buffers[0] || third[0].data<float>() == buffers[1])
      << "the released stack buffers were not reused";
}

TEST(Scan, ZeroAndOneStep) {
  Tensor h0 = tensor({1.0f, 2.0f}, {2});
  auto run = [](int64_t steps) {
    return [steps](const Tensor& h) {
      ScanResult r = scan(steps,
                          [](const Tensor&, const std::vector<Tensor>& s) {
                            return std::vector<Tensor>{s[0] + 1.0f};
                          },
                          {h});
      return std::vector<Tensor>{r.stacked[0], r.final_state[0]};
    };
  };
  for (bool traced : {false, true}) {
    std::vector<Tensor> zero = traced ? function(run(0))(h0) : run(0)(h0);
    EXPECT_EQ(zero[0].shape(), Shape({0, 2}));
    EXPECT_EQ(zero[1].to_vector<float>(), std::vector<float>({1, 2}));
    std::vector<Tensor> one = traced ? function(run(1))(h0) : run(1)(h0);
    EXPECT_EQ(one[0].shape(), Shape({1, 2}));
    EXPECT_EQ(one[0].to_vector<float>(), std::vector<float>({2, 3}));
    EXPECT_EQ(one[1].to_vector<float>(), std::vector<float>({2, 3}));
  }
}

TEST(Scan, BadUseIsAnError) {
  Tensor h0 = tensor({1.0f, 2.0f}, {2});
  auto same = [](const Tensor&, const std::vector<Tensor>& s) { return s; };
  EXPECT_THAT(error_of([&] { scan(-1, same, {h0}); }), HasSubstr("scan: steps must be >= 0"));
  auto widen = [](const Tensor&, const std::vector<Tensor>& s) {
    return std::vector<Tensor>{concat({s[0], s[0]}, 0)};
  };
  EXPECT_THAT(error_of([&] { scan(2, widen, {h0}); }), HasSubstr("loop variables keep"));
}

// A stacked while declaring 4 rows whose loop runs 3 times (IR edited by hand): both
// executors refuse it instead of returning a stack of the wrong length.
TEST(Scan, AStackedWhileWithTheWrongDeclaredTripCountIsAnError) {
  auto f = function([](const Tensor& h) {
    ScanResult r = scan(3,
                        [](const Tensor&, const std::vector<Tensor>& s) {
                          return std::vector<Tensor>{s[0] * 2.0f};
                        },
                        {h});
    return r.final_state[0];
  });
  Tensor h0 = tensor({1.0f, 2.0f}, {2});
  std::string text = f.concrete(h0).ir_text();
  ASSERT_THAT(text, HasSubstr("f32[3,2]"));
  // Only the while node's declared stack type changes (the values computed from the stack
  // keep theirs).
  std::string edited = text;
  const size_t loop = edited.find(" = while(");
  ASSERT_NE(loop, std::string::npos);
  const size_t line_end = edited.find('\n', loop);
  const size_t at = edited.find("f32[3,2]", loop);
  ASSERT_LT(at, line_end);
  edited.replace(at, 8, "f32[4,2]");
  const size_t counter = edited.find("i64[3]", loop);  // the step counter's stack
  ASSERT_LT(counter, line_end);
  edited.replace(counter, 6, "i64[4]");
  // Stacks of different lengths are malformed IR.
  std::string mixed = text;
  mixed.replace(mixed.find("f32[3,2]", loop), 8, "f32[4,2]");
  EXPECT_THAT(error_of([&] { ir::verify_graph(*ir::parse_graph(mixed)); }),
              HasSubstr("the same for every stack"));
  std::unique_ptr<ir::Graph> g = ir::parse_graph(edited);
  runtime::Array arg = runtime::Array::empty(TensorType{DType::f32, Shape{2}});
  arg.data<float>()[0] = 1;
  arg.data<float>()[1] = 2;
  std::vector<runtime::Array> args{arg}, vars;
  EXPECT_THAT(error_of([&] { runtime::execute_reference(*g, args, vars); }),
              HasSubstr("is declared i64[4] but its value is i64[3]"));
  auto exe = codegen::compile_graph(*g);
  EXPECT_THAT(error_of([&] { exe->run(args, vars); }),
              HasSubstr("ran 3 iteration(s) but its stacks are declared with 4 rows"));
}

}  // namespace
}  // namespace kiln
