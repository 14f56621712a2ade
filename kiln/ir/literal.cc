#include "kiln/ir/literal.h"

#include <cstdlib>
#include <cstring>

namespace kiln::ir {

Literal::Literal(TensorType type, std::shared_ptr<const void> owner, const void* data)
    : type_(std::move(type)), owner_(std::move(owner)), data_(data) {
  KILN_ASSERT(type_.shape.is_fully_known(), "a literal needs a fully known shape");
}

std::shared_ptr<const Literal> Literal::copy_of(TensorType type, const void* bytes) {
  size_t n = size_t(type.shape.num_elements()) * dtype_size(type.dtype);
  size_t padded = (n + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, padded == 0 ? 64 : padded);
  if (p == nullptr) throw Error("out of memory allocating an IR literal");
  if (n > 0) std::memcpy(p, bytes, n);
  std::shared_ptr<const void> owner(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  return std::make_shared<Literal>(std::move(type), owner, p);
}

bool Literal::is_splat() const {
  size_t es = dtype_size(type_.dtype);
  int64_t n = num_elements();
  const auto* b = static_cast<const unsigned char*>(data_);
  for (int64_t i = 1; i < n; ++i)
    if (std::memcmp(b, b + size_t(i) * es, es) != 0) return false;
  return true;
}

double Literal::as_double(int64_t i) const {
  return visit_storage(type_.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bfloat16>)
      return double(static_cast<const T*>(data_)[i].to_float());
    else
      return double(static_cast<const T*>(data_)[i]);
  });
}

bool Literal::equals(const Literal& other) const {
  return type_ == other.type_ && std::memcmp(data_, other.data_, byte_size()) == 0;
}

}  // namespace kiln::ir
