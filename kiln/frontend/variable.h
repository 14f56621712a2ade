// kiln::Variable: a mutable, named tensor slot (e.g. "dense_1/kernel") with reference
// semantics: copies of a Variable share one value. Reads inside a recording GradientTape are
// watched automatically when the variable is trainable (TensorFlow's watch_accessed_variables).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kiln/frontend/tensor.h"

namespace kiln {

class Variable;
namespace detail {
// For compiled execution (frontend/function/concrete_function.cc): true when no tensor but
// the variable's own holds its value's data, so a compiled step may update it in place.
bool value_is_unshared(const Variable& v);
}  // namespace detail

class Variable {
 public:
  // An empty handle (defined() == false).
  Variable() = default;
  Variable(std::string name, const Tensor& initial_value, bool trainable = true);

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  DType dtype() const;
  const Shape& shape() const;
  bool trainable() const;
  void set_trainable(bool trainable);

  // The current value (watched by recording tapes when trainable).
  Tensor read() const;
  // The current value, not watched.
  Tensor value() const;
  // Replace the value; the new value must have the variable's dtype and shape.
  void assign(const Tensor& value);
  void assign_add(const Tensor& delta);
  void assign_sub(const Tensor& delta);

  // Keras' variable.constraint: a projection the optimizer applies after each update of this
  // variable (variable.assign(constraint(variable)); see keras/layers/constraints.h). Empty:
  // none. Written with kiln ops, so a traced training step records it.
  using ConstraintFn = std::function<Tensor(const Tensor&)>;
  void set_constraint(ConstraintFn constraint);
  const ConstraintFn& constraint() const;

  // Identity: two handles are equal when they share the variable.
  friend bool operator==(const Variable& a, const Variable& b) { return a.impl_ == b.impl_; }
  const void* handle_id() const { return impl_.get(); }

 private:
  friend bool detail::value_is_unshared(const Variable& v);
  struct Impl;
  void require_defined(const char* what) const;
  void check_assignable(const Tensor& v, const char* what) const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
