#include "kiln/keras/io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/keras/io/file_util.h"
#include "kiln/keras/io/read_limits.h"

namespace kiln {
namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::b8:
      return "BOOL";
    case DType::u8:
      return "U8";
    case DType::bf16:
      return "BF16";
  }
  return "?";
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw Error(fmt::format("{}: invalid safetensors file: {}", what, why));
}

Entry parse_entry(const std::string& what, const std::string& name, const nlohmann::json& j) {
  if (!j.is_object()) fail(what, fmt::format("entry \"{}\" is not a JSON object", name));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) fail(what, fmt::format("entry \"{}\" has no \"{}\"", name, key));
  Entry e{name, DType::f32, {}, 0, 0};
  if (!j["dtype"].is_string()) fail(what, fmt::format("entry \"{}\": dtype is not a string", name));
  std::string dt = j["dtype"].get<std::string>();
  bool found = false;
  for (DType t : kAllDTypes)
    if (dt == st_dtype(t)) e.dtype = t, found = true;
  if (!found)
    fail(what, fmt::format("entry \"{}\" has dtype \"{}\", which kiln does not read (supported: "
                           "F32, F64, BF16, I32, I64, U8, BOOL)",
                           name, dt));
  const auto& shape = j["shape"];
  if (!shape.is_array() || shape.size() > size_t(kMaxRank))
    fail(what, fmt::format("entry \"{}\": shape must be an array of at most {} dimensions", name,
                           kMaxRank));
  for (const auto& d : shape) {
    if (!d.is_number_unsigned())
      fail(what, fmt::format("entry \"{}\": shape {} has a dimension that is not a non-negative "
                             "integer",
                             name, shape.dump()));
    if (d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(what, fmt::format("entry \"{}\": shape {} has the dimension {}, more than int64 holds",
                             name, shape.dump(), d.get<uint64_t>()));
    e.shape.push_back(d.get<int64_t>());
  }
  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    fail(what, fmt::format("entry \"{}\": data_offsets must be two non-negative integers, got {}",
                           name, off.dump()));
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin)
    fail(what, fmt::format("entry \"{}\": data_offsets [{}, {}] end before they begin", name,
                           e.begin, e.end));
  return e;
}

}  // namespace

std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || !names.insert(name).second)
      throw Error(fmt::format("save_safetensors: tensor name \"{}\" is {}", name,
                              name == "__metadata__" ? "reserved" : "used twice"));
    uint64_t bytes = t.array().nbytes();
    header[name] = {{"dtype", st_dtype(t.dtype())},
                    {"shape", t.shape().to_vector()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& [name, t] : tensors)
    out.append(static_cast<const char*>(t.array().raw()), t.array().nbytes());
  return out;
}

NamedTensors decode_safetensors(const std::string& b, const std::string& what,
                                std::map<std::string, std::string>* metadata) {
  if (b.size() < 8)
    fail(what, fmt::format("the file has {} bytes, fewer than the 8-byte header length", b.size()));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(b[size_t(i)])) << (8 * i);
  if (n > io::kMaxSafetensorsHeaderBytes)
    fail(what, fmt::format("the header length {} exceeds the limit of {} bytes", n,
                           io::kMaxSafetensorsHeaderBytes));
  if (8 + n > b.size())
    fail(what, fmt::format("the header length {} runs past the end of the file ({} bytes): the "
                           "file is truncated",
                           n, b.size()));
  std::string text = b.substr(8, n);
  if (text.empty() || text[0] != '{') fail(what, "the header does not start with '{'");

  std::set<std::string> keys;
  std::string duplicate;
  // Also stops a deeply nested header early (kMaxSafetensorsJsonDepth): nesting is what makes
  // nlohmann's recursive dump() (used in messages) and a walk of the tree deep.
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if ((event == nlohmann::json::parse_event_t::object_start ||
         event == nlohmann::json::parse_event_t::array_start) &&
        depth >= io::kMaxSafetensorsJsonDepth)
      fail(what, fmt::format("the header nests JSON objects and arrays deeper than {} levels",
                             io::kMaxSafetensorsJsonDepth));
    if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
        !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(text, on_event, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    fail(what, "the header is not a valid JSON object");
  if (!duplicate.empty()) fail(what, fmt::format("tensor \"{}\" appears twice", duplicate));

  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(what, "__metadata__ is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          fail(what, fmt::format("__metadata__ value of \"{}\" is not a string", k));
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(what, name, value));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& c) {
    return a.begin < c.begin || (a.begin == c.begin && a.end < c.end);
  });
  uint64_t data_size = b.size() - 8 - n, expected_begin = 0;
  NamedTensors out;
  for (const Entry& e : entries) {
    if (e.begin != expected_begin)
      fail(what, fmt::format("entry \"{}\" starts at byte {}, but the previous tensor ends at {} "
                             "(offsets must be contiguous, without gaps or overlaps)",
                             e.name, e.begin, expected_begin));
    uint64_t want =
        io::checked_byte_size(e.shape, e.dtype, fmt::format("{}: entry \"{}\"", what, e.name));
    Shape shape(e.shape);
    if (e.end - e.begin != want)
      fail(what, fmt::format("entry \"{}\" has {} bytes, but {} {} needs {}", e.name,
                             e.end - e.begin, dtype_name(e.dtype), shape.to_string(), want));
    if (e.end > data_size)
      fail(what, fmt::format("entry \"{}\" ends at byte {}, past the end of the data ({} bytes): "
                             "the file is truncated",
                             e.name, e.end, data_size));
    runtime::Array a = runtime::Array::empty(e.dtype, shape);
    if (want) std::memcpy(a.raw(), b.data() + 8 + n + e.begin, want);
    out.emplace_back(e.name, Tensor(std::move(a)));
    expected_begin = e.end;
  }
  if (expected_begin != data_size)
    fail(what, fmt::format("the data section has {} bytes, but the tensors cover {}", data_size,
                           expected_begin));
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  io::write_file_atomically(path, encode_safetensors(tensors, metadata));
}

NamedTensors load_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata) {
  return decode_safetensors(io::read_file(path), path, metadata);
}

}  // namespace kiln
