// kiln::Tensor: an immutable value with shared storage (copying a Tensor is cheap), a dtype
// and a shape. In eager mode it holds concrete data; every op returns a new Tensor.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/tensor_type.h"
#include "kiln/runtime/array.h"

namespace kiln {

namespace detail {
struct TensorImpl;

// What a tensor without data stands for: a functional-model placeholder (the layer, node and
// output index that produce it) or, later, a value in a graph being traced.
struct SymbolicInfo {
  virtual ~SymbolicInfo() = default;
  // True for a value of a graph being traced by kiln::function (frontend/function/).
  virtual bool is_traced() const { return false; }
};
}  // namespace detail

class Tensor {
 public:
  // An undefined tensor (defined() == false): "no value", e.g. an unconnected gradient.
  Tensor() = default;
  // Wraps concrete data.
  explicit Tensor(runtime::Array value);
  // A symbolic tensor: a type and what it stands for, no data.
  static Tensor symbolic(const TensorType& type, std::shared_ptr<const detail::SymbolicInfo> info);

  bool defined() const { return impl_ != nullptr; }
  // True for tensors without data (functional-model inputs and what is computed from them).
  bool is_symbolic() const;
  // True for a value of a graph being traced inside kiln::function.
  bool is_traced() const;
  // True for a functional-model placeholder (symbolic but not traced).
  bool is_placeholder() const { return is_symbolic() && !is_traced(); }
  const detail::SymbolicInfo* symbolic_info() const;
  DType dtype() const;
  const Shape& shape() const;
  int rank() const { return shape().rank(); }
  int64_t size() const { return shape().num_elements(); }
  TensorType type() const { return {dtype(), shape()}; }

  // The single element of a tensor with exactly one element, converted to T.
  template <typename T>
  T item() const;
  // All elements in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;
  // Pointer to the elements; T must be the tensor's own element type.
  template <typename T>
  const T* data() const {
    return array().data<T>();
  }

  // TensorFlow/numpy-style text: <Tensor shape=(2, 3) dtype=float32 [[...]]>; tensors with
  // more than 1000 elements are summarised with "...".
  std::string to_string() const;

  // Unique id of this value (used by gradient tapes). Copies of a Tensor share the id.
  uint64_t id() const;
  // The concrete data; throws kiln::Error for a symbolic tensor.
  const runtime::Array& array() const;
  // True when this Tensor object is the only handle on its data: no copy of it and no other
  // tensor or array shares its storage (a compiled step may then overwrite the storage).
  bool is_sole_owner() const;

  // Keras' `_keras_mask`: the mask a layer attached to its output (a bool tensor, true where
  // a time step is real), or an undefined Tensor. Layers read it from their inputs and attach
  // the result of compute_mask to their outputs; ops ignore it and return unmasked tensors.
  Tensor keras_mask() const;
  // This tensor (same value and id) carrying `mask` (undefined: no mask).
  Tensor with_keras_mask(const Tensor& mask) const;

 private:
  void require_defined(const char* what) const;
  std::shared_ptr<const detail::TensorImpl> impl_;
  std::shared_ptr<const Tensor> keras_mask_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

namespace detail {

struct TensorImpl {
  runtime::Array value;  // for a symbolic tensor: dtype and shape only, no storage
  uint64_t id;
  std::shared_ptr<const SymbolicInfo> symbolic;
};

[[noreturn]] void throw_item_size(const Tensor& t);

}  // namespace detail

template <typename T>
T Tensor::item() const {
  // (array() throws for symbolic tensors)
  if (size() != 1) detail::throw_item_size(*this);
  return visit_storage(dtype(), [&](auto tag) -> T {
    using S = typename decltype(tag)::type;
    return static_cast<T>(storage_value(static_cast<const S*>(array().raw())[0]));
  });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<size_t>(size()));
  visit_storage(dtype(), [&](auto tag) {  // bfloat16: its exact float value, then T
    using S = typename decltype(tag)::type;
    const S* p = static_cast<const S*>(array().raw());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(storage_value(p[i]));
  });
  return out;
}

}  // namespace kiln
