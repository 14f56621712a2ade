#include "frontend/variable.h"

#include <fmt/format.h>

#include "frontend/ops.h"
#include "frontend/tape_recorder.h"

namespace kiln {

struct Variable::Impl {
  std::string name;
  bool trainable;
  Tensor value;
};

Variable::Variable(std::string name, const Tensor& initial_value, bool trainable) {
  if (!initial_value.defined())
    throw Error(fmt::format("Variable \"{}\": the initial value is undefined", name));
  if (initial_value.is_symbolic())
    throw Error(
        fmt::format("Variable \"{}\": the initial value must be concrete, not symbolic", name));
  impl_ = std::make_shared<Impl>(Impl{std::move(name), trainable, initial_value});
}

void Variable::require_defined(const char* what) const {
  if (!impl_)
    throw Error(
        fmt::format("Variable::{}: the variable handle is empty (default-constructed)", what));
}

const std::string& Variable::name() const {
  require_defined("name");
  return impl_->name;
}
DType Variable::dtype() const { return value().dtype(); }
const Shape& Variable::shape() const {
  require_defined("shape");
  return impl_->value.shape();
}
bool Variable::trainable() const {
  require_defined("trainable");
  return impl_->trainable;
}
void Variable::set_trainable(bool trainable) {
  require_defined("set_trainable");
  impl_->trainable = trainable;
}

Tensor Variable::value() const {
  require_defined("value");
  return impl_->value;
}

Tensor Variable::read() const {
  require_defined("read");
  if (impl_->trainable && detail::tapes_recording() && is_floating(impl_->value.dtype()))
    detail::watch_on_tapes(impl_->value);
  return impl_->value;
}

void Variable::assign(const Tensor& v) {
  require_defined("assign");
  if (!v.defined() || v.is_symbolic())
    throw Error(fmt::format("Variable \"{}\": assign needs a concrete tensor", impl_->name));
  if (!(v.type() == impl_->value.type()))
    throw Error(fmt::format("Variable \"{}\" is {} {}; cannot assign a value of {} {}", impl_->name,
                            dtype_name(impl_->value.dtype()), impl_->value.shape().to_string(),
                            dtype_name(v.dtype()), v.shape().to_string()));
  impl_->value = v;
}

void Variable::assign_add(const Tensor& delta) { assign(add(value(), cast(delta, dtype()))); }
void Variable::assign_sub(const Tensor& delta) { assign(sub(value(), cast(delta, dtype()))); }

}  // namespace kiln
