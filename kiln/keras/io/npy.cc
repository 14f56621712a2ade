#include "kiln/keras/io/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/io/file_util.h"
#include "kiln/keras/io/read_limits.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string descr_of(DType t) {
  switch (t) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::i32:
      return "<i4";
    case DType::i64:
      return "<i8";
    case DType::b8:
      return "|b1";
    case DType::u8:
      return "|u1";
    case DType::bf16:  // numpy has none: encode_npy writes bfloat16 as float32
      return "<f4";
  }
  return "?";
}

// The header dict is a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail(fmt::format("unexpected key '{}'", key));
      }
      skip_space();
      if (peek() == ',') ++pos_;
    }
    if (!have_descr || !have_order || !have_shape)
      fail("the header must have the keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    // Quote at most 200 characters of the header: it may be up to kMaxNpyHeaderBytes long.
    throw Error(fmt::format("{}: malformed .npy header at character {}: {} (header: {}{})", what_,
                            pos_, why, s_.substr(0, 200), s_.size() > 200 ? "..." : ""));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of header");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  std::string string_literal() {
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string r = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return r;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
    if (s_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
    fail("expected True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (peek() != ')') {
      size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (start == pos_) fail("expected a dimension (a non-negative integer)");
      if (pos_ - start > 15) fail("dimension too large");
      dims.push_back(std::stoll(s_.substr(start, pos_ - start)));
      if (peek() == ',') ++pos_;
    }
    ++pos_;
    return dims;
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

DType dtype_of_descr(const std::string& d, const std::string& what) {
  if (d == "|V2" || d == "<V2" || d == "=V2")
    throw Error(fmt::format(
        "{}: .npy dtype '{}' is raw 2-byte data (what numpy writes for ml_dtypes.bfloat16): kiln "
        "does not read it; save the array as float32 (arr.astype(numpy.float32)) and cast to "
        "bfloat16 after loading",
        what, d));
  for (DType t : kAllDTypes) {
    if (t == DType::bf16) continue;  // its descr_of is float32's ('<f4'): no file is bf16
    if (descr_of(t) == d || (d.size() == 3 && d[0] == '=' && descr_of(t).substr(1) == d.substr(1)))
      return t;
  }
  if (d == "<b1" || d == "=b1") return DType::b8;
  if (d == "<u1" || d == "=u1") return DType::u8;
  throw Error(
      fmt::format("{}: unsupported .npy dtype '{}': kiln reads little-endian float32 "
                  "(<f4), float64 (<f8), int32 (<i4), int64 (<i8), uint8 (|u1) and bool "
                  "(|b1)",
                  what, d));
}

}  // namespace

std::string encode_npy(const Tensor& tensor) {
  // numpy has no bfloat16: a bf16 tensor is written as float32, its exact values.
  const Tensor t = tensor.dtype() == DType::bf16 ? cast(tensor, DType::f32) : tensor;
  // numpy's tuple text: (), (5,), (2, 3)
  std::string shape = fmt::format("{}", fmt::join(t.shape().dims(), ", "));
  if (t.rank() == 1) shape += ",";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                 descr_of(t.dtype()), shape);
  // Pad with spaces and a newline so magic + version + length + header is a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char((dict.size() >> 8) & 0xff);
  out += dict;
  out.append(static_cast<const char*>(t.array().raw()), t.array().nbytes());
  return out;
}

Tensor decode_npy(const std::string& b, const std::string& what) {
  if (b.size() < 10 || b.compare(0, 6, kMagic, 6) != 0)
    throw Error(fmt::format("{}: not a .npy file (missing the \\x93NUMPY magic string)", what));
  int major = static_cast<unsigned char>(b[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = size_t(static_cast<unsigned char>(b[8])) | size_t(static_cast<unsigned char>(b[9]))
                                                                << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw Error(fmt::format("{}: truncated .npy header", what));
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= size_t(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    offset = 12;
  } else {
    throw Error(fmt::format("{}: unsupported .npy format version {}.{} (kiln reads 1.0, 2.0, 3.0)",
                            what, major, static_cast<unsigned char>(b[7])));
  }
  if (header_len > io::kMaxNpyHeaderBytes)
    throw Error(fmt::format("{}: the .npy header length {} exceeds the limit of {} bytes", what,
                            header_len, io::kMaxNpyHeaderBytes));
  if (offset + header_len > b.size())
    throw Error(
        fmt::format("{}: truncated .npy file: the header says {} bytes but the file has "
                    "{} after the preamble",
                    what, header_len, b.size() - offset));
  Header h = HeaderParser(b.substr(offset, header_len), what).parse();
  DType dtype = dtype_of_descr(h.descr, what);
  if (h.shape.size() > size_t(kMaxRank))
    throw Error(fmt::format("{}: array of rank {} is not supported (kiln tensors have rank <= {})",
                            what, h.shape.size(), kMaxRank));
  std::vector<int64_t> dims = h.shape;
  if (h.fortran) std::reverse(dims.begin(), dims.end());
  size_t want = io::checked_byte_size(h.shape, dtype, what);  // as the file writes it
  Shape shape(dims);
  size_t have = b.size() - offset - header_len;
  if (have != want)
    throw Error(fmt::format("{}: .npy data has {} bytes, but shape {} of {} needs {}", what, have,
                            Shape(h.shape).to_string(), dtype_name(dtype), want));
  runtime::Array a = runtime::Array::empty(dtype, shape);
  if (want) std::memcpy(a.raw(), b.data() + offset + header_len, want);
  if (dtype == DType::b8) {
    auto* p = static_cast<uint8_t*>(a.raw());
    for (size_t i = 0; i < want; ++i)
      if (p[i] > 1)
        throw Error(fmt::format("{}: bool array holds the byte {} (must be 0 or 1)", what, p[i]));
  }
  Tensor t(std::move(a));
  return h.fortran ? transpose(t) : t;
}

void save_npy(const std::string& path, const Tensor& tensor) {
  io::write_file_atomically(path, encode_npy(tensor));
}

Tensor load_npy(const std::string& path) { return decode_npy(io::read_file(path), path); }

}  // namespace kiln
