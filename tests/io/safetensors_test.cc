// safetensors: round trips, the exact byte layout, and every malformed-file rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/keras/io/safetensors.h"
#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

using ::kiln::test::error_of;

// A file from a raw JSON header and data, with the header length prefix.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(Safetensors, RoundTripAllDtypes) {
  NamedTensors in = {{"a", tensor<float>({1.5f, -2, 3, 4}, {2, 2})},
                     {"b", tensor<double>({0.25})},
                     {"c", tensor<int32_t>({1, 2, 3})},
                     {"d", scalar(-9, DType::i64)},
                     {"e", tensor<bool>({true, false})},
                     {"f", tensor<uint8_t>({255, 0, 7})},
                     {"empty", zeros({0, 3})}};
  std::map<std::string, std::string> meta;
  NamedTensors out = decode_safetensors(encode_safetensors(in, {{"k", "v"}}), "mem", &meta);
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(meta.at("k"), "v");
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.type(), in[i].second.type()) << in[i].first;
    EXPECT_EQ(out[i].second.to_vector<double>(), in[i].second.to_vector<double>());
  }
}

TEST(Safetensors, LayoutFollowsTheFormat) {
  std::string bytes = encode_safetensors({{"w", tensor<float>({1, 2})}});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"), 0u)
      << header;
  EXPECT_EQ(header.find_last_not_of(' ') + 1, header.find('}', header.rfind('}')) + 1);
  EXPECT_EQ(bytes.size(), 8 + n + 8);
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, 1.0f);
}

TEST(Safetensors, FileRoundTripIsAtomic) {
  auto path = (std::filesystem::temp_directory_path() / "kiln_st_test.safetensors").string();
  save_safetensors(path, {{"x", ones({3})}});
  save_safetensors(path, {{"x", full({3}, 2)}});  // overwrite the file
  NamedTensors t = load_safetensors(path);
  EXPECT_EQ(t[0].second.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    EXPECT_EQ(e.path().string().find("kiln_st_test.safetensors.tmp"), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_THAT(error_of([&] { load_safetensors(path); }), HasSubstr("cannot open"));
}

TEST(Safetensors, RejectsMalformedFiles) {
  std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string data(8, '\0');
  EXPECT_NO_THROW(decode_safetensors(file_of(ok_header, data), "f"));

  EXPECT_THAT(error_of([] { decode_safetensors("abc", "f"); }),
              HasSubstr("fewer than the 8-byte header length"));
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32 bytes
  EXPECT_THAT(error_of([&] { decode_safetensors(huge, "f"); }), HasSubstr("exceeds the limit"));
  std::string truncated_header = file_of(ok_header, data).substr(0, 20);
  EXPECT_THAT(error_of([&] { decode_safetensors(truncated_header, "f"); }),
              HasSubstr("runs past the end of the file"));
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of(ok_header, data.substr(0, 4)), "f"); }),
              HasSubstr("truncated"));
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of("[1,2]", ""), "f"); }),
              HasSubstr("does not start with '{'"));
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of("{\"a\":", ""), "f"); }),
              HasSubstr("not a valid JSON object"));
  EXPECT_THAT(error_of([&] {
                decode_safetensors(
                    file_of(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})",
                            std::string(4, '\0')),
                    "f");
              }),
              HasSubstr("dtype \"F16\", which kiln does not read"));
  EXPECT_THAT(error_of([&] {
                decode_safetensors(
                    file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
                    "f");
              }),
              HasSubstr("has 8 bytes, but float32 (3,) needs 12"));
  std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of(overlap, std::string(12, '\0')), "f"); }),
              HasSubstr("starts at byte 4, but the previous tensor ends at 8"));
  std::string gap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of(gap, std::string(12, '\0')), "f"); }),
              HasSubstr("starts at byte 4"));
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of(ok_header, std::string(12, '\0')), "f"); }),
              HasSubstr("the data section has 12 bytes, but the tensors cover 8"));
  std::string dup = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of(dup, data), "f"); }),
              HasSubstr("tensor \"a\" appears twice"));
  EXPECT_THAT(error_of([&] {
                decode_safetensors(
                    file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
                    "f");
              }),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(error_of([&] {
                decode_safetensors(file_of(R"({"a":{"dtype":"F32","shape":[2]}})", data), "f");
              }),
              HasSubstr("has no \"data_offsets\""));
  EXPECT_THAT(error_of([&] {
                decode_safetensors(
                    file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data),
                    "f");
              }),
              HasSubstr("end before they begin"));
  EXPECT_THAT(
      error_of([&] { decode_safetensors(file_of(R"({"__metadata__":{"k":1}})", ""), "f"); }),
      HasSubstr("__metadata__ value of \"k\" is not a string"));
  EXPECT_THAT(error_of([&] {
                encode_safetensors({{"a", ones({1})}, {"a", ones({1})}});
              }),
              HasSubstr("used twice"));
}

TEST(Safetensors, ElementCountAndNestingLimits) {
  // 2^32 * 2^32 elements wrapped to 0 bytes, which matched data_offsets [0, 0].
  EXPECT_THAT(
      error_of([&] {
        decode_safetensors(
            file_of(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                    ""),
            "w.safetensors");
      }),
      HasSubstr("w.safetensors: entry \"w\": shape (4294967296, 4294967296) has more elements "
                "than int64 can count"));
  EXPECT_THAT(
      error_of([&] {
        decode_safetensors(
            file_of(R"({"w":{"dtype":"U8","shape":[2199023255552],"data_offsets":[0,0]}})", ""),
            "f");
      }),
      HasSubstr("has 2199023255552 elements, more than the limit of 1099511627776"));
  EXPECT_THAT(
      error_of([&] {
        decode_safetensors(
            file_of(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})",
                    ""),
            "f");
      }),
      HasSubstr("entry \"w\": shape [18446744073709551615] has the dimension "
                "18446744073709551615, more than int64 holds"));
  // Empty, but the other dimensions multiply past int64 (strides would overflow).
  EXPECT_THAT(
      error_of([&] {
        decode_safetensors(
            file_of(
                R"({"w":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})",
                ""),
            "f");
      }),
      HasSubstr("shape (0, 4294967296, 4294967296) has more elements than int64 can count"));
  // A million nested arrays: refused while parsing (the error message's dump() of the shape
  // recursed once per level and overflowed the stack).
  std::string deep = R"({"w":{"dtype":"U8","data_offsets":[0,0],"shape":)" +
                     std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}}";
  EXPECT_THAT(error_of([&] { decode_safetensors(file_of(deep, ""), "f"); }),
              HasSubstr("f: invalid safetensors file: the header nests JSON objects and arrays "
                        "deeper than 16 levels"));
}

}  // namespace
}  // namespace kiln
