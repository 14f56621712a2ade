#include "kiln/frontend/tensor.h"

#include <fmt/format.h>

#include <atomic>
#include <ostream>

namespace kiln {
namespace {
std::atomic<uint64_t> g_next_id{1};
}

Tensor::Tensor(runtime::Array value)
    : impl_(std::make_shared<const detail::TensorImpl>(detail::TensorImpl{
          std::move(value), g_next_id.fetch_add(1, std::memory_order_relaxed), nullptr})) {}

Tensor Tensor::symbolic(const TensorType& type, std::shared_ptr<const detail::SymbolicInfo> info) {
  Tensor t;
  t.impl_ = std::make_shared<const detail::TensorImpl>(
      detail::TensorImpl{runtime::Array{type.dtype, type.shape, nullptr},
                         g_next_id.fetch_add(1, std::memory_order_relaxed), std::move(info)});
  return t;
}

bool Tensor::is_symbolic() const { return impl_ && !impl_->value.storage; }
bool Tensor::is_traced() const { return impl_ && impl_->symbolic && impl_->symbolic->is_traced(); }

const detail::SymbolicInfo* Tensor::symbolic_info() const {
  return impl_ ? impl_->symbolic.get() : nullptr;
}

void Tensor::require_defined(const char* what) const {
  if (!impl_)
    throw Error(
        fmt::format("Tensor::{}: the tensor is undefined (default-constructed, or an "
                    "unconnected gradient); check defined() first",
                    what));
}

DType Tensor::dtype() const {
  require_defined("dtype");
  return impl_->value.dtype;
}

const Shape& Tensor::shape() const {
  require_defined("shape");
  return impl_->value.shape;
}

uint64_t Tensor::id() const {
  require_defined("id");
  return impl_->id;
}

const runtime::Array& Tensor::array() const {
  require_defined("array");
  if (is_traced())
    throw Error(fmt::format(
        "the tensor of type {} is a traced value inside kiln::function: it has no data while "
        "the function is traced (item(), to_vector() and printing need data). Compute with kiln "
        "ops instead, use kiln::cond for data-dependent branches, or return the tensor from the "
        "function and read it after the call",
        type().to_string()));
  if (!impl_->value.storage)
    throw Error(
        fmt::format("the tensor of shape {} and dtype {} is symbolic (a functional-model "
                    "input or computed from one): it has no data until the model runs",
                    impl_->value.shape.to_string(), dtype_name(impl_->value.dtype)));
  return impl_->value;
}

bool Tensor::is_sole_owner() const {
  return impl_ != nullptr && impl_.use_count() == 1 && impl_->value.storage &&
         impl_->value.storage.use_count() == 1 && !impl_->value.storage->is_borrowed();
}

Tensor Tensor::keras_mask() const { return keras_mask_ ? *keras_mask_ : Tensor(); }

Tensor Tensor::with_keras_mask(const Tensor& mask) const {
  require_defined("with_keras_mask");
  Tensor t = *this;
  t.keras_mask_ = mask.defined() ? std::make_shared<const Tensor>(mask) : nullptr;
  return t;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

namespace detail {
void throw_item_size(const Tensor& t) {
  throw Error(
      fmt::format("item(): the tensor has shape {} ({} elements); item() needs exactly one "
                  "element, use to_vector() instead",
                  t.shape().to_string(), t.size()));
}
}  // namespace detail

}  // namespace kiln
