#include "numpy_interop.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/runtime/array.h"

namespace kiln::python {
namespace {

// Keeps a Python object alive from C++ (a borrowed buffer's owner); released under the GIL.
std::shared_ptr<void> keep_alive(py::object object) {
  auto* held = new py::object(std::move(object));
  return std::shared_ptr<void>(held, [](void* p) {
    if (!Py_IsInitialized()) return;  // interpreter gone: nothing left to release
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
}

Shape shape_of(const py::array& a) {
  Shape s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(int64_t(a.shape(i)));
  return s;
}

// ml_dtypes.bfloat16's numpy dtype, or None where ml_dtypes is not installed (it is optional).
py::object ml_dtypes_bfloat16() {
  try {
    return py::module_::import("ml_dtypes").attr("bfloat16");
  } catch (const py::error_already_set&) {
    return py::none();
  }
}

bool is_ml_dtypes_bfloat16(const py::dtype& dt) {
  return dt.kind() == 'V' && dt.itemsize() == 2 &&
         dt.attr("name").cast<std::string>() == "bfloat16";
}

}  // namespace

DType dtype_from_numpy(const py::dtype& dt) {
  if (is_ml_dtypes_bfloat16(dt)) return DType::bf16;
  switch (dt.kind()) {
    case 'f':
      if (dt.itemsize() == 4) return DType::f32;
      if (dt.itemsize() == 8) return DType::f64;
      break;
    case 'i':
      if (dt.itemsize() == 4) return DType::i32;
      if (dt.itemsize() == 8) return DType::i64;
      break;
    case 'u':
      if (dt.itemsize() == 1) return DType::u8;
      break;
    case 'b':
      return DType::b8;
    default:
      break;
  }
  throw py::type_error(fmt::format(
      "kiln has no dtype for numpy dtype {}; kiln's dtypes are float32, float64, int32, int64, "
      "bool, uint8 and bfloat16 (ml_dtypes.bfloat16) (convert with ndarray.astype)",
      dt.attr("name").cast<std::string>()));
}

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return py::dtype::of<float>();
    case DType::f64:
      return py::dtype::of<double>();
    case DType::i32:
      return py::dtype::of<int32_t>();
    case DType::i64:
      return py::dtype::of<int64_t>();
    case DType::b8:
      return py::dtype::of<bool>();
    case DType::u8:
      return py::dtype::of<uint8_t>();
    case DType::bf16: {
      py::object bf16 = ml_dtypes_bfloat16();
      if (bf16.is_none())
        throw Error(
            "bfloat16 numpy arrays need the ml_dtypes package (pip install ml_dtypes); without "
            "it kiln converts bfloat16 tensors to float32 arrays");
      return py::dtype::from_args(bf16);
    }
  }
  throw Error("numpy_dtype: unknown dtype");
}

DType dtype_from_python(const py::handle& value) {
  if (py::isinstance<py::str>(value)) return parse_dtype(value.cast<std::string>());
  return dtype_from_numpy(py::dtype::from_args(py::reinterpret_borrow<py::object>(value)));
}

Tensor tensor_from_numpy(const py::array& input, std::optional<DType> dtype, bool* copied) {
  DType have = dtype_from_numpy(input.dtype());
  if (dtype == DType::bf16 && have != DType::bf16) {  // kiln rounds (nearest even), once
    if (copied) *copied = true;
    return cast(tensor_from_numpy(input, std::nullopt, nullptr), DType::bf16);
  }
  py::array a = input;
  if (dtype && *dtype != have) {
    a = input.attr("astype")(numpy_dtype(*dtype));
    have = *dtype;
  }
  const Shape shape = shape_of(a);
  const bool contiguous = (a.flags() & py::array::c_style) != 0;
  const bool aligned = reinterpret_cast<uintptr_t>(a.data()) % runtime::kAlignment == 0;
  const size_t bytes = size_t(shape.num_elements()) * dtype_size(have);
  if (contiguous && aligned && bytes > 0) {
    if (copied) *copied = false;
    auto storage = runtime::Storage::borrow(const_cast<void*>(a.data()), bytes, keep_alive(a));
    return Tensor(runtime::Array{have, shape, std::move(storage)});
  }
  if (copied) *copied = true;
  runtime::Array out = runtime::Array::empty(have, shape);
  if (bytes > 0) {
    // numpy copies any layout into the contiguous destination.
    py::array dst(numpy_dtype(have), a.request().shape, out.raw(),
                  py::capsule(out.raw(), [](void*) {}));
    py::module_::import("numpy").attr("copyto")(dst, a);
  }
  return Tensor(std::move(out));
}

py::array numpy_view(const Tensor& tensor) {
  // bfloat16: an ml_dtypes.bfloat16 view where ml_dtypes is installed, else a float32 copy
  // (exact widening).
  const bool widen = tensor.dtype() == DType::bf16 && ml_dtypes_bfloat16().is_none();
  const Tensor t = widen ? cast(tensor, DType::f32) : tensor;
  const runtime::Array& a = t.array();
  std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
  // The capsule owns a reference to the storage: the numpy array keeps kiln's buffer alive.
  auto* keep = new std::shared_ptr<runtime::Storage>(a.storage);
  py::capsule owner(keep,
                    [](void* p) { delete static_cast<std::shared_ptr<runtime::Storage>*>(p); });
  void* data = a.raw();
  if (data == nullptr) data = keep;  // zero-sized: any non-null pointer
  py::array out(numpy_dtype(a.dtype), shape, data, owner);
  py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return out;
}

bool is_numpy_scalar(const py::handle& value) {
  // Leaked on purpose: a static py::object would be released after the interpreter is gone.
  static py::handle generic = py::object(py::module_::import("numpy").attr("generic")).release();
  return py::isinstance(value, generic);
}

}  // namespace kiln::python
