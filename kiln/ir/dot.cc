#include "kiln/ir/dot.h"

#include <fmt/format.h>

#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ir/printer.h"
#include "kiln/ir/value_numbering.h"

namespace kiln::ir {
namespace {

// One label line with `"` and `\` escaped and any newline turned into DOT's `\n`.
std::string escape_line(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string label(const std::vector<std::string>& lines) {
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) s += "\\n";
    s += escape_line(lines[i]);
  }
  return s;
}

std::string op_line(const Node& n) {
  switch (n.kind()) {
    case NodeKind::kConstant: {
      const auto& lit = n.literal();
      if (lit && (lit->num_elements() == 0 || lit->is_splat()))
        return "constant " + literal_to_string(*lit);
      return "constant";
    }
    case NodeKind::kAssign:
    case NodeKind::kAssignAdd:
    case NodeKind::kAssignSub:
      return fmt::format("{} ${}", n.op_name(), n.variable());
    case NodeKind::kFusion:
      return fmt::format("fusion @{}", n.fusion_name());
    default:
      return std::string(n.op_name());
  }
}

class DotWriter {
 public:
  std::string out;

  void graph(const Graph& g, const std::string& prefix, int level) {
    ValueNumbering num(g);
    std::string ind(size_t(2 * level), ' ');
    std::unordered_map<const Value*, std::string> ids;
    for (size_t i = 0; i < g.parameters().size(); ++i) {
      const Value* p = g.parameter(i);
      std::string id = fmt::format("{}p{}", prefix, i);
      ids[p] = id;
      out += fmt::format("{}{} [shape=box, label=\"{}\"];\n", ind, id,
                         label({num.ref(p), fmt::format("param {}", i), p->type().to_string()}));
    }
    for (size_t i = 0; i < g.variables().size(); ++i) {
      const GraphVariable& v = g.variable(i);
      std::string id = fmt::format("{}v{}", prefix, i);
      ids[v.entry] = id;
      out += fmt::format("{}{} [shape=box, label=\"{}\"];\n", ind, id,
                         label({fmt::format("${} {}", i, v.name), v.type.to_string()}));
    }
    for (size_t k = 0; k < g.nodes().size(); ++k) {
      const Node& n = *g.nodes()[k];
      std::string id = fmt::format("{}n{}", prefix, k);
      std::vector<std::string> lines;
      if (!n.name().empty()) lines.push_back(n.name());
      lines.push_back(op_line(n));
      std::string types;
      for (size_t i = 0; i < n.num_outputs(); ++i) {
        if (i) types += ", ";
        types += n.output(i)->type().to_string();
        ids[n.output(i)] = id;
      }
      if (!types.empty()) lines.push_back(types);
      out += fmt::format("{}{} [label=\"{}\"{}];\n", ind, id, label(lines),
                         n.is_assignment() ? ", style=bold, color=red" : "");
      for (const Value* in : n.inputs()) edge(ids, in, id, ind);
      if (n.is_assignment())
        out += fmt::format("{}{} -> {}v{} [style=bold, color=red, constraint=false];\n", ind, id,
                           prefix, n.variable());
      bool is_cond = n.kind() == NodeKind::kCond;
      bool is_fusion = n.kind() == NodeKind::kFusion;
      for (size_t i = 0; i < n.subgraphs().size(); ++i) {
        const Graph& sub = n.subgraph(i);
        int cluster = next_cluster_++;
        std::string sub_prefix = fmt::format("c{}_", cluster);
        std::string role = is_fusion ? fmt::format("{} ({})", sub.name(), n.fusion_kind())
                                     : std::string(i == 0 ? (is_cond ? "then" : "cond")
                                                          : (is_cond ? "else" : "body"));
        out += fmt::format("{}subgraph cluster_{} {{\n{}  label=\"{}\";\n", ind, cluster, ind,
                           escape_line(role));
        graph(sub, sub_prefix, level + 1);
        out += fmt::format("{}}}\n", ind);
        for (size_t p = 0; p < sub.parameters().size(); ++p)
          out += fmt::format("{}{} -> {}p{} [style=dashed];\n", ind, id, sub_prefix, p);
      }
    }
    std::string ret = prefix + "return";
    out += fmt::format("{}{} [label=\"return\"];\n", ind, ret);
    for (const Value* v : g.outputs()) edge(ids, v, ret, ind);
  }

 private:
  void edge(const std::unordered_map<const Value*, std::string>& ids, const Value* from,
            const std::string& to, const std::string& ind) {
    auto it = ids.find(from);
    if (it == ids.end()) return;  // a value of another graph: nothing to draw
    const Node* producer = from->producer();
    if (producer && producer->num_outputs() > 1)
      out += fmt::format("{}{} -> {} [label=\"{}\"];\n", ind, it->second, to, from->index());
    else
      out += fmt::format("{}{} -> {};\n", ind, it->second, to);
  }

  int next_cluster_ = 0;
};

}  // namespace

std::string graph_to_dot(const Graph& g) {
  DotWriter w;
  w.out = fmt::format("digraph \"{}\" {{\n", escape_line(g.name()));
  w.graph(g, "", 1);
  w.out += "}\n";
  return std::move(w.out);
}

}  // namespace kiln::ir
