#include "kiln/frontend/variable.h"

#include <fmt/format.h>

#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"

namespace kiln {

struct Variable::Impl {
  std::string name;
  bool trainable;
  Tensor value;
  ConstraintFn constraint;
};

Variable::Variable(std::string name, const Tensor& initial_value, bool trainable) {
  if (!initial_value.defined())
    throw Error(fmt::format("Variable \"{}\": the initial value is undefined", name));
  if (initial_value.is_symbolic())
    throw Error(
        fmt::format("Variable \"{}\": the initial value must be concrete, not symbolic", name));
  if (detail::TraceContext* ctx = detail::TraceContext::current();
      ctx && !ctx->owner().allow_variable_creation)
    throw Error(fmt::format(
        "function \"{}\" tried to create variables on a non-first call (variable \"{}\"); "
        "create variables on the first call only (build layers and optimizers before, or in "
        "the first trace), or use a new kiln::function",
        ctx->owner().function_name, name));
  impl_ = std::make_shared<Impl>(Impl{std::move(name), trainable, initial_value, nullptr});
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
DType Variable::dtype() const {
  require_defined("dtype");
  return impl_->value.dtype();
}
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
  if (detail::TraceContext* ctx = detail::TraceContext::current()) return ctx->read_variable(*this);
  return impl_->value;
}

Tensor Variable::read() const {
  require_defined("read");
  Tensor t = value();
  if (impl_->trainable && detail::tapes_recording() && is_floating(impl_->value.dtype()))
    detail::watch_on_tapes(t);
  return t;
}

void Variable::check_assignable(const Tensor& v, const char* what) const {
  require_defined(what);
  if (!v.defined())
    throw Error(fmt::format("Variable \"{}\": {} got an undefined tensor", impl_->name, what));
  if (v.is_placeholder())
    throw Error(
        fmt::format("Variable \"{}\": {} needs a concrete or traced tensor, not a "
                    "functional-model placeholder",
                    impl_->name, what));
  if (!(v.type() == impl_->value.type()))
    throw Error(fmt::format("Variable \"{}\" is {} {}; cannot {} a value of {} {}", impl_->name,
                            dtype_name(impl_->value.dtype()), impl_->value.shape().to_string(),
                            what, dtype_name(v.dtype()), v.shape().to_string()));
}

void Variable::assign(const Tensor& v) {
  check_assignable(v, "assign");
  if (detail::TraceContext* ctx = detail::TraceContext::current()) {
    ctx->assign_variable(ir::NodeKind::kAssign, *this, v);
    return;
  }
  if (v.is_traced())
    throw Error(
        fmt::format("Variable \"{}\": assign got a traced tensor outside its "
                    "kiln::function; traced values have no data after tracing",
                    impl_->name));
  impl_->value = v;
}

void Variable::assign_add(const Tensor& delta) {
  if (detail::TraceContext* ctx = detail::TraceContext::current()) {
    Tensor d = cast(delta, dtype());
    check_assignable(d, "assign_add");
    ctx->assign_variable(ir::NodeKind::kAssignAdd, *this, d);
    return;
  }
  assign(add(value(), cast(delta, dtype())));
}

void Variable::assign_sub(const Tensor& delta) {
  if (detail::TraceContext* ctx = detail::TraceContext::current()) {
    Tensor d = cast(delta, dtype());
    check_assignable(d, "assign_sub");
    ctx->assign_variable(ir::NodeKind::kAssignSub, *this, d);
    return;
  }
  assign(sub(value(), cast(delta, dtype())));
}

void Variable::set_constraint(ConstraintFn constraint) {
  require_defined("set_constraint");
  impl_->constraint = std::move(constraint);
}

const Variable::ConstraintFn& Variable::constraint() const {
  require_defined("constraint");
  return impl_->constraint;
}

namespace detail {
bool value_is_unshared(const Variable& v) { return v.impl_ && v.impl_->value.is_sole_owner(); }
}  // namespace detail

}  // namespace kiln
