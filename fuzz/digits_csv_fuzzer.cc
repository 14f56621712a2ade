// libFuzzer harness of the digits CSV loader: kiln::data::decode_digits on arbitrary bytes
// (raw or gzip-compressed; load_digits reads a file and calls it). What decodes must be
// N x 64 pixels in [0, 1] with N labels.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "kiln/keras/data/digits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::data::Examples d = kiln::data::decode_digits(bytes, "<fuzz>");
    if (d.x.rank() != 2 || d.x.shape()[1] != 64 || d.y.rank() != 1 ||
        d.y.shape()[0] != d.x.shape()[0])
      kiln::fuzz::finding("digits: wrong shapes", d.x.shape().to_string());
  } catch (const kiln::Error& e) {
    kiln::fuzz::check_expected_error(e);
  }
  return 0;
}
