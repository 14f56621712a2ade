#include "kiln/codegen/decompose.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <unordered_map>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"

namespace kiln::codegen {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

template <typename T>
std::shared_ptr<const ir::Literal> scalar_literal(DType dtype, T v) {
  if (dtype == DType::f32) {
    float f = float(v);
    return ir::Literal::copy_of({dtype, Shape{}}, &f);
  }
  double d = double(v);
  return ir::Literal::copy_of({DType::f64, Shape{}}, &d);
}

class Decomposer {
 public:
  explicit Decomposer(Graph& out) : g_(out) {}

  Value* scalar(DType dtype, double v) {
    return g_.add_constant(scalar_literal(dtype, v))->output();
  }
  Value* op(OpKind k, std::vector<Value*> in, Attrs attrs = {}) {
    return g_.add_op(k, std::move(in), std::move(attrs))->output();
  }
  // A bf16 composite op (softmax, log_softmax, logsumexp) is decomposed in float32 and its
  // result rounded once, as its eager kernel computes it (ops.def: ViaF32); its float32
  // intermediates are never rounded to bf16.
  Value* widened(Value* x) {
    return x->dtype() == DType::bf16 ? op(OpKind::Cast, {x}, {{"dtype", DType::f32}}) : x;
  }
  Value* narrowed(Value* x, DType to) {
    return to == DType::bf16 && x->dtype() != to ? op(OpKind::Cast, {x}, {{"dtype", to}}) : x;
  }
  Value* reduce(OpKind k, Value* x, std::vector<int64_t> axes) {
    return op(k, {x}, {{"axes", axes}, {"keepdims", true}});
  }

  // The softmax's exponentials e = exp(x - m) and their sum s (keepdims), or null for an
  // empty axis.
  struct Parts {
    Value* e = nullptr;
    Value* s = nullptr;
  };
  Value* softmax(Value* x, int64_t axis, bool log, Parts* parts) {
    // An empty axis: the result is empty too (and max has no identity to reduce it with).
    const int rank = x->shape().rank();
    if (x->shape()[size_t(axis < 0 ? axis + rank : axis)] == 0) return x;
    Value* m = reduce(OpKind::Max, x, {axis});
    Value* d = op(OpKind::Sub, {x, m});
    Value* e = op(OpKind::Exp, {d});
    Value* s = reduce(OpKind::Sum, e, {axis});
    *parts = {e, s};
    if (log) return op(OpKind::Sub, {d, op(OpKind::Log, {s})});
    return op(OpKind::Div, {e, s});
  }

  Value* logsumexp(Value* x, const std::vector<int64_t>& axes, bool keepdims,
                   const TensorType& out) {
    DType t = x->dtype();
    // A reduction over an empty axis is -inf (the eager kernel's identity); max has none.
    const int rank = x->shape().rank();
    bool empty = axes.empty() && x->shape().num_elements() == 0;
    for (int64_t a : axes) empty |= x->shape()[size_t(a < 0 ? a + rank : a)] == 0;
    if (empty)
      return op(
          OpKind::BroadcastTo, {scalar(t, -std::numeric_limits<double>::infinity())},
          {{"shape", std::vector<int64_t>(out.shape.dims().begin(), out.shape.dims().end())}});
    Value* m = reduce(OpKind::Max, x, axes);
    Value* finite = op(OpKind::Less,
                       {op(OpKind::Abs, {m}), scalar(t, std::numeric_limits<double>::infinity())});
    Value* shift = op(OpKind::Select, {finite, m, scalar(t, 0.0)});
    Value* s = reduce(OpKind::Sum, op(OpKind::Exp, {op(OpKind::Sub, {x, shift})}), axes);
    Value* r = op(OpKind::Add, {op(OpKind::Log, {s}), shift});
    if (!keepdims)
      r = op(OpKind::Reshape, {r},
             {{"shape", std::vector<int64_t>(out.shape.dims().begin(), out.shape.dims().end())}});
    return r;
  }

 private:
  Graph& g_;
};

}  // namespace

std::unique_ptr<Graph> decompose_for_codegen(const Graph& body, const Node* as_parameter) {
  auto out = std::make_unique<Graph>(body.name());
  std::unordered_map<const Value*, Value*> map;
  for (const auto& p : body.parameters()) map[p.get()] = out->add_parameter(p->type());
  if (as_parameter != nullptr)
    map[as_parameter->output()] = out->add_parameter(as_parameter->output()->type());
  Decomposer d(*out);
  // log_softmax outputs -> their exponentials and sum: exp(log_softmax(x)) is e / s.
  std::unordered_map<const Value*, Decomposer::Parts> log_softmax_parts;
  auto in = [&](const Node& n) {
    std::vector<Value*> v;
    for (const Value* x : n.inputs()) v.push_back(map.at(x));
    return v;
  };
  for (const auto& up : body.nodes()) {
    const Node& n = *up;
    if (&n == as_parameter) continue;
    for (size_t i = 0; i < n.num_outputs(); ++i)
      if (!n.output(i)->shape().is_fully_known())
        throw Error(
            fmt::format("codegen: kernel {} has a value of unknown shape {} ({}); "
                        "kernels are compiled for concrete shapes",
                        body.name(), n.output(i)->shape().to_string(), n.op_name()));
    if (n.kind() == NodeKind::kConstant) {
      map[n.output()] = out->add_constant(n.literal())->output();
      continue;
    }
    KILN_ASSERT(n.kind() == NodeKind::kOp, "kernel bodies hold op and constant nodes only");
    const Attrs& a = n.attrs();
    const TensorType& type = n.output()->type();
    Value* r = nullptr;
    switch (n.op()) {
      case OpKind::Softmax:
      case OpKind::LogSoftmax: {
        int64_t axis = a.get_int("axis", "softmax");
        Decomposer::Parts parts;
        Value* x = d.widened(map.at(n.input(0)));
        r = d.narrowed(d.softmax(x, axis, n.op() == OpKind::LogSoftmax, &parts), type.dtype);
        if (n.op() == OpKind::LogSoftmax && parts.e != nullptr && type.dtype != DType::bf16)
          log_softmax_parts[n.output()] = parts;
        break;
      }
      case OpKind::Exp: {
        // A log_softmax gradient's exp(log_softmax(x)) is the softmax e / s: the kernel
        // reuses the exponentials the forward sum computed instead of a second exp per element
        // (and one division per row).
        auto it = log_softmax_parts.find(n.input(0));
        if (it == log_softmax_parts.end()) {
          r = out->add_op(n.op(), in(n), a)->output();
          break;
        }
        Value* inverse = d.op(OpKind::Div, {d.scalar(type.dtype, 1.0), it->second.s});
        r = d.op(OpKind::Mul, {it->second.e, inverse});
        break;
      }
      case OpKind::LogSumExp:
        r = d.narrowed(d.logsumexp(d.widened(map.at(n.input(0))), a.get_ints("axes", "logsumexp"),
                                   a.get_bool("keepdims", "logsumexp"), type),
                       type.dtype);
        break;
      case OpKind::ElementCount: {
        const Shape& s = n.input(0)->shape();
        const auto& axes = a.get_ints("axes", "element_count");
        int64_t count = 1;
        if (axes.empty()) {
          count = s.num_elements();
        } else {
          for (int64_t ax : axes) count *= s[size_t(ax < 0 ? ax + s.rank() : ax)];
        }
        DType t = a.get_dtype("dtype", "element_count");
        std::vector<uint8_t> bytes(dtype_size(t));
        switch (t) {
          case DType::f32: {
            float v = float(count);
            std::memcpy(bytes.data(), &v, 4);
            break;
          }
          case DType::f64: {
            double v = double(count);
            std::memcpy(bytes.data(), &v, 8);
            break;
          }
          case DType::bf16: {  // one rounding of the count (ir/bfloat16.h)
            uint16_t v = bfloat16::from_int64(count).bits;
            std::memcpy(bytes.data(), &v, 2);
            break;
          }
          case DType::i32: {
            int32_t v = int32_t(count);
            std::memcpy(bytes.data(), &v, 4);
            break;
          }
          case DType::i64: {
            int64_t v = count;
            std::memcpy(bytes.data(), &v, 8);
            break;
          }
          default: {
            uint8_t v = uint8_t(count);
            bytes[0] = v;
            break;
          }
        }
        r = out->add_constant(ir::Literal::copy_of({t, Shape{}}, bytes.data()))->output();
        break;
      }
      default:
        r = out->add_op(n.op(), in(n), a)->output();
        break;
    }
    map[n.output()] = r;
  }
  std::vector<Value*> outs;
  for (const Value* v : body.outputs()) outs.push_back(map.at(v));
  out->set_outputs(std::move(outs));
  return out;
}

}  // namespace kiln::codegen
