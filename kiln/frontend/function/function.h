// kiln::function: TensorFlow's tf.function for C++.
//
//   auto step = kiln::function([&](const Tensor& x, const Tensor& y) { ... return loss; },
//                              {.name = "train_step"});
//   Tensor loss = step(x, y);   // first call with this signature: trace, then run the graph
//
// A call computes a signature from its arguments: the dtype and shape of each Tensor (and of
// each Tensor in a std::vector<Tensor>) plus a hash of the other arguments (numbers, bools,
// strings, enums, pointers). A new signature traces: the callable runs once on symbolic tensors
// while ops, layers, gradient tapes and optimizers record an IR graph (a ConcreteFunction).
// Calls with a known signature run that graph without running the callable again.
//
// The callable may return Tensor, std::vector<Tensor>, a std::tuple/std::pair of Tensors, or
// nothing. Inside the trace kiln::executing_eagerly() is false; variables may be created on
// the first trace only; reading a variable captures it (not a constant); assignments become
// side-effecting nodes. Calling a function inside another function's trace traces inline.
// Called while a GradientTape records, a function still runs its graph (compiled) and is
// recorded on the tape as one op whose gradient is its gradient graph
// (frontend/function/function_gradient.h); recording tapes never see a trace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/frontend/function/concrete_function.h"

namespace kiln {

struct FunctionOptions {
  // Name of the graphs and of messages (default "function").
  std::string name{};
  // Fixes the signature: calls must conform (unknown dimensions, -1, accept any size) and one
  // shape-polymorphic graph serves them all.
  std::optional<std::vector<TensorSpec>> input_signature{};
  // Relax dimensions that change between calls to unknown (one more trace, then none).
  bool reduce_retracing = false;
  // How concrete functions run: JIT-compiled or on the reference executor; unset: the
  // default_execution_mode() (compiled unless KILN_EXECUTION_MODE / set_default_execution_mode).
  std::optional<ExecutionMode> mode{};
};

namespace detail {

// The non-template part of a kiln::function: signature cache, tracing, retrace warnings.
// Thread-safe: concurrent calls share the cache; a new signature is traced once.
class FunctionCore {
 public:
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>& args)>;
  explicit FunctionCore(FunctionOptions options);
  ~FunctionCore();

  // Runs (tracing first when the signature is new). Inside another trace: runs body inline.
  std::vector<Tensor> call(const std::vector<Tensor>& args, uint64_t static_hash, const Body& body);
  // The concrete function these arguments select (traced if needed, not run).
  ConcreteFunction concrete(const std::vector<Tensor>& args, uint64_t static_hash,
                            const Body& body);
  ConcreteFunction concrete_for_types(const std::vector<TensorType>& types, uint64_t static_hash,
                                      const Body& body);
  int tracing_count() const;
  const std::string& name() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

inline void hash_combine(uint64_t& h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
}

// Collects the tensors of one argument and hashes the rest.
template <typename T>
void collect_argument(const T& arg, std::vector<Tensor>& tensors, uint64_t& hash) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    tensors.push_back(arg);
    hash_combine(hash, 1);
  } else if constexpr (std::is_same_v<U, std::vector<Tensor>>) {
    tensors.insert(tensors.end(), arg.begin(), arg.end());
    hash_combine(hash, 2 + arg.size());
  } else if constexpr (std::is_enum_v<U>) {
    hash_combine(
        hash, std::hash<std::underlying_type_t<U>>{}(static_cast<std::underlying_type_t<U>>(arg)));
  } else if constexpr (std::is_convertible_v<const U&, std::string_view>) {
    // Strings by content, C strings too (char arrays and pointers; a null pointer is "").
    if constexpr (std::is_pointer_v<U>) {
      const std::remove_pointer_t<U>* p = arg;
      hash_combine(hash, std::hash<std::string_view>{}(p ? std::string_view(p) : ""));
    } else {
      hash_combine(hash, std::hash<std::string_view>{}(std::string_view(arg)));
    }
  } else if constexpr (std::is_arithmetic_v<U> || std::is_pointer_v<U>) {
    hash_combine(hash, std::hash<U>{}(arg));
  } else {
    static_assert(sizeof(U) == 0,
                  "kiln::function arguments must be Tensor, std::vector<Tensor>, numbers, "
                  "bools, enums, strings or pointers; capture other objects in the lambda");
  }
}

// The argument as the traced callable sees it: tensors replaced by their symbolic stand-ins.
template <typename T>
decltype(auto) substitute_argument(T&& arg, const std::vector<Tensor>& symbolic, size_t& next) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    return Tensor(symbolic[next++]);
  } else if constexpr (std::is_same_v<U, std::vector<Tensor>>) {
    std::vector<Tensor> out(symbolic.begin() + long(next),
                            symbolic.begin() + long(next + arg.size()));
    next += arg.size();
    return out;
  } else {
    return std::forward<T>(arg);
  }
}

template <typename R>
std::vector<Tensor> flatten_result(R&& r) {
  using U = std::decay_t<R>;
  if constexpr (std::is_same_v<U, Tensor>) {
    return {r};
  } else if constexpr (std::is_same_v<U, std::vector<Tensor>>) {
    return r;
  } else {
    return std::apply([](const auto&... t) { return std::vector<Tensor>{Tensor(t)...}; }, r);
  }
}

template <typename R>
R unflatten_result(std::vector<Tensor>& out) {
  if constexpr (std::is_same_v<R, Tensor>) {
    return out.at(0);
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return out;
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{out.at(I)...}; }
    (std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

}  // namespace detail

template <typename F>
class Function {
 public:
  Function(F f, FunctionOptions options)
      : f_(std::make_shared<F>(std::move(f))),
        core_(std::make_shared<detail::FunctionCore>(std::move(options))) {}

  template <typename... Args>
  auto operator()(Args&&... args) const {
    using R = std::decay_t<std::invoke_result_t<F&, Args&&...>>;
    std::vector<Tensor> tensors;
    uint64_t hash = 0;
    (detail::collect_argument(args, tensors, hash), ...);
    std::vector<Tensor> out = core_->call(tensors, hash, body<R>(args...));
    if constexpr (!std::is_void_v<R>) return detail::unflatten_result<R>(out);
  }

  // The concrete function for these arguments (traced if new; not run).
  template <typename... Args>
  ConcreteFunction concrete(Args&&... args) const {
    using R = std::decay_t<std::invoke_result_t<F&, Args&&...>>;
    std::vector<Tensor> tensors;
    uint64_t hash = 0;
    (detail::collect_argument(args, tensors, hash), ...);
    return core_->concrete(tensors, hash, body<R>(args...));
  }

  // The concrete function for a callable of tensors only, one spec per parameter (unknown
  // dimensions allowed), traced without example tensors.
  template <typename... Specs>
  ConcreteFunction get_concrete_function(const Specs&... specs) const {
    static_assert((std::is_same_v<Specs, TensorSpec> && ...), "pass one TensorSpec per argument");
    std::vector<TensorType> types{specs.type()...};
    uint64_t hash = 0;
    for (size_t i = 0; i < sizeof...(Specs); ++i) detail::hash_combine(hash, 1);
    auto run = [f = f_](const std::vector<Tensor>& a) {
      return [&]<size_t... I>(std::index_sequence<I...>) {
        using R = std::decay_t<std::invoke_result_t<F&, decltype((void)I, Tensor())...>>;
        if constexpr (std::is_void_v<R>) {
          (*f)(a[I]...);
          return std::vector<Tensor>{};
        } else {
          return detail::flatten_result((*f)(a[I]...));
        }
      }
      (std::make_index_sequence<sizeof...(Specs)>{});
    };
    return core_->concrete_for_types(types, hash, run);
  }

  int tracing_count() const { return core_->tracing_count(); }
  const std::string& name() const { return core_->name(); }

 private:
  template <typename R, typename... Args>
  detail::FunctionCore::Body body(Args&... args) const {
    return [this, &args...](const std::vector<Tensor>& symbolic) -> std::vector<Tensor> {
      size_t next = 0;
      // Braced initialisation evaluates left to right, so tensors are taken in order.
      std::tuple<decltype(detail::substitute_argument(args, symbolic, next))...> call_args{
          detail::substitute_argument(args, symbolic, next)...};
      if constexpr (std::is_void_v<R>) {
        std::apply(*f_, std::move(call_args));
        return {};
      } else {
        return detail::flatten_result(std::apply(*f_, std::move(call_args)));
      }
    };
  }

  std::shared_ptr<F> f_;
  std::shared_ptr<detail::FunctionCore> core_;
};

template <typename F>
Function<std::decay_t<F>> function(F&& f, FunctionOptions options = {}) {
  return Function<std::decay_t<F>>(std::forward<F>(f), std::move(options));
}

}  // namespace kiln
