// The reference executor's options (the error-bound oracle of the tests): float64 evaluation
// of float32 graphs (widen_f32), float32 evaluation of bf16 graphs (widen_bf16), the after-op
// hook, and ScopedReferenceHook.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/parser.h"
#include "kiln/runtime/reference_executor.h"

namespace kiln::runtime {
namespace {

template <typename T>
Array options_array_of(const Shape& s, const std::vector<T>& values) {
  Array a = Array::empty(dtype_of<T>(), s);
  std::memcpy(a.raw(), values.data(), a.nbytes());
  return a;
}

// (x + 1e-8) - x cancels to 0 in float32 and keeps 1e-8 (the float32 constant, widened) in
// float64; an i32 16777217 cast to f32 rounds to 16777216 unless widened; the variable is
// updated in the evaluation's precision; random numbers are the float32 ones.
constexpr const char* kGraph = R"(graph @g(%x: f32[2], %n: i32[]) -> (f32[2], f32[], f32[2]) {
  variables {
    $0 = "w" : f32[2] read write -> %w
  }
  %eps = constant dense<1e-08> : f32[]
  %a = add(%x, %eps) : f32[2]
  %d = sub(%a, %x) : f32[2]
  %c = cast(%n) {dtype=f32} : f32[]
  %seed = constant dense<7> : i64[]
  %r = random_uniform(%seed) {shape=[2], dtype=f32, minval=0.0, maxval=1.0} : f32[2]
  %new = assign_add $0, %d : f32[2]
  return %d, %c, %r
})";

TEST(ReferenceOptions, Float32GraphsEvaluateInFloat64) {
  auto g = ir::parse_graph(kGraph, "test");
  std::vector<Array> args = {options_array_of<float>({2}, {1.0f, -3.0f}),
                             options_array_of<int32_t>({}, {16777217})};
  std::vector<Array> narrow_vars = {options_array_of<float>({2}, {0.5f, 0.25f})};
  std::vector<Array> narrow = execute_reference(*g, args, narrow_vars);
  ReferenceOptions wide;
  wide.widen_f32 = true;
  std::vector<Array> wide_vars = {options_array_of<float>({2}, {0.5f, 0.25f})};
  std::vector<Array> widened = execute_reference(*g, args, wide_vars, wide);

  EXPECT_EQ(narrow[0].data<float>()[0], 0.0f);
  ASSERT_EQ(widened[0].dtype, DType::f64);
  const double eps = double(1e-08f);
  EXPECT_NEAR(widened[0].data<double>()[0], eps, 1e-22);
  EXPECT_NEAR(widened[0].data<double>()[1], eps, 1e-22);
  EXPECT_EQ(narrow[1].data<float>()[0], 16777216.0f);
  EXPECT_EQ(widened[1].data<double>()[0], 16777217.0);
  ASSERT_EQ(widened[2].dtype, DType::f64);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(widened[2].data<double>()[i], narrow[2].data<float>()[i]);
  ASSERT_EQ(wide_vars[0].dtype, DType::f64);
  EXPECT_EQ(wide_vars[0].data<double>()[0], 0.5 + eps);
  EXPECT_EQ(narrow_vars[0].data<float>()[0], 0.5f);
}

// widen_bf16 runs a bf16 graph as its float32 twin: bf16 arguments, variables and constants
// widened, casts to bf16 and random bf16 draws producing float32, nothing rounded to bf16.
// 1 + 2^-9 rounds to 1 in bf16 and stays in float32; the bf16 random draw is the float32 one
// before its rounding; the variable is updated in float32.
TEST(ReferenceOptions, Bf16GraphsEvaluateInFloat32) {
  auto g = ir::parse_graph(R"(graph @g(%x: bf16[2], %f: f32[2]) -> (bf16[2], bf16[2], bf16[]) {
  variables {
    $0 = "w" : bf16[2] read write -> %w
  }
  %tiny = constant dense<0.001953125> : bf16[]
  %a = add(%x, %tiny) : bf16[2]
  %c = cast(%f) {dtype=bf16} : bf16[2]
  %seed = constant dense<7> : i64[]
  %r = random_normal(%seed) {shape=[], dtype=bf16, mean=0.0, stddev=1.0} : bf16[]
  %new = assign_add $0, %c : bf16[2]
  return %a, %c, %r
})",
                           "test");
  auto bf16_of = [](std::vector<float> v) {
    Array a = Array::empty(DType::bf16, Shape{int64_t(v.size())});
    for (size_t i = 0; i < v.size(); ++i)
      static_cast<bfloat16*>(a.raw())[i] = bfloat16::from_float(v[i]);
    return a;
  };
  const float third = 1.0f / 3.0f;
  std::vector<Array> args = {bf16_of({1.0f, -2.0f}), options_array_of<float>({2}, {third, 0.1f})};
  std::vector<Array> narrow_vars = {bf16_of({0.5f, 1.0f})};
  std::vector<Array> narrow = execute_reference(*g, args, narrow_vars);
  ReferenceOptions wide;
  wide.widen_bf16 = true;
  std::vector<Array> wide_vars = {bf16_of({0.5f, 1.0f})};
  std::vector<Array> widened = execute_reference(*g, args, wide_vars, wide);

  ASSERT_EQ(narrow[0].dtype, DType::bf16);
  EXPECT_EQ(static_cast<const bfloat16*>(narrow[0].raw())[0].to_float(), 1.0f);
  ASSERT_EQ(widened[0].dtype, DType::f32);
  EXPECT_EQ(widened[0].data<float>()[0], 1.0f + 0x1p-9f);
  EXPECT_EQ(widened[0].data<float>()[1], -2.0f + 0x1p-9f);
  ASSERT_EQ(widened[1].dtype, DType::f32);
  EXPECT_EQ(widened[1].data<float>()[0], third);  // no rounding to bf16
  ASSERT_EQ(widened[2].dtype, DType::f32);
  EXPECT_EQ(bfloat16::from_float(widened[2].data<float>()[0]).bits,
            static_cast<const bfloat16*>(narrow[2].raw())[0].bits);
  ASSERT_EQ(wide_vars[0].dtype, DType::f32);
  EXPECT_EQ(wide_vars[0].data<float>()[0], 0.5f + third);
  EXPECT_EQ(wide_vars[0].data<float>()[1], 1.0f + 0.1f);
}

// The hook sees every op (fusion bodies included) and assign_add as add, with the declared
// dtype; a result it replaces is what later ops read.
TEST(ReferenceOptions, HookSeesEveryOpAndCanReplaceResults) {
  auto g = ir::parse_graph(R"(graph @g(%x: f32[2]) -> (f32[2]) {
  variables {
    $0 = "w" : f32[2] read write -> %w
  }
  %y = fusion(%x) : f32[2] kind("loop") @f {
    body (%0: f32[2]) -> (f32[2]) {
      %1 = exp(%0) : f32[2]
      %2 = neg(%1) : f32[2]
      return %2
    }
  }
  %z = mul(%y, %x) : f32[2]
  %new = assign_add $0, %z : f32[2]
  return %z
})",
                           "test");
  std::vector<std::string> seen;
  ReferenceOptions opts;
  opts.widen_f32 = true;
  opts.after_op = [&](OpKind op, const Attrs&, std::span<const Array> in, Array& out,
                      DType declared) {
    seen.push_back(std::string(op_name(op)) + ":" + std::string(dtype_name(declared)) + ":" +
                   std::string(dtype_name(out.dtype)) + ":" + std::to_string(in.size()));
    if (op == OpKind::Exp)
      out = options_array_of<double>({2}, {10.0, 20.0});  // replaced, not written
  };
  std::vector<Array> args = {options_array_of<float>({2}, {1.0f, 2.0f})};
  std::vector<Array> vars = {options_array_of<float>({2}, {0.0f, 0.0f})};
  std::vector<Array> out = execute_reference(*g, args, vars, opts);
  EXPECT_EQ(seen, (std::vector<std::string>{"exp:float32:float64:1", "neg:float32:float64:1",
                                            "mul:float32:float64:2", "add:float32:float64:2"}));
  EXPECT_EQ(out[0].data<double>()[0], -10.0);
  EXPECT_EQ(out[0].data<double>()[1], -40.0);
  EXPECT_EQ(args[0].data<float>()[0], 1.0f);  // inputs untouched
}

// ScopedReferenceHook applies to the three-argument call on its thread, nests, and restores.
TEST(ReferenceOptions, ScopedHookAppliesUntilDestroyed) {
  auto g = ir::parse_graph(R"(graph @g(%x: f32[1]) -> (f32[1]) {
  %y = exp(%x) : f32[1]
  return %y
})",
                           "test");
  std::vector<Array> args = {options_array_of<float>({1}, {0.0f})}, vars;
  auto run = [&] { return execute_reference(*g, args, vars)[0].data<float>()[0]; };
  EXPECT_EQ(run(), 1.0f);
  {
    ScopedReferenceHook outer([](OpKind, const Attrs&, std::span<const Array>, Array& out, DType) {
      out = options_array_of<float>({1}, {2.0f});
    });
    EXPECT_EQ(run(), 2.0f);
    {
      ScopedReferenceHook inner([](OpKind, const Attrs&, std::span<const Array>, Array& out,
                                   DType) { out = options_array_of<float>({1}, {3.0f}); });
      EXPECT_EQ(run(), 3.0f);
    }
    EXPECT_EQ(run(), 2.0f);
  }
  EXPECT_EQ(run(), 1.0f);
}

}  // namespace
}  // namespace kiln::runtime
