// numpy <-> kiln tensors for the Python module.
//
// tensor_from_numpy: a C-contiguous array whose data is 64-byte aligned (kiln's alignment) and
// whose dtype kiln has (float32, float64, int32, int64, bool, uint8) is used without a copy: the
// tensor borrows numpy's buffer and keeps the array alive (like torch.from_numpy; kiln never
// writes into borrowed memory, but writing into the numpy array afterwards changes the
// tensor). Anything else (non-contiguous, misaligned, another dtype, zero-sized) is copied.
// numpy_view: a read-only numpy array sharing the tensor's buffer (no copy); a bfloat16
// tensor gives an ml_dtypes.bfloat16 array where ml_dtypes is installed, else a float32 copy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>

#include "kiln/frontend/tensor.h"

namespace kiln::python {

namespace py = pybind11;

// The kiln dtype of a numpy dtype; a TypeError (pybind11::type_error) for others.
DType dtype_from_numpy(const py::dtype& dt);
py::dtype numpy_dtype(DType dtype);
// `dtype`: convert to it first (a copy). `copied` (optional) says whether data was copied.
Tensor tensor_from_numpy(const py::array& array, std::optional<DType> dtype = std::nullopt,
                         bool* copied = nullptr);
py::array numpy_view(const Tensor& t);
// A numpy scalar (np.float64(1.0), np.int32(3)): a value with a numpy dtype, traced and
// converted like a zero-dimensional array (Python's own numbers are not).
bool is_numpy_scalar(const py::handle& value);

// A kiln dtype from a Python value: a kiln dtype name ("float32", "f32"), a numpy dtype or
// a numpy scalar type (np.float32).
DType dtype_from_python(const py::handle& value);

}  // namespace kiln::python
