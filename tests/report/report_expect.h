// What a step report must draw, read from its CompiledForm independently of the report code:
// one box per fusion group, one element per buffer of the memory plan, one per scratch buffer,
// one table row per executable step; and a check of a scanned page against it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/value_numbering.h"
#include "kiln/kiln.h"
#include "tests/report/html_scan.h"

namespace kiln::test {

struct ReportExpectation {
  std::vector<std::string> groups;   // fusion group names
  std::vector<std::string> buffers;  // "%N"
  size_t scratch = 0, steps = 0;
};

inline ReportExpectation expected_report(const CompiledForm& form) {
  ReportExpectation e;
  const ir::Graph& g = form.graph(Stage::kOptimized);
  for (const auto& n : g.nodes())
    if (n->kind() == ir::NodeKind::kFusion) e.groups.emplace_back(n->fusion_name());
  // A buffer: a planned value with bytes of its own. Constants keep their literal; a view
  // shares its operand's bytes; a variable's new value is written into the variable's buffer.
  const ir::ValueNumbering numbering(g);
  for (const codegen::ValuePlan& vp : form.memory_plan().values) {
    if (vp.kind == codegen::BufferKind::kConstant || vp.view_of != nullptr) continue;
    if (vp.kind == codegen::BufferKind::kVariable && vp.value->def() == ir::Value::Def::kNodeOutput)
      continue;
    e.buffers.push_back(numbering.ref(vp.value));
  }
  e.scratch = form.arena_layout().scratch.size();
  e.steps = form.executable()->steps().size();
  return e;
}

// Every fusion group, buffer, scratch buffer and step of `e` is drawn exactly once in `doc`,
// and nothing else carries those attributes.
inline void expect_drawn_once(const HtmlDocument& doc, const ReportExpectation& e) {
  ASSERT_TRUE(doc.error.empty()) << doc.error;
  std::map<std::string, int> groups = count_by(doc, "data-group");
  EXPECT_EQ(groups.size(), e.groups.size());
  for (const std::string& name : e.groups) EXPECT_EQ(groups[name], 1) << "fusion group " << name;
  std::map<std::string, int> buffers = count_by(doc, "data-buffer");
  EXPECT_EQ(buffers.size(), e.buffers.size());
  for (const std::string& v : e.buffers) EXPECT_EQ(buffers[v], 1) << "buffer " << v;
  std::map<std::string, int> scratch = count_by(doc, "data-scratch");
  EXPECT_EQ(scratch.size(), e.scratch);
  for (const auto& [i, n] : scratch) EXPECT_EQ(n, 1) << "scratch buffer " << i;
  std::map<std::string, int> steps = count_by(doc, "data-step");
  EXPECT_EQ(steps.size(), e.steps);
  for (const auto& [i, n] : steps) EXPECT_EQ(n, 1) << "step " << i;
}

}  // namespace kiln::test
