// .npy: round trips for every dtype and rank, the header layout, and malformed files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/keras/io/npy.h"
#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

using ::kiln::test::error_of;

TEST(Npy, RoundTrips) {
  std::vector<Tensor> cases = {scalar(3.5, DType::f64),
                               tensor<float>({1, 2, 3}),
                               reshape(arange(24, DType::i32), {2, 3, 4}),
                               tensor<int64_t>({-1, 1LL << 40}),
                               tensor<bool>({true, false}),
                               tensor<uint8_t>({0, 200}),
                               zeros({0, 5})};
  for (const Tensor& t : cases) {
    std::string bytes = encode_npy(t);
    EXPECT_EQ(bytes.find("\x93NUMPY\x01\x00"), 0u);
    size_t header_len = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    Tensor back = decode_npy(bytes, "mem");
    EXPECT_EQ(back.type(), t.type());
    EXPECT_EQ(back.to_vector<double>(), t.to_vector<double>());
  }
}

TEST(Npy, HeaderText) {
  std::string b = encode_npy(zeros({2, 3}));
  EXPECT_THAT(b, HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  EXPECT_THAT(encode_npy(zeros({5}, DType::i64)), HasSubstr("'shape': (5,)"));
  EXPECT_THAT(encode_npy(scalar(1, DType::b8)), HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(encode_npy(scalar(1, DType::b8)), HasSubstr("'shape': ()"));
}

std::string with_header(const std::string& dict, const std::string& data) {
  std::string h = dict + "\n";
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h + data;
}

TEST(Npy, RejectsMalformedFiles) {
  std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_NO_THROW(decode_npy(with_header(ok, std::string(8, '\0')), "f"));
  EXPECT_THAT(error_of([] { decode_npy("PK\x03\x04", "x.npy"); }),
              HasSubstr("x.npy: not a .npy file"));
  EXPECT_THAT(error_of([&] { decode_npy(with_header(ok, std::string(4, '\0')), "f"); }),
              HasSubstr(".npy data has 4 bytes, but shape (2,) of float32 needs 8"));
  EXPECT_THAT(error_of([&] { decode_npy(with_header(ok, "").substr(0, 30), "f"); }),
              HasSubstr("truncated .npy file"));
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                                       std::string(4, '\0')),
                           "f");
              }),
              HasSubstr("unsupported .npy dtype '>f4'"));
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')),
                           "f");
              }),
              HasSubstr("must have the keys"));
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}",
                                       std::string(4, '\0')),
                           "f");
              }),
              HasSubstr("expected True or False"));
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (1,)}",
                                       std::string(1, '\x07')),
                           "f");
              }),
              HasSubstr("bool array holds the byte 7"));
  std::string v9 = with_header(ok, std::string(8, '\0'));
  v9[6] = 9;
  EXPECT_THAT(error_of([&] { decode_npy(v9, "f"); }),
              HasSubstr("unsupported .npy format version 9"));
  EXPECT_THAT(error_of([] { load_npy("/nonexistent/dir/x.npy"); }),
              HasSubstr("cannot open \"/nonexistent/dir/x.npy\""));
  EXPECT_THAT(error_of([] { save_npy("/nonexistent/dir/x.npy", ones({1})); }),
              HasSubstr("cannot write \"/nonexistent/dir/x.npy\""));
}

TEST(Npy, ElementCountLimits) {
  // 562949953421312 * 32768 = 2^64: the product wrapped to 0, matched the empty data and gave
  // a tensor that claimed 2^64 elements. Now an error before anything is allocated.
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '<f4', 'fortran_order': False, "
                                       "'shape': (562949953421312, 32768), }",
                                       ""),
                           "big.npy");
              }),
              HasSubstr("big.npy: shape (562949953421312, 32768) has more elements than int64 "
                        "can count"));
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '|u1', 'fortran_order': True, "
                                       "'shape': (1099511627777,), }",
                                       ""),
                           "f");
              }),
              HasSubstr("f: shape (1099511627777,) has 1099511627777 elements, more than the "
                        "limit of 1099511627776 (2^40, kiln::io::kMaxTensorElements)"));
  // Found by npy_fuzzer: an empty Fortran-order array whose other dimensions multiply past
  // int64. Its element count is 0, but transposing it overflowed the strides (UBSan).
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '<i8', 'fortran_order': True, "
                                       "'shape': (2,8793602648,947793610, 0,5), }",
                                       ""),
                           "f");
              }),
              HasSubstr("f: shape (2, 8793602648, 947793610, 0, 5) has more elements than int64 "
                        "can count"));
  EXPECT_THAT(error_of([&] {
                decode_npy(with_header("{'descr': '|u1', 'fortran_order': False, "
                                       "'shape': (0, 2000000, 1000000), }",
                                       ""),
                           "f");
              }),
              HasSubstr("has 2000000000000 elements in its non-zero dimensions, more than the "
                        "limit"));
  EXPECT_EQ(decode_npy(with_header("{'descr': '|u1', 'fortran_order': True, "
                                   "'shape': (0, 1000, 1000), }",
                                   ""),
                       "f")
                .shape(),
            Shape({0, 1000, 1000}));
  // A version 2.0 header of 1 MiB + 1 bytes is refused before it is parsed.
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  uint32_t n = (1u << 20) + 1;
  for (int i = 0; i < 4; ++i) v2 += char((n >> (8 * i)) & 0xff);
  v2 += std::string(n, ' ');
  EXPECT_THAT(error_of([&] { decode_npy(v2, "f"); }),
              HasSubstr("f: the .npy header length 1048577 exceeds the limit of 1048576 bytes"));
}

}  // namespace
}  // namespace kiln
