// bfloat16 as a dtype: the conversions of ir/bfloat16.h against hand-computed bit patterns and
// all 65536 patterns, the dtype's names and size, visit_dtype's refusal, the op table's bf16
// column in infer_type, bf16 constants in IR text (print -> parse gives the same bits), and
// cast to and from every dtype against hand values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/dtype.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/literal.h"
#include "kiln/ir/op_table.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/kernels.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

uint16_t rf(uint32_t float_bits) {
  return bfloat16::from_float(std::bit_cast<float>(float_bits)).bits;
}

TEST(Bfloat16, RoundsFloatToNearestEven) {
  EXPECT_EQ(bfloat16::from_float(1.0f).bits, 0x3F80);
  EXPECT_EQ(bfloat16::from_float(-2.0f).bits, 0xC000);
  EXPECT_EQ(rf(0x3F808000), 0x3F80);  // 1 + 2^-8: a tie, to the even 0x3F80
  EXPECT_EQ(rf(0x3F818000), 0x3F82);  // a tie, to the even 0x3F82
  EXPECT_EQ(rf(0x3F808001), 0x3F81);  // just above the tie
  EXPECT_EQ(rf(0x3F817FFF), 0x3F81);  // just below the tie
  EXPECT_EQ(rf(0xBF808000), 0xBF80);  // negative tie
  EXPECT_EQ(rf(0x7F7F7FFF), 0x7F7F);  // below the overflow tie: the largest finite bf16
  EXPECT_EQ(rf(0x7F7F8000), 0x7F80);  // the overflow tie rounds to inf (0x7F7F is odd)
  EXPECT_EQ(rf(0x7F7FFFFF), 0x7F80);  // FLT_MAX overflows to inf
  EXPECT_EQ(rf(0xFF7FFFFF), 0xFF80);
  EXPECT_EQ(rf(0x7F800000), 0x7F80);  // inf stays inf
  EXPECT_EQ(rf(0x80000000), 0x8000);  // -0.0 keeps its sign
  EXPECT_EQ(rf(0x00010000), 0x0001);  // the smallest denormal, exact
  EXPECT_EQ(rf(0x00008000), 0x0000);  // half of it: a tie, to even zero
  EXPECT_EQ(rf(0x00008001), 0x0001);
  EXPECT_EQ(rf(0x00018000), 0x0002);  // a denormal tie, to even
  EXPECT_EQ(rf(0x80008000), 0x8000);
  EXPECT_EQ(rf(0x007FFFFF), 0x0080);  // the largest float denormal rounds up to a normal
}

TEST(Bfloat16, NanStaysAQuietNanWithItsSign) {
  EXPECT_EQ(rf(0x7FC00000), 0x7FC0);
  EXPECT_EQ(rf(0xFFC00001), 0xFFC0);
  EXPECT_EQ(rf(0x7F800001), 0x7FC0);  // a signalling NaN whose payload is all below bit 16
  EXPECT_EQ(rf(0xFF800001), 0xFFC0);
  EXPECT_EQ(rf(0x7FFFFFFF), 0x7FFF);  // never rounded up into the sign bit
  EXPECT_EQ(rf(0x7FA00000), 0x7FE0);
  EXPECT_EQ(bfloat16::from_double(-std::numeric_limits<double>::quiet_NaN()).bits, 0xFFC0);
  EXPECT_EQ(bfloat16::from_double(std::numeric_limits<double>::quiet_NaN()).bits, 0x7FC0);
}

TEST(Bfloat16, FromDoubleRoundsOnce) {
  // 1 + 2^-8 + 2^-30 rounds to the float 1 + 2^-8, a bf16 tie that goes to even (0x3F80);
  // the double itself is above the tie: 0x3F81.
  const double above = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(bfloat16::from_float(float(above)).bits, 0x3F80);  // the double rounding
  EXPECT_EQ(bfloat16::from_double(above).bits, 0x3F81);
  // 1 + 3 * 2^-8 - 2^-30: the float is the tie 0x3F81 / 0x3F82 (to even 0x3F82); the double is
  // below it: 0x3F81.
  const double below = 1.0 + 3 * std::ldexp(1.0, -8) - std::ldexp(1.0, -30);
  EXPECT_EQ(bfloat16::from_float(float(below)).bits, 0x3F82);
  EXPECT_EQ(bfloat16::from_double(below).bits, 0x3F81);
  // Exact ties in double still go to even.
  EXPECT_EQ(bfloat16::from_double(1.0 + std::ldexp(1.0, -8)).bits, 0x3F80);
  EXPECT_EQ(bfloat16::from_double(1.0 + 3 * std::ldexp(1.0, -8)).bits, 0x3F82);
  // Beyond float32's range: inf; tiny: a signed zero; a denormal tie above float's denormals.
  EXPECT_EQ(bfloat16::from_double(1e300).bits, 0x7F80);
  EXPECT_EQ(bfloat16::from_double(-1e300).bits, 0xFF80);
  EXPECT_EQ(bfloat16::from_double(1e-300).bits, 0x0000);
  EXPECT_EQ(bfloat16::from_double(-1e-300).bits, 0x8000);
  const double half_min = std::ldexp(1.0, -134);  // half of bf16's smallest denormal 2^-133
  EXPECT_EQ(bfloat16::from_double(half_min).bits, 0x0000);
  EXPECT_EQ(bfloat16::from_double(half_min * (1 + std::ldexp(1.0, -40))).bits, 0x0001);
  // Between the largest finite bf16 and the overflow tie: the largest finite.
  EXPECT_EQ(bfloat16::from_double(std::ldexp(255.0, 120) + std::ldexp(1.0, 118)).bits, 0x7F7F);
  EXPECT_EQ(bfloat16::from_double(std::ldexp(511.0, 119)).bits, 0x7F80);  // the tie: inf
}

TEST(Bfloat16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const bfloat16 v = bfloat16::from_bits(uint16_t(b));
    const float f = v.to_float();
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16) << b;  // exact widening
    const uint16_t expect = std::isnan(f) ? uint16_t(b | 0x0040) : uint16_t(b);
    ASSERT_EQ(bfloat16::from_float(f).bits, expect) << b;
    // from_double: a NaN becomes the quiet NaN of its sign (no payload)
    const uint16_t expect_d = std::isnan(f) ? uint16_t((b & 0x8000) | 0x7FC0) : uint16_t(b);
    ASSERT_EQ(bfloat16::from_double(double(f)).bits, expect_d) << b;
  }
}

TEST(Bfloat16, IsADType) {
  EXPECT_EQ(dtype_name(DType::bf16), "bfloat16");
  EXPECT_EQ(dtype_short_name(DType::bf16), "bf16");
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_FALSE(is_integer(DType::bf16));
  EXPECT_EQ(dtype_of<bfloat16>(), DType::bf16);
  EXPECT_EQ(kAllDTypes[std::size(kAllDTypes) - 1], DType::bf16);
  try {
    visit_dtype(DType::bf16, [](auto) {});
    FAIL() << "visit_dtype visited bfloat16";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bfloat16"));
  }
}

// Every row saying No refuses bf16 in infer_type, naming the op and bfloat16.
TEST(Bfloat16, NoRowsRefuseInTheVerifier) {
  int refused = 0;
  for (const OpInfo& op : all_ops()) {
    if (op.bf16 != Bf16Rule::No) continue;
    std::vector<TensorType> in;
    Attrs attrs;
    if (op.has(kRandom)) {
      in.push_back({DType::i64, Shape{}});
      attrs = {{"shape", std::vector<int64_t>{2}}, {"dtype", DType::bf16}};
      if (op.kind == OpKind::RandomInt)
        attrs.set("minval", int64_t(0)).set("maxval", int64_t(3));
      else
        attrs.set("minval", 0.0).set("maxval", 1.0);
    } else {
      for (int i = 0; i < std::max(op.arity, 1); ++i) in.push_back({DType::bf16, Shape{3}});
    }
    try {
      infer_type(op.kind, in, attrs);
      ADD_FAILURE() << op.name << " accepted bfloat16";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(op.name));
      EXPECT_THAT(e.what(), HasSubstr("bfloat16"));
    }
    ++refused;
  }
  EXPECT_GT(refused, 0);
}

ir::Node* bf16_constant(ir::Graph& g, Shape s, std::vector<uint16_t> bits) {
  return g.add_constant(ir::Literal::copy_of({DType::bf16, std::move(s)}, bits.data()));
}

TEST(Bfloat16, IrConstantsPrintAndParseToTheSameBits) {
  ir::Graph g("bf16_constants");
  std::vector<uint16_t> all;
  for (uint32_t b = 0; b < 65536; ++b)
    if (!std::isnan(bfloat16::from_bits(uint16_t(b)).to_float())) all.push_back(uint16_t(b));
  std::vector<ir::Value*> out;
  out.push_back(bf16_constant(g, Shape{int64_t(all.size())}, all)->output());
  out.push_back(bf16_constant(g, Shape{4}, {0x3F80, 0x3DCD, 0x7F80, 0x7FC0})->output());
  ir::Value* x = g.add_parameter({DType::bf16, Shape{4}});
  out.push_back(g.add_op(OpKind::Add, {x, out.back()}, {})->output());
  g.set_outputs(out);
  const std::string text = ir::print_graph(g);
  EXPECT_THAT(text, HasSubstr("dense<[1.0, 0.1, inf, nan]> : bf16[4]"));
  EXPECT_THAT(text, HasSubstr("(%0: bf16[4])"));
  auto back = ir::parse_graph(text);
  EXPECT_EQ(ir::print_graph(*back), text);
  const ir::Literal& lit = *back->nodes()[0]->literal();
  ASSERT_EQ(lit.type().dtype, DType::bf16);
  ASSERT_EQ(lit.num_elements(), int64_t(all.size()));
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(lit.data_as<uint16_t>()[i], all[i]) << i;
  EXPECT_EQ(ir::format_bf16(bfloat16::from_bits(0x3DCD)), "0.1");
  EXPECT_EQ(ir::format_bf16(bfloat16::from_bits(0x8000)), "-0.0");
}

TEST(Bfloat16, IrLiteralOutOfRangeIsAnError) {
  const char* text = R"(graph @f() -> (bf16[]) {
  %0 = constant dense<3.4e38> : bf16[]
  return %0
})";
  try {
    ir::parse_graph(text);
    FAIL() << "parsed a bf16 literal beyond the largest bf16";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("out of range of bf16"));
  }
}

// ---- cast to and from every dtype

runtime::Array array_of(DType t, const std::vector<double>& values) {
  runtime::Array a = runtime::Array::empty(t, Shape{int64_t(values.size())});
  visit_storage(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < values.size(); ++i)
      static_cast<T*>(a.raw())[i] = storage_from_double<T>(values[i]);
  });
  return a;
}

std::vector<uint16_t> bits_of(const runtime::Array& a) {
  const auto* p = static_cast<const uint16_t*>(a.raw());
  return {p, p + a.size()};
}

runtime::Array cast_to(const runtime::Array& x, DType t) {
  runtime::Array in[1] = {x};
  return runtime::run_op(OpKind::Cast, in, {{"dtype", t}});
}

TEST(Bfloat16, CastToBf16RoundsOnceFromEveryDType) {
  using V = std::vector<uint16_t>;
  // float32: nearest even (the 1 + 2^-8 tie to 0x3F80; 1 + 2^-7 + 2^-8 to 0x3F82).
  runtime::Array f = runtime::Array::empty(DType::f32, Shape{3});
  f.data<float>()[0] = std::bit_cast<float>(0x3F808000u);
  f.data<float>()[1] = std::bit_cast<float>(0x3F818000u);
  f.data<float>()[2] = -0.0f;
  EXPECT_EQ(bits_of(cast_to(f, DType::bf16)), (V{0x3F80, 0x3F82, 0x8000}));
  // float64: once, not through float32 (see FromDoubleRoundsOnce).
  const double above = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(bits_of(cast_to(array_of(DType::f64, {above, 0.1}), DType::bf16)), (V{0x3F81, 0x3DCD}));
  // int32: 257 is a tie between 256 and 258 (to even 256), 259 rounds to 260, 2^31 - 1 to 2^31.
  EXPECT_EQ(bits_of(cast_to(array_of(DType::i32, {257, 259, -3, 2147483647}), DType::bf16)),
            (V{0x4380, 0x4382, 0xC040, 0x4F00}));
  // int64: 2^62 + 2^54 is a tie (to even 2^62); + 1 makes it above the tie (through double the
  // + 1 would be lost and the tie would go to even).
  runtime::Array big = runtime::Array::empty(DType::i64, Shape{3});
  big.data<int64_t>()[0] = (int64_t(1) << 62) + (int64_t(1) << 54);
  big.data<int64_t>()[1] = (int64_t(1) << 62) + (int64_t(1) << 54) + 1;
  big.data<int64_t>()[2] = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(bits_of(cast_to(big, DType::bf16)), (V{0x5E80, 0x5E81, 0xDF00}));
  EXPECT_EQ(bits_of(cast_to(array_of(DType::u8, {0, 255}), DType::bf16)), (V{0x0000, 0x437F}));
  EXPECT_EQ(bits_of(cast_to(array_of(DType::b8, {1, 0}), DType::bf16)), (V{0x3F80, 0x0000}));
  EXPECT_EQ(bits_of(cast_to(array_of(DType::bf16, {0.5}), DType::bf16)), (V{0x3F00}));
}

TEST(Bfloat16, CastFromBf16IsTheExactValueCastAsFloat32Casts) {
  runtime::Array x = runtime::Array::empty(DType::bf16, Shape{5});
  const uint16_t bits[] = {0x3FC0 /* 1.5 */, 0xC020 /* -2.5 */, 0x8000 /* -0.0 */,
                           0x4F00 /* 2^31 */, 0x3DCD /* 0.10009765625 */};
  std::memcpy(x.raw(), bits, sizeof bits);
  runtime::Array f = cast_to(x, DType::f32);
  EXPECT_EQ(f.data<float>()[4], 0.10009765625f);
  EXPECT_EQ(std::bit_cast<uint32_t>(f.data<float>()[2]), 0x80000000u);
  runtime::Array d = cast_to(x, DType::f64);
  EXPECT_EQ(d.data<double>()[3], 2147483648.0);
  EXPECT_EQ(d.data<double>()[4], 0.10009765625);
  runtime::Array i = cast_to(x, DType::i64);  // truncation, as float32 -> int64
  EXPECT_EQ(i.data<int64_t>()[0], 1);
  EXPECT_EQ(i.data<int64_t>()[1], -2);
  EXPECT_EQ(i.data<int64_t>()[3], int64_t(1) << 31);
  runtime::Array b = cast_to(x, DType::b8);  // nonzero
  EXPECT_EQ(std::vector<bool>(b.data<bool>(), b.data<bool>() + 5),
            (std::vector<bool>{true, true, false, true, true}));
  runtime::Array small = runtime::Array::empty(DType::bf16, Shape{2});  // in range of u8, i32
  const uint16_t small_bits[] = {0x3FC0 /* 1.5 */, 0x4030 /* 2.75 */};
  std::memcpy(small.raw(), small_bits, sizeof small_bits);
  runtime::Array u = cast_to(small, DType::u8);
  EXPECT_EQ(u.data<uint8_t>()[0], 1);
  EXPECT_EQ(u.data<uint8_t>()[1], 2);
  runtime::Array i32 = cast_to(small, DType::i32);
  EXPECT_EQ(i32.data<int32_t>()[1], 2);
}

}  // namespace
}  // namespace kiln
