// FusionUnits (passes/fusion_units.h): its bounded cycle checks must agree with a brute-force
// check of the contracted graph, and its ranks must stay a topological order, on random
// graphs with random joins, merges and copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/fusion_units.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

// A random DAG of binary elementwise ops over two parameters: node i reads two earlier
// values, mostly recent ones (so groups form chains and diamonds).
std::unique_ptr<Graph> random_graph(int n, std::mt19937& rng) {
  auto g = std::make_unique<Graph>("random");
  TensorType t{DType::f32, Shape{4}};
  std::vector<Value*> values{g->add_parameter(t), g->add_parameter(t)};
  for (int i = 0; i < n; ++i) {
    auto pick = [&] {
      std::geometric_distribution<int> back(0.35);
      int k = std::min(int(values.size()) - 1, back(rng));
      return values[values.size() - 1 - size_t(k)];
    };
    Value* a = pick();
    Value* b = pick();
    values.push_back(g->add_op(i % 2 ? OpKind::Add : OpKind::Mul, {a, b})->output(0));
  }
  return g;
}

std::vector<Node*> program_order(const Graph& g) {
  std::vector<Node*> nodes;
  for (const auto& node : g.nodes()) nodes.push_back(node.get());
  return nodes;
}

// `count` random order edges from earlier to later nodes, as assignments would add.
std::vector<std::vector<int>> random_order_edges(int n, int count, std::mt19937& rng) {
  std::vector<std::vector<int>> succ(static_cast<size_t>(n));
  std::uniform_int_distribution<int> any(0, n - 1);
  for (int k = 0; k < count; ++k) {
    int a = any(rng), b = any(rng);
    if (a < b) succ[size_t(a)].push_back(b);
  }
  return succ;
}

// The groups holding node p's users (roots, sorted, unique).
std::vector<int> consumer_groups(FusionUnits& units, int p) {
  std::vector<int> consumers;
  for (int user : units.users(p))
    for (int gid : units.groups_of(user)) consumers.push_back(gid);
  std::sort(consumers.begin(), consumers.end());
  consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
  return consumers;
}

// Brute force, without copies: map each node to its group (or itself), add every data and
// order edge between different classes, and look for a cycle (Kahn's algorithm).
bool quotient_has_cycle(const std::vector<int>& cls, const std::vector<std::vector<int>>& edges) {
  const int classes = *std::max_element(cls.begin(), cls.end()) + 1;
  std::vector<std::set<int>> out(static_cast<size_t>(classes));
  for (size_t a = 0; a < edges.size(); ++a)
    for (int b : edges[a])
      if (cls[a] != cls[size_t(b)]) out[size_t(cls[a])].insert(cls[size_t(b)]);
  std::vector<int> indegree(static_cast<size_t>(classes), 0);
  for (const auto& o : out)
    for (int b : o) ++indegree[size_t(b)];
  std::vector<int> ready;
  for (int c = 0; c < classes; ++c)
    if (indegree[size_t(c)] == 0) ready.push_back(c);
  int seen = 0;
  while (!ready.empty()) {
    int c = ready.back();
    ready.pop_back();
    ++seen;
    for (int b : out[size_t(c)])
      if (--indegree[size_t(b)] == 0) ready.push_back(b);
  }
  return seen < classes;  // ids no node uses have no edges and count as seen
}

// The class of every node: its group's root (offset past the positions) or itself.
std::vector<int> classes(FusionUnits& u) {
  std::vector<int> cls(u.size());
  for (int p = 0; p < int(u.size()); ++p) {
    int h = u.home(p);
    cls[size_t(p)] = h >= 0 ? int(u.size()) + h : p;
  }
  return cls;
}

TEST(FusionUnits, BoundedCycleChecksAgreeWithBruteForceAndRanksStayTopological) {
  for (int seed = 0; seed < 40; ++seed) {
    std::mt19937 rng{static_cast<unsigned>(seed)};
    const int n = 30 + seed;
    std::unique_ptr<Graph> g = random_graph(n, rng);
    std::vector<std::vector<int>> succ = random_order_edges(n, n / 6, rng);
    std::vector<std::vector<int>> edges = succ;  // data + order, by position
    FusionUnits units(program_order(*g), succ);
    for (int p = 0; p < n; ++p)
      for (int user : units.users(p)) edges[size_t(p)].push_back(user);
    ASSERT_TRUE(units.order_is_topological());

    // Visit consumers first, as the planner does; no copies here (brute force can't model them).
    for (int p = n - 1; p >= 0; --p) {
      std::vector<int> consumers = consumer_groups(units, p);
      if (consumers.empty() || rng() % 4 == 0) {
        units.new_group(p);
        continue;
      }
      // Try every consumer alone, then all of them together.
      std::vector<std::vector<int>> options;
      for (int gid : consumers) options.push_back({gid});
      if (consumers.size() > 1) options.push_back(consumers);
      std::shuffle(options.begin(), options.end(), rng);
      bool placed = false;
      for (const std::vector<int>& gids : options) {
        std::vector<int> cls = classes(units);
        const int into = int(units.size()) + units.find(gids[0]);
        for (int& c : cls)
          for (int gid : gids)
            if (c == int(units.size()) + units.find(gid)) c = into;
        cls[size_t(p)] = into;
        const bool expected = quotient_has_cycle(cls, edges);
        ASSERT_EQ(units.would_cycle(gids, p), expected) << "seed " << seed << " node " << p;
        if (!expected) {
          units.merge_with(gids, p);
          placed = true;
          break;
        }
      }
      if (!placed) units.new_group(p);
      ASSERT_TRUE(units.order_is_topological()) << "seed " << seed << " node " << p;
      ASSERT_FALSE(quotient_has_cycle(classes(units), edges));
    }
  }
}

TEST(FusionUnits, CopiesKeepTheOrderTopological) {
  for (int seed = 0; seed < 40; ++seed) {
    std::mt19937 rng{static_cast<unsigned>(1000 + seed)};
    const int n = 40;
    std::unique_ptr<Graph> g = random_graph(n, rng);
    FusionUnits units(program_order(*g), random_order_edges(n, n / 4, rng));
    for (int p = n - 1; p >= 0; --p) {
      std::vector<int> consumers = consumer_groups(units, p);
      if (consumers.size() > 1 && rng() % 2 == 0) {
        bool covered = true;
        for (int gid : consumers) {
          if (!units.copy_would_cycle(gid, p))
            units.copy(p, gid);
          else
            covered = false;
        }
        if (!covered || rng() % 3 == 0) units.new_group(p);
      } else if (consumers.size() == 1 && !units.would_cycle(consumers, p)) {
        units.merge_with(consumers, p);
      } else {
        units.new_group(p);
      }
      ASSERT_TRUE(units.order_is_topological()) << "seed " << seed << " node " << p;
    }
  }
}

}  // namespace
}  // namespace kiln::passes
