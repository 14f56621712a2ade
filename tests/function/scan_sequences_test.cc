// kiln::scan over sequences (xs; frontend/function/scan.cc): step k receives row k of each
// sequence. Values and gradients equal the eager loop and central finite differences on the
// reference executor and compiled; traced, the sequences' gradients leave the gradient loop
// as one stack (no full-size scatter per iteration), and a body that also uses a sequence
// directly still gets its whole gradient. Stacks nothing reads are not built
// (runtime/while_stacks.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/runtime/while_stacks.h"
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

// h <- tanh(h * w + a[k] * b[k]) + also * sum(a), a and b read through their rows (and a also
// directly when `also` is nonzero); returns [stacked states, final state].
std::vector<Tensor> sequence_recurrence(const Tensor& h0, const Tensor& a, const Tensor& b,
                                        const Tensor& w, double also) {
  ScanResult r = scan(
      a.shape()[0],
      [a, w, also](const Tensor&, const std::vector<Tensor>& s, const std::vector<Tensor>& rows) {
        Tensor next = tanh(s[0] * w + rows[0] * rows[1]);
        if (also != 0) next = next + sum(a) * also;
        return std::vector<Tensor>{next};
      },
      {h0}, {a, b});
  return {r.stacked[0], r.final_state[0]};
}

// L = sum(stacked * ws) + sum(final * wf) and its gradients with respect to h0, a, b and w.
auto sequence_recurrence_grads(double also) {
  return [also](const Tensor& h0, const Tensor& a, const Tensor& b, const Tensor& w,
                const Tensor& ws, const Tensor& wf) {
    GradientTape tape;
    tape.watch({h0, a, b, w});
    std::vector<Tensor> out = sequence_recurrence(h0, a, b, w, also);
    Tensor loss = sum(out[0] * ws) + sum(out[1] * wf);
    std::vector<Tensor> g = tape.gradient(loss, {h0, a, b, w}, UnconnectedGradients::kZero);
    g.insert(g.begin(), loss);
    return g;
  };
}

TEST(ScanSequences, StatesAndGradientsMatchEagerAndFiniteDifferences) {
  for (double also : {0.0, 0.25})
    for (int64_t steps : {1, 2, 5}) {
      Tensor h0 = gradcheck::uniform({2, 3}, 1);
      Tensor a = gradcheck::uniform({steps, 2, 3}, 2);
      Tensor b = gradcheck::uniform({steps, 2, 3}, 3);
      Tensor w = gradcheck::uniform({3}, 4);
      Tensor ws = gradcheck::uniform({steps, 2, 3}, 5);
      Tensor wf = gradcheck::uniform({2, 3}, 6);
      std::vector<Tensor> eager = sequence_recurrence_grads(also)(h0, a, b, w, ws, wf);
      Tensor weights = concat({ws, expand_dims(wf, 0)}, 0);
      Forward fwd = [also](const std::vector<Tensor>& x) {
        std::vector<Tensor> out = sequence_recurrence(x[0], x[1], x[2], x[3], also);
        return concat({out[0], expand_dims(out[1], 0)}, 0);
      };
      ConcreteFunction c = function(sequence_recurrence_grads(also), {.name = "scan_rows_grads"})
                               .concrete(h0, a, b, w, ws, wf);
      for (ExecutionMode mode : kModes) {
        std::vector<Tensor> t = c.run({h0, a, b, w, ws, wf}, mode);
        std::string what =
            fmt::format("{} steps, also {}, {}", steps, also, execution_mode_name(mode));
        ASSERT_EQ(t.size(), 5u);
        // Each value sums at most (steps + 1) * 6 products of a few terms in another order.
        const double terms = 8.0 * double(steps + 1) * 6 * double(steps * 6);
        expect_close(t[0], eager[0], terms, what + ", loss");
        for (size_t i = 0; i < 4; ++i) {
          expect_close(t[1 + i], eager[1 + i], terms, fmt::format("{}, d/d input {}", what, i));
          expect_matches_fd(t[1 + i], finite_difference(fwd, {h0, a, b, w}, i, weights, 1e-6),
                            fmt::format("{}, d/d input {}", what, i));
        }
      }
    }
}

// The same recurrence written with the sequences as ordinary captures (gather(a, k)) sums a
// full-size gradient per iteration (a scatter_add in the gradient loop); with xs, the rows'
// gradients are stacked and put in order once after the loop.
TEST(ScanSequences, RowGradientsLeaveTheGradientLoopAsOneStack) {
  Tensor h0 = gradcheck::uniform({2, 3}, 1);
  Tensor a = gradcheck::uniform({4, 2, 3}, 2);
  Tensor b = gradcheck::uniform({4, 2, 3}, 3);
  Tensor w = gradcheck::uniform({3}, 4);
  auto grads = [](bool rows) {
    return [rows](const Tensor& h0, const Tensor& a, const Tensor& b, const Tensor& w) {
      GradientTape tape;
      tape.watch({a, b});
      ScanResult r = rows ? scan(4,
                                 [w](const Tensor&, const std::vector<Tensor>& s,
                                     const std::vector<Tensor>& x) {
                                   return std::vector<Tensor>{tanh(s[0] * w + x[0] * x[1])};
                                 },
                                 {h0}, {a, b})
                          : scan(4,
                                 [w, a, b](const Tensor& k, const std::vector<Tensor>& s) {
                                   return std::vector<Tensor>{
                                       tanh(s[0] * w + gather(a, k, 0) * gather(b, k, 0))};
                                 },
                                 {h0});
      return tape.gradient(sum(r.final_state[0]), {a, b});
    };
  };
  std::string with_rows = function(grads(true)).concrete(h0, a, b, w).ir_text();
  std::string with_gather = function(grads(false)).concrete(h0, a, b, w).ir_text();
  EXPECT_THAT(with_gather, HasSubstr("scatter_add"));  // the check below can fail
  EXPECT_THAT(with_rows, ::testing::Not(HasSubstr("scatter_add")));
  // Both compute the same gradients (rounding aside: the same products, added to zero once).
  for (ExecutionMode mode : kModes) {
    std::vector<Tensor> x = function(grads(true)).concrete(h0, a, b, w).run({h0, a, b, w}, mode);
    std::vector<Tensor> y = function(grads(false)).concrete(h0, a, b, w).run({h0, a, b, w}, mode);
    for (size_t i = 0; i < 2; ++i) expect_close(x[i], y[i], 64, execution_mode_name(mode));
  }
}

// An integer sequence (token ids per step) takes no gradient; the float table it indexes does.
// h <- h * 0.5 + table[ids[k]] has d h_final / d table[j] = sum over steps k with ids[k] = j of
// 0.5^(steps-1-k), exactly (powers of two).
TEST(ScanSequences, AnIntegerSequenceIndexesACapturedTable) {
  Tensor ids = tensor({2.0, 0.0, 2.0, 1.0}, {4}, DType::i64);
  Tensor table = tensor({1.0, 2.0, 3.0}, {3}, DType::f64);
  auto run = [](const Tensor& ids, const Tensor& table) {
    GradientTape tape;
    tape.watch(table);
    ScanResult r =
        scan(4,
             [table](const Tensor&, const std::vector<Tensor>& s, const std::vector<Tensor>& rows) {
               return std::vector<Tensor>{s[0] * 0.5 + gather(table, rows[0], 0)};
             },
             {scalar(0, DType::f64)}, {ids});
    return std::vector<Tensor>{r.final_state[0], tape.gradient(r.final_state[0], table)};
  };
  // final = ((3 * .5 + 1) * .5 + 3) * .5 + 2 = 4.125
  const std::vector<double> want_grad = {0.25, 1.0, 0.125 + 0.5};
  std::vector<Tensor> eager = run(ids, table);
  EXPECT_EQ(eager[0].item<double>(), 4.125);
  EXPECT_EQ(eager[1].to_vector<double>(), want_grad);
  ConcreteFunction c = function(run).concrete(ids, table);
  for (ExecutionMode mode : kModes) {
    std::vector<Tensor> t = c.run({ids, table}, mode);
    EXPECT_EQ(t[0].item<double>(), 4.125) << execution_mode_name(mode);
    EXPECT_EQ(t[1].to_vector<double>(), want_grad) << execution_mode_name(mode);
  }
}

// No step: the state comes back unchanged, the stacks and the sequences' gradients are empty.
TEST(ScanSequences, ZeroSteps) {
  auto run = [](const Tensor& h, const Tensor& xs) {
    GradientTape tape;
    tape.watch({h, xs});
    ScanResult r =
        scan(0,
             [](const Tensor&, const std::vector<Tensor>& s, const std::vector<Tensor>& rows) {
               return std::vector<Tensor>{s[0] * rows[0]};
             },
             {h}, {xs});
    std::vector<Tensor> g =
        tape.gradient(sum(r.final_state[0]), {h, xs}, UnconnectedGradients::kZero);
    return std::vector<Tensor>{r.final_state[0], r.stacked[0], g[0], g[1]};
  };
  Tensor h = tensor({1.5f, -2.0f}, {2});
  Tensor xs = zeros({0, 2});
  std::vector<Tensor> eager = run(h, xs);
  ConcreteFunction c = function(run).concrete(h, xs);
  for (ExecutionMode mode : kModes) {
    std::vector<Tensor> t = c.run({h, xs}, mode);
    for (const std::vector<Tensor>* r : {&eager, &t}) {
      EXPECT_EQ((*r)[0].to_vector<float>(), std::vector<float>({1.5f, -2.0f}));
      EXPECT_EQ((*r)[1].shape(), Shape({0, 2}));
      EXPECT_EQ((*r)[2].to_vector<float>(), std::vector<float>({1.0f, 1.0f}));
      EXPECT_EQ((*r)[3].shape(), Shape({0, 2}));
    }
  }
}

TEST(ScanSequences, ASequenceOfTheWrongLengthIsAnError) {
  Tensor h0 = tensor({1.0f, 2.0f}, {2});
  Tensor xs = zeros({3, 2});
  auto same = [](const Tensor&, const std::vector<Tensor>& s, const std::vector<Tensor>&) {
    return s;
  };
  for (bool traced : {false, true}) {
    std::string e = error_of([&] {
      if (traced)
        function([&](const Tensor& h) { return scan(4, same, {h}, {xs}).final_state[0]; })(h0);
      else
        scan(4, same, {h0}, {xs});
    });
    EXPECT_THAT(e, HasSubstr("scan: sequence 0 must be [steps, ...] = [4, ...]"));
    EXPECT_THAT(e, HasSubstr("f32[3,2]"));
  }
}

// A stack no one reads (kept false) keeps no rows and is returned as [0, shape...], whether
// its rows are kept until the end (unknown trip count) or copied in at each push (declared).
TEST(ScanSequences, AStackNothingReadsIsNotBuilt) {
  for (int64_t declared : {-1, 2}) {
    runtime::WhileStacks stacks(std::vector<bool>{true, false}, declared);
    runtime::Array one = runtime::Array::empty(DType::f32, Shape{2});
    one.data<float>()[0] = 1;
    one.data<float>()[1] = 2;
    runtime::Array big = runtime::Array::empty(DType::f32, Shape{1000});
    std::vector<runtime::Array> state{one, big};
    stacks.push(state);
    stacks.push(state);
    std::vector<runtime::Array> out = stacks.finish(state);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].shape, Shape({2, 2}));
    EXPECT_EQ(std::vector<float>(out[0].data<float>(), out[0].data<float>() + 4),
              std::vector<float>({1, 2, 1, 2}));
    EXPECT_EQ(out[1].shape, Shape({0, 1000}));
    EXPECT_EQ(*out[2].data<int64_t>(), 2);
  }
}

// next_row(i) views the row the next push fills (declared trip count, kept stack, rows of a
// multiple of 64 bytes, rows left): a value computed there is pushed without a copy; any
// other array is copied in, as before.
TEST(ScanSequences, ARowComputedInItsPlaceIsNotCopied) {
  runtime::WhileStacks stacks(std::vector<bool>{true, true, false}, /*declared_trips=*/3);
  auto filled = [](const Shape& shape, float value) {
    runtime::Array a = runtime::Array::empty(DType::f32, shape);
    std::fill(a.data<float>(), a.data<float>() + a.size(), value);
    return a;
  };
  std::vector<runtime::Array> state{filled({16}, 0), filled({3}, 0), filled({16}, 0)};
  EXPECT_FALSE(stacks.next_row(0).storage) << "no stack before the first push";
  stacks.push(state);
  runtime::Array row = stacks.next_row(0);
  ASSERT_TRUE(row.storage);
  EXPECT_EQ(row.type(), state[0].type());
  EXPECT_FALSE(stacks.next_row(1).storage) << "12-byte rows are not 64-byte aligned";
  EXPECT_FALSE(stacks.next_row(2).storage) << "a stack nothing reads";
  std::fill(row.data<float>(), row.data<float>() + 16, 1.0f);  // computed in its place
  state = {row, filled({3}, 1), filled({16}, 1)};
  stacks.push(state);
  state = {filled({16}, 2), filled({3}, 2), filled({16}, 2)};  // elsewhere: copied
  stacks.push(state);
  EXPECT_FALSE(stacks.next_row(0).storage) << "no rows left";
  std::vector<runtime::Array> out = stacks.finish(state);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].raw(), static_cast<const char*>(row.raw()) - 64) << "row 1 of the stack";
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(out[0].data<float>()[k * 16 + 15], float(k));
    EXPECT_EQ(out[1].data<float>()[k * 3 + 2], float(k));
  }
  EXPECT_EQ(out[2].shape, Shape({0, 16}));
}

}  // namespace
}  // namespace kiln
