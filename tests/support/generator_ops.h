// A random-graph generator's op list against what it makes: the generators of
// tests/codegen/random_fused_graph.h and tests/passes/random_graph.h each name their ops (the op
// row completeness test reads those lists), and this check fails when a listed op never appears
// in `seeds` graphs or a graph holds an op the list does not name.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/op_table.h"

namespace kiln::test {

// `generate(seed)` makes one graph; `listed` is the generator's op list, `list_name` how the
// failure messages name it.
template <typename Generate>
void expect_generator_makes_exactly(Generate generate, const std::vector<OpKind>& listed,
                                    const std::string& list_name, uint64_t seeds = 3000) {
  std::set<OpKind> seen;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    std::unique_ptr<ir::Graph> g = generate(seed);  // alive while its nodes are walked
    for (const auto& n : g->nodes())
      if (n->kind() == ir::NodeKind::kOp) seen.insert(n->op());
  }
  for (OpKind k : listed) EXPECT_TRUE(seen.count(k)) << op_name(k) << " is listed but never made";
  for (OpKind k : seen)
    EXPECT_NE(std::find(listed.begin(), listed.end(), k), listed.end())
        << op_name(k) << " is made but not in " << list_name;
}

}  // namespace kiln::test
