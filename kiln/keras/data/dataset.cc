#include "kiln/keras/data/dataset.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/data/shuffle_buffer.h"
#include "kiln/keras/io/file_util.h"

namespace kiln::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  ShuffleBuffer<int64_t> buffer(seed);
  for (int64_t i = 0; i < n; ++i) buffer.add(i);
  std::vector<int64_t> p;
  p.reserve(buffer.size());
  while (!buffer.empty()) p.push_back(buffer.take(std::nullopt));
  return p;
}

Tensor take_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  return gather(x, tensor<int64_t>(rows), 0);
}

Examples take(const Examples& d, const std::vector<int64_t>& rows) {
  return {take_rows(d.x, rows), take_rows(d.y, rows)};
}

std::pair<Examples, Examples> train_test_split(const Examples& d, double test_fraction,
                                               uint64_t seed) {
  if (!(test_fraction > 0 && test_fraction < 1))
    throw Error(
        fmt::format("train_test_split: test_fraction must be in (0, 1), got {}", test_fraction));
  std::vector<int64_t> p = permutation(d.size(), seed);
  auto n_test = int64_t(double(d.size()) * test_fraction + 0.5);
  std::vector<int64_t> train(p.begin(), p.end() - n_test), test(p.end() - n_test, p.end());
  return {take(d, train), take(d, test)};
}

std::vector<std::vector<int64_t>> batch_indices(int64_t n, int64_t batch_size, bool shuffle,
                                                uint64_t seed) {
  if (batch_size < 1) throw Error(fmt::format("batch size must be at least 1, got {}", batch_size));
  std::vector<int64_t> order = shuffle ? permutation(n, seed) : std::vector<int64_t>();
  if (!shuffle)
    for (int64_t i = 0; i < n; ++i) order.push_back(i);
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < n; b += batch_size)
    out.emplace_back(order.begin() + b, order.begin() + std::min(n, b + batch_size));
  return out;
}

std::string maybe_gunzip(std::string raw, const std::string& what, size_t max_bytes) {
  if (raw.size() < 2 || uint8_t(raw[0]) != 0x1f || uint8_t(raw[1]) != 0x8b) return raw;
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw Error(fmt::format("{}: cannot initialise gzip decompression", what));
  std::string out;
  auto fail = [&](const std::string& why) {
    inflateEnd(&zs);
    throw Error(fmt::format("{}: {}", what, why));
  };
  // zlib counts input in uInt (32 bits): feed files over 4 GiB in pieces.
  size_t fed = 0;
  char buf[1 << 16];
  int rc;
  do {
    if (zs.avail_in == 0 && fed < raw.size()) {
      size_t piece = std::min<size_t>(raw.size() - fed, size_t(1) << 30);
      zs.next_in = reinterpret_cast<Bytef*>(raw.data() + fed);
      zs.avail_in = uInt(piece);
      fed += piece;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    // No progress possible with all input consumed: the stream ends early.
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && fed == raw.size()) fail("truncated gzip data");
    if (rc != Z_OK && rc != Z_STREAM_END)
      fail(fmt::format("corrupt gzip data ({}); re-download or decompress the file",
                       zs.msg ? zs.msg : "inflate failed"));
    size_t produced = sizeof buf - zs.avail_out;
    if (out.size() + produced > max_bytes)
      fail(
          fmt::format("gzip data expands to more than {} bytes (the limit of "
                      "kiln::io::kMaxDecompressedBytes); decompress the file yourself if it "
                      "is genuine",
                      max_bytes));
    out.append(buf, produced);
  } while (rc != Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}

std::string read_maybe_gzip(const std::string& path) {
  return maybe_gunzip(io::read_file(path), path);
}

}  // namespace kiln::data
