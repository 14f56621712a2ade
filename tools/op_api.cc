// The op API generator (tools/op_api.h): the C++ wrappers of kiln/frontend/ops_generated.h/.cc
// from the rows of ir/ops.def, and the one list of ops whose C++ API is written by hand.
#include "tools/op_api.h"

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

constexpr size_t kColumns = 100;  // .clang-format's ColumnLimit

// The ops whose C++ function is not "inputs, then the schema's attributes with its defaults",
// with why. Adding a row means generating its wrapper (the default for a row with a fixed number
// of inputs) or listing it here.
constexpr std::array kHandWritten{
    HandWrittenOp{"cast", true, "returns x itself when it already has the dtype"},
    HandWrittenOp{"select", true,
                  "named where (numpy's name) with cond, a, b; select is its alias"},
    HandWrittenOp{"conv2d", true,
                  "inputs named input, filter; padding comes before dilations (the schema has "
                  "strides, dilations, padding)"},
    HandWrittenOp{"conv2d_backprop_input", true,
                  "takes the input shape as a Shape argument, before filter and out_grad"},
    HandWrittenOp{"conv2d_backprop_filter", true,
                  "takes the filter shape as a Shape argument, between input and out_grad"},
    HandWrittenOp{"attention", true,
                  "q, k, v and an optional mask (a variadic row); scale defaults to 1 / sqrt(d), "
                  "d the last axis of q"},
    HandWrittenOp{"attention_grad", false,
                  "no C++ function: attention's gradient rule emits it "
                  "(frontend/grad_attention.cc)"},
    HandWrittenOp{"max_pool2d", true, "strides {} means pool_size (a default from pool_size)"},
    HandWrittenOp{"avg_pool2d", true, "strides {} means pool_size (a default from pool_size)"},
    HandWrittenOp{"max_pool2d_grad", false,
                  "no C++ function: max_pool2d's gradient rule emits it (frontend/grad_nn.cc)"},
    HandWrittenOp{"avg_pool2d_grad", false,
                  "no C++ function: avg_pool2d's gradient rule emits it (frontend/grad_nn.cc)"},
    HandWrittenOp{"transpose", true, "perm {} reverses the axes (a default from x's rank)"},
    HandWrittenOp{"broadcast_to", true,
                  "takes a Shape; returns x itself when it already has the shape"},
    HandWrittenOp{"broadcast_like", true,
                  "returns x itself when the shapes are equal and fully known; inputs x, like"},
    HandWrittenOp{"concat", true,
                  "takes a std::vector of tensors (a variadic row); one tensor is returned as is"},
    HandWrittenOp{"slice", true, "step {} means ones (a default from start's length)"},
    HandWrittenOp{"pad", true, "interior {} means zeros (a default from low's length)"},
    HandWrittenOp{"random_uniform", false,
                  "no ops.h function: creation.h's random_uniform and random_uniform_like take a "
                  "Shape or a tensor to shape like, and an int or tensor seed"},
    HandWrittenOp{"random_normal", false,
                  "no ops.h function: creation.h's random_normal and random_normal_like take a "
                  "Shape or a tensor to shape like, and an int or tensor seed"},
    HandWrittenOp{"random_int", false,
                  "no ops.h function: creation.h's random_integers and random_integers_like take "
                  "a Shape or a tensor to shape like, and an int or tensor seed"},
};

// Input names where the rule (one input: x; two: a, b) does not give today's C++ names.
const std::map<std::string_view, std::vector<std::string_view>>& input_names() {
  static const std::map<std::string_view, std::vector<std::string_view>> m{
      {"gather", {"params", "indices"}},
      {"scatter_add", {"updates", "indices"}},
      {"one_hot", {"indices"}},
  };
  return m;
}

constexpr const char* kReductionNote = "axes {} means all axes; negative axes count from the end.";
constexpr const char* kComparisonNote = "The result is bool.";

// What the row cannot say about an op's function: a line or two under its row's comment.
const std::map<std::string_view, std::string_view>& notes() {
  static const std::map<std::string_view, std::string_view> m{
      {"div", "Floating: IEEE division. Integers: truncates toward zero; a zero divisor throws."},
      {"gelu", "approximate=false: x * Phi(x) with erf; true: the tanh approximation."},
      {"equal", kComparisonNote},
      {"not_equal", kComparisonNote},
      {"less", kComparisonNote},
      {"less_equal", kComparisonNote},
      {"greater", kComparisonNote},
      {"greater_equal", kComparisonNote},
      {"sum", kReductionNote},
      {"mean", kReductionNote},
      {"max", kReductionNote},
      {"min", kReductionNote},
      {"prod", kReductionNote},
      {"logsumexp", kReductionNote},
      {"matmul", "Matrix product of the last two axes; leading (batch) axes broadcast."},
      {"reshape", "One dimension may be -1 (inferred)."},
      {"copy",
       "A copy of x in a buffer of its own (an identity for values; kept by graph passes)."},
      {"gather",
       "numpy take: params[..., indices, ...] along `axis`; indices must be in [0, dim)."},
      {"scatter_add",
       "The adjoint of gather: zeros with dimension `dim_size` at `axis`, updates added at "
       "indices."},
      {"element_count",
       "The number of elements of x over `axes` ({} = all) as a scalar of `dtype`, computed when "
       "the op runs (so it is right for unknown dimensions)."},
      {"all_reduce",
       "The sum of x over every process of kiln::distributed (every rank gets the same bits; the "
       "identity in a world of one process). Every rank must call it in the same order; traced, "
       "it is an all_reduce node. Its gradient is the all_reduce of the incoming gradient."},
  };
  return m;
}

const HandWrittenOp* find_hand_written(std::string_view name) {
  for (const HandWrittenOp& h : kHandWritten)
    if (h.op == name) return &h;
  return nullptr;
}

std::string cpp_type(AttrKind k) {
  switch (k) {
    case AttrKind::i64:
      return "int64_t";
    case AttrKind::f64:
      return "double";
    case AttrKind::boolean:
      return "bool";
    case AttrKind::str:
      return "const std::string&";
    case AttrKind::i64s:
      return "const Axes&";
    case AttrKind::dtype:
      return "DType";
  }
  return "?";
}

// The DType enumerator's name: the IR's short name, but for bool (b8).
std::string dtype_enumerator(DType t) {
  return t == DType::b8 ? "b8" : std::string(dtype_short_name(t));
}

// A schema default as a C++ expression: [] -> {}, [1, 1] -> {1, 1}, f32 -> DType::f32.
std::string cpp_default(const AttrValue& v) {
  switch (attr_kind_of(v)) {
    case AttrKind::i64s: {
      std::string s = attr_value_to_string(v);  // "[1, 1]"
      return "{" + s.substr(1, s.size() - 2) + "}";
    }
    case AttrKind::dtype:
      return "DType::" + dtype_enumerator(std::get<DType>(v));
    default:
      return attr_value_to_string(v);  // -1, 0.2, false, "valid"
  }
}

std::vector<std::string> inputs_of(const OpInfo& op) {
  auto it = input_names().find(op.name);
  if (it != input_names().end()) return {it->second.begin(), it->second.end()};
  if (op.arity == 1) return {"x"};
  if (op.arity == 2) return {"a", "b"};
  return {};
}

// clang-format's layout of `head(p1, p2, ...)tail` in 100 columns: on one line if it fits,
// else the parameters packed greedily with continuation lines aligned after the '('.
std::string wrap_call(const std::string& head, const std::vector<std::string>& params,
                      const std::string& tail) {
  std::string one = head + "(";
  for (size_t i = 0; i < params.size(); ++i) one += (i ? ", " : "") + params[i];
  one += ")" + tail;
  if (one.size() <= kColumns) return one;
  const std::string indent(head.size() + 1, ' ');
  std::string out = head + "(", line = out;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string piece = params[i] + (i + 1 < params.size() ? "," : ")" + tail);
    if (i > 0 && line.size() + 1 + piece.size() > kColumns) {
      out += "\n" + indent;
      line = indent;
    } else if (i > 0) {
      out += " ";
      line += " ";
    }
    out += piece;
    line += piece;
  }
  return out;
}

// `text` as `//` comment lines of at most 100 columns.
std::string comment(const std::string& text) {
  std::istringstream words(text);
  std::string out, line = "//", w;
  while (words >> w) {
    if (line.size() + 1 + w.size() > kColumns) {
      out += line + "\n";
      line = "//";
    }
    line += " " + w;
  }
  return out + line + "\n";
}

// The row as a sentence: "sum: unary; reduction; a numeric dtype (not bool); defaults axes = [],
// keepdims = false."
std::string row_summary(const OpInfo& op) {
  static const char* kArity[] = {"no inputs", "unary", "binary", "ternary"};
  std::string s =
      std::string(op.name) + ": " +
      (op.arity >= 0 && op.arity <= 3 ? kArity[op.arity] : std::to_string(op.arity) + " inputs");
  std::string traits;
  for (std::string_view t : trait_names(op.traits))
    traits += (traits.empty() ? "" : ", ") + std::string(t);
  if (!traits.empty()) s += "; " + traits;
  s += "; inputs of " + std::string(dtype_class_description(op.dtypes));
  std::string defaults;
  for (const AttrSpec& a : op.attrs)
    if (a.default_value)
      defaults +=
          (defaults.empty() ? "" : ", ") + a.name + " = " + attr_value_to_string(*a.default_value);
  if (!defaults.empty())
    s += "; default" + std::string(defaults.find(',') == std::string::npos ? "" : "s") + " " +
         defaults;
  return s + ".";
}

std::vector<const OpInfo*> generated_ops() {
  std::vector<const OpInfo*> out;
  for (const OpInfo& op : all_ops())
    if (op_api_decision(op).choice == OpApiChoice::Generated) out.push_back(&op);
  return out;
}

std::string kind_name(const OpInfo& op) {
  // OpKind has no name table of its own: the enumerator is the row's first column, which the
  // generated code needs. Rebuild it from ops.def.
  static const std::map<std::string_view, std::string_view> m{
#define KILN_OP(e, name, arity, traits, dtypes, bf16, fusion, codegen, rounding, attrs, rule) \
  {name, #e},
#include "kiln/ir/ops.def"
#undef KILN_OP
  };
  return std::string(m.at(op.name));
}

}  // namespace

std::span<const HandWrittenOp> hand_written_ops() { return kHandWritten; }

OpApiDecision op_api_decision(const OpInfo& op) {
  if (const HandWrittenOp* h = find_hand_written(op.name))
    return {h->in_ops_h ? OpApiChoice::HandWritten : OpApiChoice::NoFunction, std::string(h->why)};
  if (op.arity < 0)
    return {OpApiChoice::Undecided,
            "a variadic row: list it in tools/op_api.cc's kHandWritten with its C++ function"};
  if (inputs_of(op).size() != size_t(op.arity))
    return {OpApiChoice::Undecided,
            "its inputs need names: add them to tools/op_api.cc's input_names(), or list the op "
            "in kHandWritten"};
  bool defaulted = false;
  for (const AttrSpec& a : op.attrs) {
    if (defaulted && !a.default_value)
      return {OpApiChoice::Undecided,
              "attribute " + a.name +
                  " has no default but follows one that has: a C++ function cannot take them "
                  "in schema order; list the op in tools/op_api.cc's kHandWritten"};
    defaulted = defaulted || a.default_value.has_value();
  }
  return {OpApiChoice::Generated, "the row's inputs and attributes, in order, with its defaults"};
}

std::string op_api_signature(const OpInfo& op, bool with_defaults) {
  std::vector<std::string> params;
  for (const std::string& in : inputs_of(op)) params.push_back("const Tensor& " + in);
  for (const AttrSpec& a : op.attrs) {
    std::string p = cpp_type(a.kind) + " " + a.name;
    if (with_defaults && a.default_value) p += " = " + cpp_default(*a.default_value);
    params.push_back(p);
  }
  return wrap_call("Tensor " + std::string(op.name), params, "");
}

std::string op_api_header() {
  std::string s =
      "// Generated from the op table (kiln/ir/ops.def) by `kiln op-api header` "
      "(tools/op_api.cc):\n"
      "// do not edit; run scripts/gen-op-api.sh after changing a row (the ctest\n"
      "// tools.op_api_is_current checks it). The C++ function of every op that is exactly its\n"
      "// tensor inputs, then its attributes in schema order with the schema's defaults. Include\n"
      "// kiln/frontend/ops.h, which declares the other ops by hand (`kiln op-api list`).\n"
      "#pragma once\n\n"
      "#include <cstdint>\n#include <string>\n#include <vector>\n\n"
      "#include \"kiln/frontend/tensor.h\"\n\n"
      "namespace kiln {\n\n"
      "using Axes = std::vector<int64_t>;\n";
  for (const OpInfo* op : generated_ops()) {
    s += '\n';  // not "\n" + comment(...): GCC 12 warns falsely of a huge memcpy in that insert
    s += comment(row_summary(*op));
    auto note = notes().find(op->name);
    if (note != notes().end()) s += comment(std::string(note->second));
    s += op_api_signature(*op, true) + ";\n";
  }
  return s + "\n}  // namespace kiln\n";
}

std::string op_api_source() {
  std::string s =
      "// Generated from the op table (kiln/ir/ops.def) by `kiln op-api source` "
      "(tools/op_api.cc):\n"
      "// do not edit; run scripts/gen-op-api.sh after changing a row. Thin wrappers over the\n"
      "// dispatcher, declared in ops_generated.h.\n"
      "#include \"kiln/frontend/dispatch.h\"\n"
      "#include \"kiln/frontend/ops.h\"\n\n"
      "namespace kiln {\n\n"
      "using detail::apply;\n";
  for (const OpInfo* op : generated_ops()) {
    const std::string sig = op_api_signature(*op, false);
    std::string ins;
    for (const std::string& in : inputs_of(*op)) ins += (ins.empty() ? "" : ", ") + in;
    std::string call_head = "apply(OpKind::" + kind_name(*op) + ", {" + ins + "}";
    std::string attrs;
    for (const AttrSpec& a : op->attrs)
      attrs += (attrs.empty() ? "" : ", ") + ("{\"" + a.name + "\", " + a.name + "}");
    std::string ret;
    if (attrs.empty()) {
      ret = "return " + call_head + ");";
    } else {
      ret = "return " + call_head + ", Attrs{" + attrs + "});";
      if (ret.size() + 2 > kColumns)
        ret = "return " + call_head + ",\n" + std::string(15, ' ') + "Attrs{" + attrs + "});";
    }
    s += "\n";
    const bool one_line = sig.find('\n') == std::string::npos &&
                          ret.find('\n') == std::string::npos &&
                          sig.size() + ret.size() + 6 <= kColumns;
    if (one_line)
      s += sig + " { " + ret + " }\n";
    else
      s += sig + " {\n  " + ret + "\n}\n";
  }
  return s + "\n}  // namespace kiln\n";
}

std::string op_api_list() {
  std::string s =
      "| op | C++ API | why |\n"
      "|---|---|---|\n";
  for (const OpInfo& op : all_ops()) {
    OpApiDecision d = op_api_decision(op);
    const char* what = d.choice == OpApiChoice::Generated     ? "generated"
                       : d.choice == OpApiChoice::HandWritten ? "hand-written (ops.h)"
                       : d.choice == OpApiChoice::NoFunction  ? "none"
                                                              : "undecided";
    s += "| `" + std::string(op.name) + "` | " + what + " | " + d.why + " |\n";
  }
  return s;
}

}  // namespace kiln::tools
