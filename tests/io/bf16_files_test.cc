// bfloat16 tensors through the frontend and the files: creation from float values, values read
// back as float, printing, safetensors BF16 (written and read bit for bit, and a file made by
// hand), .npy (saved as float32, exact; a raw 2-byte descr refused), HDF5 (refused), and
// kiln::function running a bf16 graph compiled and on the reference executor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>

#include "kiln/keras/io/npy.h"
#include "kiln/keras/io/safetensors.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::vector<uint16_t> bits(const Tensor& t) {
  const auto* p = static_cast<const uint16_t*>(t.array().raw());
  return {p, p + t.size()};
}

TEST(Bf16Tensors, CreatedFromFloatValuesAndReadBackAsFloat) {
  Tensor t = tensor({1.0, 0.1, -2.5, 1.0 + std::ldexp(1.0, -8)}, Shape{2, 2}, DType::bf16);
  EXPECT_EQ(t.dtype(), DType::bf16);
  EXPECT_EQ(bits(t), (std::vector<uint16_t>{0x3F80, 0x3DCD, 0xC020, 0x3F80}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.0f, 0.10009765625f, -2.5f, 1.0f}));
  EXPECT_EQ(bits(full(Shape{2}, 0.1, DType::bf16)), (std::vector<uint16_t>{0x3DCD, 0x3DCD}));
  EXPECT_EQ(cast(t, DType::f32).to_vector<float>(), t.to_vector<float>());
  EXPECT_EQ(bits(cast(tensor(std::vector<float>{0.1f}), DType::bf16)),
            (std::vector<uint16_t>{0x3DCD}));
  std::ostringstream printed;
  printed << tensor({0.5, -1.5}, Shape{2}, DType::bf16);
  EXPECT_THAT(printed.str(), HasSubstr("0.5"));
  EXPECT_THAT(printed.str(), HasSubstr("-1.5"));
  // ViaF32 arithmetic: 1 + 2^-8 in float32, rounded once to bf16 (a tie: to even 1.0).
  Tensor one = full(Shape{}, 1.0, DType::bf16),
         tiny = full(Shape{}, std::ldexp(1.0, -8), DType::bf16);
  EXPECT_EQ(bits(one + tiny), (std::vector<uint16_t>{0x3F80}));
  EXPECT_EQ(random_normal(Shape{3}, 7, 0, 1, DType::bf16).dtype(), DType::bf16);
  try {
    random_uniform(Shape{3}, 7, 0, 1, DType::bf16);
    FAIL() << "random_uniform made bfloat16";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("random_uniform"));
    EXPECT_THAT(e.what(), HasSubstr("bfloat16"));
  }
}

// dropout on bf16 draws its mask in float32 (random_uniform refuses bf16): the float32 run's
// zeros, and elsewhere x * (1 / (1 - rate)) in bf16.
TEST(Bf16Tensors, DropoutDrawsItsMaskInFloat32) {
  Tensor x = full(Shape{64}, 1.5, DType::bf16);
  Tensor y = dropout(x, 0.3, 11);
  EXPECT_EQ(y.dtype(), DType::bf16);
  const std::vector<float> f32 =
      dropout(full(Shape{64}, 1.5, DType::f32), 0.3, 11).to_vector<float>();
  const float scaled = (x * (1.0 / 0.7)).to_vector<float>()[0];
  const std::vector<float> got = y.to_vector<float>();
  int zeros = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], f32[i] == 0 ? 0.0f : scaled) << i;
    zeros += got[i] == 0;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 64);
}

TEST(Bf16Files, SafetensorsWritesAndReadsBf16BitForBit) {
  Tensor t = tensor({1.0, -0.0, 3.0e38, 1e-40, 0.1, -7.0}, Shape{2, 3}, DType::bf16);
  NamedTensors back = decode_safetensors(encode_safetensors({{"w", t}}), "mem");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].second.dtype(), DType::bf16);
  EXPECT_EQ(back[0].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(bits(back[0].second), bits(t));
  EXPECT_THAT(encode_safetensors({{"w", t}}), HasSubstr("\"BF16\""));
}

TEST(Bf16Files, SafetensorsReadsAHandMadeBf16File) {
  const std::string header = R"({"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);  // little-endian host
  file += header;
  const unsigned char data[] = {0x80, 0x3F, 0x00, 0xC0, 0xC0, 0x7F};  // 1.0, -2.0, NaN
  file.append(reinterpret_cast<const char*>(data), sizeof data);
  NamedTensors t = decode_safetensors(file, "hand");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].second.dtype(), DType::bf16);
  EXPECT_EQ(bits(t[0].second), (std::vector<uint16_t>{0x3F80, 0xC000, 0x7FC0}));
}

TEST(Bf16Files, NpySavesFloat32AndRefusesRawTwoByteData) {
  Tensor t = tensor({1.0, 0.1, -3.0e38}, Shape{3}, DType::bf16);
  Tensor back = decode_npy(encode_npy(t), "mem");
  EXPECT_EQ(back.dtype(), DType::f32);
  EXPECT_EQ(back.to_vector<float>(), t.to_vector<float>());
  std::string bytes = encode_npy(t);
  const size_t at = bytes.find("<f4");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 3, "|V2");
  try {
    decode_npy(bytes, "v2.npy");
    FAIL() << "read |V2";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("|V2"));
    EXPECT_THAT(e.what(), HasSubstr("bfloat16"));
  }
}

// A bf16 function gives the eager bits compiled and on the reference executor (kiln_tests'
// default mode): its ops round exactly in float32, and each bf16 result is rounded before the
// next op reads it (so no multiply and add contract into one fma).
TEST(Bf16Files, FunctionRunsBf16GraphsCompiledAndOnTheReferenceExecutor) {
  const Tensor x = tensor({1.5, 0.1, -3.0, 7.0, 0.3, -0.7}, Shape{2, 3}, DType::bf16);
  auto body = [](const Tensor& a) { return (a * a + a) / (a * a + 1.0); };
  const Tensor want = body(x);
  for (ExecutionMode mode : {ExecutionMode::kCompiled, ExecutionMode::kReference}) {
    auto f = kiln::function(body, {.name = "bf16_body", .mode = mode});
    const Tensor y = f(x);
    EXPECT_EQ(y.dtype(), DType::bf16);
    EXPECT_EQ(bits(y), bits(want));
  }
}

}  // namespace
}  // namespace kiln
