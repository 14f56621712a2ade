// libFuzzer harness of the MNIST IDX reader: kiln::data::decode_idx_images and
// decode_idx_labels (raw or gzip-compressed bytes; load_idx_* read a file and call them) on
// the same arbitrary bytes. What decodes must have the shape its header promises.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/data/mnist.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::Tensor images = kiln::data::decode_idx_images(bytes, "<fuzz images>");
    if (images.rank() != 3) kiln::fuzz::finding("IDX images are not rank 3", "");
  } catch (const kiln::Error& e) {
    kiln::fuzz::check_expected_error(e);
  }
  try {
    kiln::Tensor labels = kiln::data::decode_idx_labels(bytes, "<fuzz labels>");
    if (labels.rank() != 1) kiln::fuzz::finding("IDX labels are not rank 1", "");
  } catch (const kiln::Error& e) {
    kiln::fuzz::check_expected_error(e);
  }
  return 0;
}
