#include "kiln/keras/data/mnist.h"

#include <fmt/format.h>

#include <filesystem>

#include "kiln/frontend/creation.h"
#include "kiln/keras/data/idx_stream.h"
#include "kiln/keras/io/file_util.h"
#include "kiln/keras/io/read_limits.h"

namespace kiln::data {
namespace {

// Checks the IDX header and that the data after it has exactly the promised size.
std::vector<int64_t> idx_dims(const std::string& b, const std::string& path, uint32_t magic) {
  std::vector<int64_t> dims = parse_idx_header(b, path, magic);
  auto total = size_t(io::checked_element_count(dims, path + ": IDX header"));
  size_t have = b.size() - 4 - 4 * dims.size();
  if (have != total)
    throw Error(fmt::format("{}: IDX header promises {} bytes of data ({}), but the file has {}",
                            path, total, Shape(dims).to_string(), have));
  return dims;
}

}  // namespace

std::string find_mnist_file(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  for (const std::string& candidate : {name, name + ".gz"}) {
    fs::path p = fs::path(dir) / candidate;
    if (fs::exists(p)) return p.string();
  }
  throw Error(
      fmt::format("MNIST: \"{}\" has no {} (or {}.gz); the directory needs "
                  "train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                  "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte",
                  dir, name, name));
}

Tensor decode_idx_images(std::string bytes, const std::string& what) {
  std::string b = maybe_gunzip(std::move(bytes), what);
  std::vector<int64_t> dims = idx_dims(b, what, 0x00000803);
  size_t offset = 4 + 4 * 3;
  std::vector<float> px(b.size() - offset);
  for (size_t i = 0; i < px.size(); ++i) px[i] = float(uint8_t(b[offset + i])) / 255.0f;
  return tensor(px, Shape(dims));
}

Tensor decode_idx_labels(std::string bytes, const std::string& what) {
  std::string b = maybe_gunzip(std::move(bytes), what);
  std::vector<int64_t> dims = idx_dims(b, what, 0x00000801);
  std::vector<int64_t> labels(static_cast<size_t>(dims[0]));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = uint8_t(b[8 + i]);
  return tensor(labels, Shape(dims));
}

Tensor load_idx_images(const std::string& path) {
  return decode_idx_images(io::read_file(path), path);
}

Tensor load_idx_labels(const std::string& path) {
  return decode_idx_labels(io::read_file(path), path);
}

std::pair<Examples, Examples> load_mnist(const std::string& dir) {
  auto load = [&](const char* images, const char* labels) {
    std::string images_path = find_mnist_file(dir, images);
    std::string labels_path = find_mnist_file(dir, labels);
    Examples d{load_idx_images(images_path), load_idx_labels(labels_path)};
    if (d.x.shape()[0] != d.y.shape()[0])
      throw Error(fmt::format("MNIST: {} has {} images but {} has {} labels", images_path,
                              d.x.shape()[0], labels_path, d.y.shape()[0]));
    return d;
  };
  return {load("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          load("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")};
}

}  // namespace kiln::data
