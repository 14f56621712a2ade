// libFuzzer harness of the safetensors reader: kiln::decode_safetensors on arbitrary bytes
// (load_safetensors reads a file and calls it). What decodes must encode and decode back to
// the same bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "fuzz/fuzz_util.h"
#include "kiln/keras/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::map<std::string, std::string> metadata;
    kiln::NamedTensors tensors = kiln::decode_safetensors(bytes, "<fuzz>", &metadata);
    std::string encoded = kiln::encode_safetensors(tensors, metadata);
    std::map<std::string, std::string> metadata2;
    if (kiln::encode_safetensors(kiln::decode_safetensors(encoded, "<encoded>", &metadata2),
                                 metadata2) != encoded)
      kiln::fuzz::finding("encode(decode(encode(t))) differs", encoded);
  } catch (const kiln::Error& e) {
    kiln::fuzz::check_expected_error(e);
  }
  return 0;
}
