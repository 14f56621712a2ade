#include "kiln/keras/io/hdf5_file.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "kiln/ir/error.h"
#include "kiln/keras/io/read_limits.h"
#include "kiln/runtime/array.h"

namespace kiln::io {
namespace {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}

// Called with the lock held: no error stacks printed on stderr.
void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

herr_t first_error(unsigned n, const H5E_error2_t* e, void* out) {
  auto* text = static_cast<std::string*>(out);
  if (n == 0 && e && e->desc) *text = fmt::format("{} in {}", e->desc, e->func_name);
  return 0;
}

// HDF5's message for the last failure (then cleared).
std::string hdf5_error() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, first_error, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "no message from HDF5" : text;
}

// Closes an HDF5 handle with the given function at scope exit.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~Handle() {
    if (id >= 0) close(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id; }
};

hid_t memory_type(DType t) {
  switch (t) {
    case DType::f32:
      return H5T_NATIVE_FLOAT;
    case DType::f64:
      return H5T_NATIVE_DOUBLE;
    case DType::i32:
      return H5T_NATIVE_INT32;
    case DType::i64:
      return H5T_NATIVE_INT64;
    case DType::u8:
      return H5T_NATIVE_UINT8;
    case DType::b8:
    case DType::bf16:  // refused by Hdf5Writer::dataset
      break;
  }
  return -1;
}

// The kiln dtype of a stored type, or an empty string and a description of the type.
bool stored_dtype(hid_t type, DType& out, std::string& described) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT) {
    if (size == 4) return out = DType::f32, true;
    if (size == 8) return out = DType::f64, true;
    described = fmt::format("a {}-bit float", size * 8);
    return false;
  }
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (is_signed && size == 4) return out = DType::i32, true;
    if (is_signed && size == 8) return out = DType::i64, true;
    if (!is_signed && size == 1) return out = DType::u8, true;
    described = fmt::format("a {}-bit {} integer", size * 8, is_signed ? "signed" : "unsigned");
    return false;
  }
  static const char* names[] = {"integer",  "float",     "time", "string", "bitfield", "opaque",
                                "compound", "reference", "enum", "vlen",   "array"};
  described = cls >= 0 && size_t(cls) < std::size(names) ? names[cls] : "unknown";
  described += " (HDF5 type class)";
  return false;
}

std::atomic<uint64_t> image_counter{0};

}  // namespace

// ---------------------------------------------------------------- reader

Hdf5Reader::Hdf5Reader(const std::string& bytes, std::string what)
    : what_(std::move(what)), image_size_(bytes.size()) {
  std::lock_guard lock(hdf5_mutex());
  quiet();
  static const char kSignature[] = "\x89HDF\r\n\x1a\n";
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kSignature, 8) != 0)
    throw Error(fmt::format("\"{}\" is not an HDF5 file (no HDF5 signature at its start)", what_));
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 ||
      H5Pset_file_image(fapl, const_cast<char*>(bytes.data()), bytes.size()) < 0)
    throw Error(fmt::format("\"{}\": cannot open the HDF5 image: {}", what_, hdf5_error()));
  const std::string name = fmt::format("kiln-read-{}.h5", image_counter++);
  file_ = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl);
  if (file_ < 0)
    throw Error(fmt::format("\"{}\" is not a readable HDF5 file ({}); the file is damaged", what_,
                            hdf5_error()));
}

Hdf5Reader::~Hdf5Reader() {
  std::lock_guard lock(hdf5_mutex());
  if (file_ >= 0) H5Fclose(file_);
}

Hdf5Reader::Kind Hdf5Reader::kind(const std::string& path) const {
  if (path == "/") return Kind::group;
  std::lock_guard lock(hdf5_mutex());
  quiet();
  // Each prefix must exist before the next is asked for (H5Lexists' rule).
  size_t pos = 0;
  while (true) {
    size_t slash = path.find('/', pos);
    std::string prefix = path.substr(0, slash);
    if (prefix.empty() || H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Kind::missing;
    }
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  H5O_info_t info;
  if (H5Oget_info_by_name(file_, path.c_str(), &info, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return Kind::missing;
  }
  if (info.type == H5O_TYPE_GROUP) return Kind::group;
  if (info.type == H5O_TYPE_DATASET) return Kind::dataset;
  return Kind::other;
}

std::vector<std::string> Hdf5Reader::children(const std::string& path) const {
  if (kind(path) != Kind::group)
    throw Error(fmt::format("\"{}\" has no group \"{}\"", what_, path));
  std::lock_guard lock(hdf5_mutex());
  quiet();
  Handle group(H5Gopen2(file_, path.c_str(), H5P_DEFAULT), H5Gclose);
  H5G_info_t info;
  if (group < 0 || H5Gget_info(group, &info) < 0)
    throw Error(fmt::format("\"{}\": cannot read group \"{}\": {}", what_, path, hdf5_error()));
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t n =
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0 || n > 65535)
      throw Error(
          fmt::format("\"{}\": cannot read the members of \"{}\": {}", what_, path, hdf5_error()));
    std::string name(size_t(n) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(size_t(n));
    names.push_back(std::move(name));
  }
  return names;
}

Tensor Hdf5Reader::read(const std::string& path) const {
  if (kind(path) != Kind::dataset)
    throw Error(fmt::format("\"{}\" has no dataset \"{}\"", what_, path));
  std::lock_guard lock(hdf5_mutex());
  quiet();
  const std::string where = fmt::format("\"{}\": dataset \"{}\"", what_, path);
  Handle dset(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (dset < 0) throw Error(fmt::format("{} cannot be opened: {}", where, hdf5_error()));
  Handle type(H5Dget_type(dset), H5Tclose);
  Handle space(H5Dget_space(dset), H5Sclose);
  if (type < 0 || space < 0) throw Error(fmt::format("{} cannot be read: {}", where, hdf5_error()));
  DType dtype = DType::f32;
  std::string described;
  if (!stored_dtype(type, dtype, described))
    throw Error(fmt::format("{} holds {}; kiln reads float32, float64, int32, int64 and uint8 data",
                            where, described));
  const H5S_class_t space_class = H5Sget_simple_extent_type(space);
  if (space_class != H5S_SCALAR && space_class != H5S_SIMPLE)
    throw Error(fmt::format("{} has no data (an HDF5 null dataspace)", where));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > kMaxRank)
    throw Error(fmt::format("{} has rank {}; kiln supports at most {}", where, rank, kMaxRank));
  hsize_t dims[H5S_MAX_RANK];
  H5Sget_simple_extent_dims(space, dims, nullptr);
  std::vector<int64_t> shape;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] > hsize_t(INT64_MAX))
      throw Error(fmt::format("{} has a dimension of {} elements", where, dims[i]));
    shape.push_back(int64_t(dims[i]));
  }
  const uint64_t bytes = checked_byte_size(shape, dtype, where);
  Handle plist(H5Dget_create_plist(dset), H5Pclose);
  const bool contiguous = plist >= 0 && H5Pget_layout(plist) != H5D_CHUNKED;
  if (bytes > (contiguous ? image_size_ : image_size_ * 1100 + 4096))
    throw Error(
        fmt::format("{} declares {} bytes of data, more than the {}-byte file can hold; "
                    "the file is damaged",
                    where, bytes, image_size_));
  runtime::Array a = runtime::Array::empty(dtype, Shape(shape));
  if (bytes > 0 && H5Dread(dset, memory_type(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, a.raw()) < 0)
    throw Error(fmt::format("{} cannot be read: {}", where, hdf5_error()));
  return Tensor(std::move(a));
}

std::string Hdf5Reader::string_attribute(const std::string& path, const std::string& name) const {
  if (kind(path) == Kind::missing) return "";
  std::lock_guard lock(hdf5_mutex());
  quiet();
  if (H5Aexists_by_name(file_, path.c_str(), name.c_str(), H5P_DEFAULT) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  Handle attr(H5Aopen_by_name(file_, path.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  if (attr < 0) return (void)H5Eclear2(H5E_DEFAULT), "";
  Handle type(H5Aget_type(attr), H5Tclose);
  Handle space(H5Aget_space(attr), H5Sclose);
  if (type < 0 || space < 0 || H5Tget_class(type) != H5T_STRING ||
      H5Sget_simple_extent_npoints(space) != 1)
    return (void)H5Eclear2(H5E_DEFAULT), "";
  std::string out;
  if (H5Tis_variable_str(type) > 0) {
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    char* text = nullptr;
    if (H5Aread(attr, mem, &text) >= 0 && text) {
      out = text;
      H5free_memory(text);
    }
  } else {
    const size_t size = H5Tget_size(type);
    if (size > 0 && size < (1 << 16)) {
      Handle mem(H5Tcopy(type), H5Tclose);
      std::string buf(size, '\0');
      if (H5Aread(attr, mem, buf.data()) >= 0) out = buf.substr(0, buf.find('\0'));
    }
  }
  H5Eclear2(H5E_DEFAULT);
  return out;
}

// ---------------------------------------------------------------- writer

Hdf5Writer::Hdf5Writer() {
  std::lock_guard lock(hdf5_mutex());
  quiet();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0)
    throw Error(fmt::format("cannot make an HDF5 file in memory: {}", hdf5_error()));
  const std::string name = fmt::format("kiln-write-{}.h5", image_counter++);
  file_ = H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (file_ < 0) throw Error(fmt::format("cannot make an HDF5 file in memory: {}", hdf5_error()));
}

Hdf5Writer::~Hdf5Writer() {
  std::lock_guard lock(hdf5_mutex());
  if (file_ >= 0) H5Fclose(file_);
}

void Hdf5Writer::group(const std::string& path, const std::string& name) {
  std::lock_guard lock(hdf5_mutex());
  quiet();
  size_t pos = 0;
  while (true) {
    size_t slash = path.find('/', pos);
    std::string prefix = path.substr(0, slash);
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      Handle g(H5Gcreate2(file_, prefix.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (g < 0)
        throw Error(fmt::format("HDF5: cannot create group \"{}\": {}", prefix, hdf5_error()));
    }
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  if (name.empty()) return;
  Handle g(H5Gopen2(file_, path.c_str(), H5P_DEFAULT), H5Gclose);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(g, "name", type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* text = name.c_str();
  if (g < 0 || attr < 0 || H5Awrite(attr, type, &text) < 0)
    throw Error(fmt::format("HDF5: cannot set the name of group \"{}\": {}", path, hdf5_error()));
}

void Hdf5Writer::dataset(const std::string& path, const Tensor& value) {
  const runtime::Array& a = value.array();
  const hid_t mem = memory_type(value.dtype());
  if (value.dtype() == DType::bf16)
    throw Error(fmt::format(
        "HDF5: dataset \"{}\" is {}: kiln does not write bfloat16 to HDF5 files (HDF5 has no "
        "bfloat16 type); cast the weights to float32 first, or save them as safetensors (BF16)",
        path, value.type().to_string()));
  if (mem < 0)
    throw Error(fmt::format("HDF5: dataset \"{}\" is {}; kiln writes f32, f64, i32, i64 and u8",
                            path, value.type().to_string()));
  std::lock_guard lock(hdf5_mutex());
  quiet();
  std::vector<hsize_t> dims;
  for (int64_t d : value.shape()) dims.push_back(hsize_t(d));
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose);
  // Stored little-endian, as h5py stores numpy's native data on x86.
  Handle dset(H5Dcreate2(file_, path.c_str(), mem, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              H5Dclose);
  if (space < 0 || dset < 0 ||
      (a.nbytes() > 0 && H5Dwrite(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.raw()) < 0))
    throw Error(fmt::format("HDF5: cannot write dataset \"{}\": {}", path, hdf5_error()));
}

std::string Hdf5Writer::image() {
  std::lock_guard lock(hdf5_mutex());
  quiet();
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0)
    throw Error(fmt::format("HDF5: cannot flush the file: {}", hdf5_error()));
  ssize_t n = H5Fget_file_image(file_, nullptr, 0);
  if (n < 0) throw Error(fmt::format("HDF5: cannot read the file image: {}", hdf5_error()));
  std::string out(size_t(n), '\0');
  if (H5Fget_file_image(file_, out.data(), out.size()) != n)
    throw Error(fmt::format("HDF5: cannot read the file image: {}", hdf5_error()));
  H5Fclose(file_);
  file_ = -1;
  return out;
}

}  // namespace kiln::io
