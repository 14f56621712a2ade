// The op table's bf16 column, checked on every row (a new row is covered by its consistency
// case: op_rows() or kFallbackRows, tests/codegen/op_consistency_rows.h):
//   ViaF32, Convert, Bytes: on random bf16 inputs (values bf16 holds exactly), the eager result
//     is bit for bit the same op on the widened float32 inputs with each bf16 output rounded
//     to nearest even (for Bytes ops rounding changes nothing: they move values), and the
//     reference executor gives the eager bits;
//   No: infer_type refuses the bf16 case with an error naming the op and bfloat16.
// Compiled (codegen/bf16_values.h), every such row gives its float32 twin's compiled result
// rounded once, casts round once from every dtype, and fused kernels keep each op's rounding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/passes/constant_fold.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/reference_executor.h"
#include "kiln/runtime/threading.h"
#include "tests/codegen/op_consistency_rows.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// One call of an op: input types and attributes.
struct OneOp {
  std::vector<TensorType> in;
  Attrs attrs;
  double lo = -2, hi = 2;    // float inputs are drawn from [lo, hi]
  int64_t ilo = 0, ihi = 0;  // integer inputs (indices, seeds) from [ilo, ihi]
};

int64_t elements(const Case& c) {
  int64_t n = 0;
  for (const Shape& s : c.shapes) n += s.num_elements();
  return n;
}

// The op's float32 case from its consistency row (the first with a few elements), if any.
std::optional<OneOp> f32_case(const OpInfo& op) {
  for (const OpRow& row : op_rows()) {
    if (row.op != op.kind) continue;
    const Cases cases = row.cases(false);
    Case c = cases.front();
    for (const Case& k : cases)
      if (elements(k) >= 6 && elements(k) <= 4096) {
        c = k;
        break;
      }
    const bool has_f32 = std::find(row.dtypes.begin(), row.dtypes.end(), f32) != row.dtypes.end();
    OneOp one{operand_types(row, has_f32 ? f32 : row.dtypes.front(), c),
              c.attrs,
              std::max(row.lo, -4.0),
              std::min(row.hi, 4.0),
              row.ilo,
              row.ihi};
    return one;
  }
  for (const FallbackRow& f : kFallbackRows) {
    auto g = ir::parse_graph(f.ir, f.name);
    const ir::Node* n = g->nodes().back().get();
    if (n->op() != op.kind) continue;
    OneOp one;
    for (const ir::Value* v : n->inputs()) one.in.push_back(v->type());
    one.attrs = n->attrs();
    // Indices over the whole valid range (repeats included, so scatter_add sums some), seeds.
    if (op.kind == OpKind::Gather) {
      const int64_t axis = one.attrs.get_int("axis", "gather");
      one.ihi = one.in[0].shape[int(axis < 0 ? axis + one.in[0].shape.rank() : axis)] - 1;
    } else if (op.kind == OpKind::ScatterAdd) {
      one.ihi = one.attrs.get_int("dim_size", "scatter_add") - 1;
    } else {
      one.ihi = 1000;
    }
    return one;
  }
  return std::nullopt;
}

// The case with float inputs and dtype attributes (float32, or float64 where the row has
// only that) made bf16; nullopt when it has none.
std::optional<OneOp> bf16_twin(const OneOp& f) {
  OneOp b = f;
  bool any = false;
  auto floating = [](DType t) { return t == f32 || t == f64; };
  for (TensorType& t : b.in)
    if (floating(t.dtype)) t.dtype = DType::bf16, any = true;
  Attrs attrs;
  for (const auto& [name, value] : f.attrs.items()) {
    const DType* d = std::get_if<DType>(&value);
    if (d != nullptr && floating(*d)) any = true;
    attrs.set(name, d != nullptr && floating(*d) ? AttrValue(DType::bf16) : value);
  }
  b.attrs = attrs;
  if (!any) return std::nullopt;
  return b;
}

// Random inputs: bf16 values in [lo, hi] (exact in bf16), integers in [ilo, ihi] (indices,
// seeds), random bools.
std::vector<Array> inputs_for(const OneOp& c, std::mt19937& rng) {
  std::vector<Array> out;
  std::uniform_real_distribution<double> u(c.lo, c.hi);
  std::uniform_int_distribution<int64_t> k(c.ilo, c.ihi);
  for (const TensorType& t : c.in) {
    Array a = Array::zeros(t.dtype, t.shape);
    if (t.dtype == DType::bf16) {
      auto* p = static_cast<bfloat16*>(a.raw());
      for (int64_t i = 0; i < a.size(); ++i) p[i] = bfloat16::from_double(u(rng));
    } else if (t.dtype == b8) {
      for (int64_t i = 0; i < a.size(); ++i) a.data<bool>()[i] = u(rng) > (c.lo + c.hi) / 2;
    } else if (t.dtype == i32) {
      for (int64_t i = 0; i < a.size(); ++i) a.data<int32_t>()[i] = int32_t(k(rng));
    } else if (t.dtype == i64) {
      for (int64_t i = 0; i < a.size(); ++i) a.data<int64_t>()[i] = k(rng);
    }
    out.push_back(a);
  }
  return out;
}

Array widened(const Array& a) {
  if (a.dtype != DType::bf16) return a;
  Array in[1] = {a};
  return runtime::run_op(OpKind::Cast, in, {{"dtype", f32}});
}

Attrs f32_attrs(const Attrs& attrs) {
  Attrs out;
  for (const auto& [name, value] : attrs.items()) {
    const DType* d = std::get_if<DType>(&value);
    out.set(name, d != nullptr && *d == DType::bf16 ? AttrValue(f32) : value);
  }
  return out;
}

// `f` rounded to bf16 where `like` is bf16 (float32 -> bf16 nearest even), else `f` itself.
Array rounded_like(const Array& f, DType like) {
  if (like != DType::bf16) return f;
  Array out = Array::empty(DType::bf16, f.shape);
  for (int64_t i = 0; i < f.size(); ++i)
    static_cast<bfloat16*>(out.raw())[i] = bfloat16::from_float(f.data<float>()[i]);
  return out;
}

::testing::AssertionResult same_bits(const Array& got, const Array& want) {
  if (got.dtype != want.dtype || got.shape != want.shape)
    return ::testing::AssertionFailure()
           << "type " << got.type().to_string() << " vs " << want.type().to_string();
  const auto* g = static_cast<const unsigned char*>(got.raw());
  const auto* w = static_cast<const unsigned char*>(want.raw());
  const size_t es = dtype_size(got.dtype);
  for (int64_t i = 0; i < got.size(); ++i)
    if (std::memcmp(g + size_t(i) * es, w + size_t(i) * es, es) != 0) {
      uint64_t gb = 0, wb = 0;
      std::memcpy(&gb, g + size_t(i) * es, std::min<size_t>(es, 8));
      std::memcpy(&wb, w + size_t(i) * es, std::min<size_t>(es, 8));
      std::ostringstream bits;
      bits << std::hex << "0x" << gb << " vs 0x" << wb;
      return ::testing::AssertionFailure() << "element " << i << " differs: bits " << bits.str();
    }
  return ::testing::AssertionSuccess();
}

TEST(Bf16Ops, EveryRowDoesWhatItsColumnSays) {
  int checked = 0;
  for (const OpInfo& op : all_ops()) {
    SCOPED_TRACE(op.name);
    std::mt19937 rng(1234u + unsigned(op.kind));
    const std::optional<OneOp> f = f32_case(op);
    ASSERT_TRUE(f.has_value()) << op.name << " has no consistency case to check bf16 on";
    const std::optional<OneOp> b = bf16_twin(*f);
    if (op.bf16 == Bf16Rule::No) {
      OneOp refused = b ? *b : *f;
      if (!b)  // a bool-only or integer-only op: its inputs as bf16
        for (TensorType& t : refused.in) t.dtype = DType::bf16;
      try {
        infer_type(op.kind, refused.in, refused.attrs);
        ADD_FAILURE() << op.name << " accepted bfloat16";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(op.name));
        EXPECT_THAT(e.what(), HasSubstr("bfloat16"));
      }
      ++checked;
      continue;
    }
    ASSERT_TRUE(b.has_value()) << op.name << " says bf16 " << bf16_rule_word(op.bf16)
                               << " but its consistency case has no float32 to make bf16";
    const std::vector<Array> in = inputs_for(*b, rng);
    std::vector<Array> wide;
    for (const Array& a : in) wide.push_back(widened(a));
    const Array got = runtime::run_op(op.kind, in, b->attrs);
    const TensorType out_type = infer_type(op.kind, b->in, b->attrs);
    EXPECT_EQ(got.dtype, out_type.dtype);
    const Array f32_result = runtime::run_op(op.kind, wide, f32_attrs(b->attrs));
    EXPECT_TRUE(same_bits(got, rounded_like(f32_result, got.dtype)))
        << op.name << " (" << bf16_rule_word(op.bf16) << ") differs from the float32 op rounded";

    // The reference executor runs the same kernels.
    ir::Graph g(std::string("bf16_") + op.name);
    std::vector<ir::Value*> params;
    for (const TensorType& t : b->in) params.push_back(g.add_parameter(t));
    g.set_outputs({g.add_op(op.kind, params, b->attrs)->output()});
    std::vector<Array> vars;
    const std::vector<Array> ref = runtime::execute_reference(g, in, vars);
    ASSERT_EQ(ref.size(), 1u);
    EXPECT_TRUE(same_bits(ref[0], got)) << op.name << ": the reference executor differs from eager";
    ++checked;
  }
  EXPECT_EQ(checked, kNumOps);
}

TEST(Bf16Ops, TheColumnFitsTheRow) {
  for (const OpInfo& op : all_ops()) {
    if (op.dtypes == DTypeClass::Bool) {
      EXPECT_EQ(op.bf16, Bf16Rule::No) << op.name << " takes bool only";
    }
    if (op.has(kLayout)) {
      EXPECT_EQ(op.bf16, Bf16Rule::Bytes) << op.name << " moves values: it should say bytes";
    }
    if (op.bf16 == Bf16Rule::Convert) {  // kernels that round to bf16 themselves (tested here)
      EXPECT_TRUE(op.kind == OpKind::Cast || op.kind == OpKind::ElementCount) << op.name;
    }
  }
}

Array bf16_array(Shape s, std::vector<uint16_t> bits) {
  Array a = Array::empty(DType::bf16, s);
  std::memcpy(a.raw(), bits.data(), bits.size() * sizeof(uint16_t));
  return a;
}
std::vector<uint16_t> bits_of(const Array& a) {
  const auto* p = static_cast<const uint16_t*>(a.raw());
  return {p, p + a.size()};
}
Array i32_array(std::vector<int32_t> v) {
  Array a = Array::empty(i32, Shape{int64_t(v.size())});
  std::memcpy(a.raw(), v.data(), v.size() * sizeof(int32_t));
  return a;
}

// gather (bytes) picks rows by index, repeats and order included.
TEST(Bf16Ops, GatherMovesTheIndexedRows) {
  // rows [1, 2], [3, 4], [-0.5, 0.1] of a 3 x 2 bf16 matrix
  const Array params = bf16_array(Shape{3, 2}, {0x3F80, 0x4000, 0x4040, 0x4080, 0xBF00, 0x3DCD});
  Array in[2] = {params, i32_array({2, 0, 2, 1})};
  const Array got = runtime::run_op(OpKind::Gather, in, {{"axis", int64_t{0}}});
  EXPECT_EQ(bits_of(got), (std::vector<uint16_t>{0xBF00, 0x3DCD, 0x3F80, 0x4000, 0xBF00, 0x3DCD,
                                                 0x4040, 0x4080}));
  Array cols[2] = {params, i32_array({1, 1, 0})};
  EXPECT_EQ(bits_of(runtime::run_op(OpKind::Gather, cols, {{"axis", int64_t{1}}})),
            (std::vector<uint16_t>{0x4000, 0x4000, 0x3F80, 0x4080, 0x4080, 0x4040, 0x3DCD, 0x3DCD,
                                   0xBF00}));
}

// scatter_add (via-f32) sums the updates of one index in float32 and rounds the sum once: 1 +
// 2^-8 + 2^-8 is 1 + 2^-7 (0x3F81); summed in bf16 it would stay 1 (each 1 + 2^-8 a tie to
// even).
TEST(Bf16Ops, ScatterAddSumsRepeatsInFloat32AndRoundsOnce) {
  const Array updates = bf16_array(Shape{4}, {0x3F80, 0x3B80, 0x3B80, 0x4040});  // 1, 2^-8, 2^-8, 3
  Array in[2] = {updates, i32_array({2, 2, 2, 0})};
  const Array got =
      runtime::run_op(OpKind::ScatterAdd, in, {{"axis", int64_t{0}}, {"dim_size", int64_t{3}}});
  EXPECT_EQ(bits_of(got), (std::vector<uint16_t>{0x4040, 0x0000, 0x3F81}));
}

// element_count (convert) rounds its int64 count to bf16 once: 2^24 + 2^16 + 1 elements is just
// above the bf16 tie 2^24 + 2^16, so 2^24 + 2^17 (0x4B81); through float32 the count would
// first round to the tie (float32 has no odd integers above 2^24) and then to even, 2^24.
TEST(Bf16Ops, ElementCountRoundsTheCountOnce) {
  const int64_t n = (int64_t(1) << 24) + (int64_t(1) << 16) + 1;
  Array in[1] = {Array::empty(u8, Shape{n})};
  const Attrs attrs{{"axes", std::vector<int64_t>{}}, {"dtype", DType::bf16}};
  EXPECT_EQ(bits_of(runtime::run_op(OpKind::ElementCount, in, attrs)),
            (std::vector<uint16_t>{0x4B81}));
  // Constant folding computes the same count from the type alone.
  auto g = ir::parse_graph(R"(graph @f(%0: u8[16842753]) -> (bf16[]) {
  %1 = element_count(%0) {axes=[], dtype=bf16} : bf16[]
  return %1
})");
  passes::make_constant_fold()->run(*g);
  const ir::Node* c = g->outputs()[0]->producer();
  ASSERT_EQ(c->kind(), ir::NodeKind::kConstant);
  EXPECT_EQ(c->literal()->data_as<uint16_t>()[0], 0x4B81);
}

// The one-op graph of `c` (its input types and attributes).
std::unique_ptr<ir::Graph> one_op_graph(OpKind op, const std::vector<TensorType>& in,
                                        const Attrs& attrs) {
  auto g = std::make_unique<ir::Graph>(std::string("one_") + op_name(op));
  std::vector<ir::Value*> params;
  for (const TensorType& t : in) params.push_back(g->add_parameter(t));
  g->set_outputs({g->add_op(op, params, attrs)->output()});
  return g;
}

std::vector<TensorType> f32_types(const std::vector<TensorType>& in) {
  std::vector<TensorType> out = in;
  for (TensorType& t : out)
    if (t.dtype == DType::bf16) t.dtype = f32;
  return out;
}

// Compiled, every row with a bf16 case computes it as its float32 twin compiled, each bf16
// output rounded once (codegen/bf16_values.h: generated kernels widen bf16 loads, compute in
// float32 and round each bf16 result; ops codegen does not lower run their eager kernel, whose
// rule the test above checks): bit for bit, the same kernels computing the same float32 values.
TEST(Bf16Ops, CompiledRowsRoundTheirFloat32ResultOnce) {
  int checked = 0;
  for (const OpInfo& op : all_ops()) {
    if (op.bf16 == Bf16Rule::No) continue;
    SCOPED_TRACE(op.name);
    std::mt19937 rng(4321u + unsigned(op.kind));
    const std::optional<OneOp> f = f32_case(op);
    ASSERT_TRUE(f.has_value());
    const std::optional<OneOp> b = bf16_twin(*f);
    ASSERT_TRUE(b.has_value());
    const std::vector<Array> in = inputs_for(*b, rng);
    std::vector<Array> wide;
    for (const Array& a : in) wide.push_back(widened(a));
    std::vector<Array> vars;
    const auto bf16_graph = one_op_graph(op.kind, b->in, b->attrs);
    const std::vector<Array> got = codegen::compile_graph(*bf16_graph)->run(in, vars);
    const auto f32_graph = one_op_graph(op.kind, f32_types(b->in), f32_attrs(b->attrs));
    const std::vector<Array> want = codegen::compile_graph(*f32_graph)->run(wide, vars);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_TRUE(same_bits(got[0], rounded_like(want[0], got[0].dtype)))
        << op.name << ": compiled bf16 differs from the compiled float32 op rounded";
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

// A reduction that keeps the last axis (a bias gradient: a sum over the batch) runs serially
// and accumulates along contiguous rows: with a bf16 result, in a float32 buffer rounded once at
// the end (codegen KernelPlan::accumulators), so every element is bit for bit the float32
// kernel's on the widened input, rounded; and the kernel reads rows with vector loads instead
// of one strided column per element.
TEST(Bf16Ops, CompiledReductionsOverLeadingAxesRoundTheFloat32RowSumOnce) {
  std::mt19937 rng(77);
  int checked = 0;
  for (OpKind kind : {OpKind::Sum, OpKind::Mean, OpKind::Max})
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{0}, {0, 1}, {1}}) {
      SCOPED_TRACE(std::string(op_name(kind)) + " over " + std::to_string(axes.size()) +
                   " axes from " + std::to_string(axes[0]));
      const TensorType in_type{DType::bf16, Shape{33, 6, 20}};
      const Attrs attrs{{"axes", axes}, {"keepdims", false}};
      const std::vector<Array> in = inputs_for(OneOp{{in_type}, attrs}, rng);
      const std::vector<Array> wide = {widened(in[0])};
      std::vector<Array> vars;
      const std::vector<Array> got =
          codegen::compile_graph(*one_op_graph(kind, {in_type}, attrs))->run(in, vars);
      const std::vector<Array> want =
          codegen::compile_graph(*one_op_graph(kind, f32_types({in_type}), attrs))->run(wide, vars);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(same_bits(got[0], rounded_like(want[0], DType::bf16)));
      ++checked;
    }
  EXPECT_EQ(checked, 9);
  // The plan: serial, with one float32 accumulator for the bf16 sum.
  const codegen::KernelPlan plan = codegen::plan_kernel(
      *one_op_graph(OpKind::Sum, {TensorType{DType::bf16, Shape{33, 6, 20}}},
                    Attrs{{"axes", std::vector<int64_t>{0}}, {"keepdims", false}}));
  EXPECT_EQ(plan.mode, codegen::IterationMode::kSerial);
  EXPECT_EQ(plan.accumulators.size(), 1u);
}

// Casts into bf16 round once from every dtype, compiled as eagerly (ir/bfloat16.h): values
// next to bf16 ties, beyond float32's precision (float64, int64), overflow, NaN, denormals.
TEST(Bf16Ops, CompiledCastsRoundOnceFromEveryDtype) {
  auto check = [](DType from, Array x) {
    SCOPED_TRACE(dtype_name(from));
    const Attrs attrs{{"dtype", DType::bf16}};
    Array in[1] = {x};
    const Array eager = runtime::run_op(OpKind::Cast, in, attrs);
    auto g = one_op_graph(OpKind::Cast, {x.type()}, attrs);
    std::vector<Array> vars;
    const std::vector<Array> got = codegen::compile_graph(*g)->run(std::vector<Array>{x}, vars);
    EXPECT_TRUE(same_bits(got[0], eager));
  };
  const double tie = 1.0 + std::ldexp(1.0, -8);  // halfway between 1 and the next bf16
  std::vector<double> d = {tie,
                           std::nextafter(tie, 2.0),
                           std::nextafter(tie, 0.0),
                           -(tie + std::ldexp(1.0, -40)),  // above the tie beyond float32
                           1.0 + std::ldexp(1.0, -7) + std::ldexp(1.0, -8),  // tie, odd: up
                           3.3961e38,                                        // above bf16 max
                           -1e300,
                           std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(),
                           1e-40,  // float32 denormal
                           -1e-45,
                           0.0,
                           -0.0};
  Array f64s = Array::empty(f64, Shape{int64_t(d.size())});
  std::memcpy(f64s.raw(), d.data(), d.size() * sizeof(double));
  check(f64, f64s);
  Array f32s = Array::empty(f32, Shape{int64_t(d.size())});
  for (size_t i = 0; i < d.size(); ++i) f32s.data<float>()[i] = float(d[i]);
  check(f32, f32s);
  const int64_t big = (int64_t(1) << 24) + (int64_t(1) << 16);  // a bf16 tie
  std::vector<int64_t> ints = {big,
                               big + 1,
                               -(big + 1),
                               (int64_t(1) << 62) + (int64_t(1) << 54) + 1,
                               std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max(),
                               0,
                               -3,
                               255,
                               257};
  Array i64s = Array::empty(i64, Shape{int64_t(ints.size())});
  std::memcpy(i64s.raw(), ints.data(), ints.size() * sizeof(int64_t));
  check(i64, i64s);
  Array i32s = Array::empty(i32, Shape{int64_t(ints.size())});
  for (size_t i = 0; i < ints.size(); ++i)
    i32s.data<int32_t>()[i] = int32_t(std::clamp<int64_t>(ints[i], INT32_MIN, INT32_MAX));
  check(i32, i32s);
}

// A fused bf16 group keeps each op's rounding: the optimized graph (ops fused into kernels,
// intermediate values in registers) gives the bits of the same graph compiled op by op (each
// result stored to memory as bf16), softmax included (computed in float32 and rounded once).
TEST(Bf16Ops, FusedKernelsRoundEachValueAsUnfusedOnes) {
  const char* text = R"(graph @chain(%x: bf16[16,40], %w: bf16[40]) -> (bf16[16,40], bf16[16]) {
  %1 = mul(%x, %w) : bf16[16,40]
  %2 = tanh(%1) : bf16[16,40]
  %3 = add(%2, %x) : bf16[16,40]
  %4 = exp(%3) : bf16[16,40]
  %5 = softmax(%4) {axis=-1} : bf16[16,40]
  %6 = sum(%4) {axes=[1], keepdims=false} : bf16[16]
  %7 = sqrt(%6) : bf16[16]
  return %5, %7
})";
  auto unfused = ir::parse_graph(text);
  auto fused = ir::parse_graph(text);
  passes::optimize_pipeline({}).run(*fused);
  bool has_fusion = false;
  for (const auto& n : fused->nodes()) has_fusion |= n->kind() == ir::NodeKind::kFusion;
  ASSERT_TRUE(has_fusion) << ir::print_graph(*fused);
  std::mt19937 rng(7);
  OneOp c{{{DType::bf16, Shape{16, 40}}, {DType::bf16, Shape{40}}}, {}, -1.5, 1.5};
  const std::vector<Array> in = inputs_for(c, rng);
  std::vector<Array> vars;
  const std::vector<Array> want = codegen::compile_graph(*unfused)->run(in, vars);
  const std::vector<Array> got = codegen::compile_graph(*fused)->run(in, vars);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i << "\n" << ir::print_graph(*fused);
}

// A bf16 product with a fused epilogue (bias, relu) runs blocked: the product rows in float32,
// each block rounded to bf16 right before its epilogue rows (runtime/executable.cc). The bits
// must be those of the reference executor's op-by-op run, on one thread and on several (the
// product then comes in several row blocks).
TEST(Bf16Ops, ProductEpiloguesSeeTheProductRoundedOnce) {
  const char* text =
      R"(graph @dense(%x: bf16[192,96], %w: bf16[96,80], %b: bf16[80]) -> (bf16[192,80]) {
  %1 = matmul(%x, %w) {transpose_a=false, transpose_b=false} : bf16[192,80]
  %2 = add(%1, %b) : bf16[192,80]
  %3 = relu(%2) : bf16[192,80]
  return %3
})";
  auto g = ir::parse_graph(text);
  passes::optimize_pipeline({}).run(*g);
  std::mt19937 rng(11);
  OneOp c{{{DType::bf16, Shape{192, 96}}, {DType::bf16, Shape{96, 80}}, {DType::bf16, Shape{80}}},
          {},
          -1.5,
          1.5};
  const std::vector<Array> in = inputs_for(c, rng);
  std::vector<Array> vars;
  const std::vector<Array> want = runtime::execute_reference(*ir::parse_graph(text), in, vars);
  const int threads = num_threads();
  for (int t : {1, 2, 4}) {
    set_num_threads(t);
    const std::vector<Array> got = codegen::compile_graph(*g)->run(in, vars);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(same_bits(got[0], want[0])) << t << " threads\n" << ir::print_graph(*g);
  }
  set_num_threads(threads);
}

// Ops that pick or negate their bf16 operands (max, min, relu, neg, abs, sign, max-pool) skip
// the rounding of their exact float32 result in a fused kernel and only quiet a NaN
// (codegen/bf16_values.h, quiet_bf16_nan): the bits stay the eager ones, signaling NaNs (quieted
// by the eager rounding, then widened by a fused cast that does not quiet them), -0, infinities
// and denormals included. The optimized graph (each op fused with its cast) against the
// reference executor.
TEST(Bf16Ops, FusedExactOpsQuietNaNsAsTheRoundingDoes) {
  const char* text =
      R"(graph @exact(%x: bf16[2,4,4,2], %y: bf16[2,4,4,2]) -> (f32[2,4,4,2], f32[2,4,4,2], f32[2,4,4,2], f32[2,4,4,2], f32[2,4,4,2], f32[2,4,4,2], f32[2,2,2,2]) {
  %1 = relu(%x) : bf16[2,4,4,2]
  %2 = cast(%1) {dtype=f32} : f32[2,4,4,2]
  %3 = neg(%y) : bf16[2,4,4,2]
  %4 = cast(%3) {dtype=f32} : f32[2,4,4,2]
  %5 = abs(%x) : bf16[2,4,4,2]
  %6 = cast(%5) {dtype=f32} : f32[2,4,4,2]
  %7 = maximum(%x, %y) : bf16[2,4,4,2]
  %8 = cast(%7) {dtype=f32} : f32[2,4,4,2]
  %9 = minimum(%x, %y) : bf16[2,4,4,2]
  %10 = cast(%9) {dtype=f32} : f32[2,4,4,2]
  %11 = sign(%x) : bf16[2,4,4,2]
  %12 = cast(%11) {dtype=f32} : f32[2,4,4,2]
  %13 = max_pool2d(%x) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : bf16[2,2,2,2]
  %14 = cast(%13) {dtype=f32} : f32[2,2,2,2]
  return %2, %4, %6, %8, %10, %12, %14
})";
  // Signaling NaNs of either sign (payloads 1 and 5), quiet ones, +-0, +-inf, denormals, values.
  const std::vector<uint16_t> special = {0x7F81, 0xFF85, 0x7FC3, 0xFFC0, 0x0000, 0x8000,
                                         0x7F80, 0xFF80, 0x0001, 0x8003, 0x3F80, 0xBFC0,
                                         0x4049, 0xC2F7, 0x0080, 0x3C00};
  // y holds no NaN: which of two NaNs maximum / minimum return is the kernels' own choice, and
  // the sign of neg(NaN) is the eager kernel's (x * -1: the build decides, neg_kernel).
  const std::vector<uint16_t> numbers(special.begin() + 4, special.end());
  std::vector<uint16_t> xs(64), ys(64);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = special[i % special.size()];
    ys[i] = numbers[(i * 7 + 3) % numbers.size()];
  }
  const std::vector<Array> in = {bf16_array(Shape{2, 4, 4, 2}, xs),
                                 bf16_array(Shape{2, 4, 4, 2}, ys)};
  auto g = ir::parse_graph(text);
  passes::optimize_pipeline({}).run(*g);
  bool has_fusion = false;
  for (const auto& n : g->nodes()) has_fusion |= n->kind() == ir::NodeKind::kFusion;
  ASSERT_TRUE(has_fusion) << ir::print_graph(*g);
  std::vector<Array> vars;
  const std::vector<Array> want = runtime::execute_reference(*ir::parse_graph(text), in, vars);
  const std::vector<Array> got = codegen::compile_graph(*g)->run(in, vars);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i << "\n" << ir::print_graph(*g);
}

}  // namespace
}  // namespace kiln
