// libFuzzer harness of the .npy reader: kiln::decode_npy on arbitrary bytes (load_npy reads
// a file and calls it). What decodes must encode and decode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "kiln/keras/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::Tensor t = kiln::decode_npy(bytes, "<fuzz>");
    std::string encoded = kiln::encode_npy(t);
    if (kiln::encode_npy(kiln::decode_npy(encoded, "<encoded>")) != encoded)
      kiln::fuzz::finding("encode_npy(decode_npy(encode_npy(t))) differs", encoded);
  } catch (const kiln::Error& e) {
    kiln::fuzz::check_expected_error(e);
  }
  return 0;
}
