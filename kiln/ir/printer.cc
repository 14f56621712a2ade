#include "kiln/ir/printer.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "kiln/ir/value_numbering.h"

namespace kiln::ir {
namespace {

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!start(s[0])) return false;
  for (char c : s)
    if (!start(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

// Shortest text that reads back (std::from_chars) to exactly `v` in T; always has '.' or 'e'.
template <typename T>
std::string format_float(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  KILN_ASSERT(ec == std::errc(), "to_chars failed on a float");
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string format_bf16(bfloat16 v) {
  const float f = v.to_float();
  if (std::isnan(f) || std::isinf(f)) return format_float(f);
  for (int digits = 1;; ++digits) {  // at most 9 (float32's round-trip digits)
    std::string s = fmt::format("{:.{}g}", double(f), digits);
    double back = 0;
    std::from_chars(s.data(), s.data() + s.size(), back);
    if (bfloat16::from_double(back).bits == v.bits || digits >= 9) {
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      return s;
    }
  }
}

namespace {

std::string element_to_string(const Literal& lit, int64_t i) {
  return visit_storage(lit.type().dtype, [&](auto tag) -> std::string {
    using T = typename decltype(tag)::type;
    T v = lit.data_as<T>()[i];
    if constexpr (std::is_same_v<T, bfloat16>) {
      return format_bf16(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return format_float(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      return v ? "true" : "false";
    } else {
      return std::to_string(int64_t(v));
    }
  });
}

// `name=value` of an op attribute; an int stored for a float attribute (which the op table
// accepts) prints as a float, as the parser reads it back.
std::string attr_to_string(const OpInfo& op, const std::string& name, const AttrValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return quote_ir_string(*s);
  if (const auto* i = std::get_if<int64_t>(&v)) {
    for (const AttrSpec& spec : op.attrs)
      if (spec.name == name && spec.kind == AttrKind::f64)
        return attr_value_to_string(AttrValue(double(*i)));
  }
  return attr_value_to_string(v);
}

class Printer {
 public:
  std::string out;

  void graph(const Graph& g) {
    ValueNumbering num(g);
    out += "graph @";
    out += is_identifier(g.name()) ? g.name() : quote_ir_string(g.name());
    signature(g, num);
    out += " {\n";
    body(g, num, 1);
    out += "}\n";
  }

 private:
  void indent(int level) { out.append(size_t(2 * level), ' '); }

  void signature(const Graph& g, const ValueNumbering& num) {
    out += "(";
    for (size_t i = 0; i < g.parameters().size(); ++i) {
      if (i) out += ", ";
      const Value* p = g.parameter(i);
      out += fmt::format("{}: {}", num.ref(p), p->type().to_string());
    }
    out += ") -> (";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      if (i) out += ", ";
      out += g.outputs()[i]->type().to_string();
    }
    out += ")";
  }

  void subgraph(std::string_view label, const Graph& g, int level) {
    ValueNumbering num(g);
    indent(level);
    out += label;
    out += " ";
    signature(g, num);
    out += " {\n";
    body(g, num, level + 1);
    indent(level);
    out += "}\n";
  }

  void body(const Graph& g, const ValueNumbering& num, int level) {
    if (!g.variables().empty()) {
      indent(level);
      out += "variables {\n";
      for (size_t i = 0; i < g.variables().size(); ++i) {
        const GraphVariable& v = g.variable(i);
        indent(level + 1);
        out += fmt::format("${} = {} : {}", i, quote_ir_string(v.name), v.type.to_string());
        if (v.trainable) out += " trainable";
        if (v.read) out += " read";
        if (v.written) out += " write";
        out += fmt::format(" -> {}\n", num.ref(v.entry));
      }
      indent(level);
      out += "}\n";
    }
    for (const auto& n : g.nodes()) node(*n, num, level);
    indent(level);
    out += "return";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      out += i ? ", " : " ";
      out += num.ref(g.outputs()[i]);
    }
    out += "\n";
  }

  void operands(const Node& n, const ValueNumbering& num) {
    out += "(";
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      if (i) out += ", ";
      out += num.ref(n.input(i));
    }
    out += ")";
  }

  void output_types(const Node& n) {
    if (n.num_outputs() == 0) return;
    out += " : ";
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      if (i) out += ", ";
      out += n.output(i)->type().to_string();
    }
  }

  void metadata(const Node& n) {
    if (!n.name().empty()) out += fmt::format(" name({})", quote_ir_string(n.name()));
    const SourceLocation& loc = n.location();
    if (loc.known())
      out += fmt::format(" loc({}:{}:{})", quote_ir_string(loc.file), loc.line, loc.column);
  }

  void node(const Node& n, const ValueNumbering& num, int level) {
    indent(level);
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      if (i) out += ", ";
      out += num.ref(n.output(i));
    }
    if (n.num_outputs() > 0) out += " = ";
    out += n.op_name();
    switch (n.kind()) {
      case NodeKind::kOp:
        operands(n, num);
        if (!n.attrs().empty()) {
          out += " {";
          bool first = true;
          for (const auto& [name, value] : n.attrs().items()) {
            if (!first) out += ", ";
            first = false;
            out += fmt::format("{}={}", name, attr_to_string(op_info(n.op()), name, value));
          }
          out += "}";
        }
        break;
      case NodeKind::kConstant:
        out += " ";
        out += n.literal() ? literal_to_string(*n.literal()) : std::string("dense<?>");
        break;
      case NodeKind::kAssign:
      case NodeKind::kAssignAdd:
      case NodeKind::kAssignSub:
        out += fmt::format(" ${}", n.variable());
        for (const Value* v : n.inputs()) out += fmt::format(", {}", num.ref(v));
        break;
      case NodeKind::kCond:
      case NodeKind::kWhile: {
        operands(n, num);
        output_types(n);
        if (n.while_stacked()) out += " stacked";
        metadata(n);
        out += " {\n";
        bool is_cond = n.kind() == NodeKind::kCond;
        for (size_t i = 0; i < n.subgraphs().size(); ++i) {
          std::string_view label = i == 0   ? (is_cond ? "then" : "cond")
                                   : i == 1 ? (is_cond ? "else" : "body")
                                            : "extra";
          subgraph(label, n.subgraph(i), level + 1);
        }
        indent(level);
        out += "}\n";
        return;
      }
      case NodeKind::kFusion: {
        operands(n, num);
        output_types(n);
        out += fmt::format(" kind({}) @", quote_ir_string(n.fusion_kind()));
        std::string_view name = n.fusion_name();
        out += is_identifier(name) ? std::string(name) : quote_ir_string(name);
        metadata(n);
        out += " {\n";
        for (const auto& sub : n.subgraphs()) subgraph("body", *sub, level + 1);
        indent(level);
        out += "}\n";
        return;
      }
    }
    output_types(n);
    metadata(n);
    out += "\n";
  }
};

}  // namespace

std::string quote_ir_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string literal_to_string(const Literal& literal) {
  int64_t n = literal.num_elements();
  if (n == 0) return "dense<[]>";
  if (literal.is_splat()) return "dense<" + element_to_string(literal, 0) + ">";
  std::string s = "dense<[";
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += element_to_string(literal, i);
  }
  return s + "]>";
}

std::string print_graph(const Graph& g) {
  Printer p;
  p.graph(g);
  return std::move(p.out);
}

}  // namespace kiln::ir
