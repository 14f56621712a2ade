// The arena of one executable: where every slot the step builder (compile_graph.cc) made
// lives. The graph's values sit at the offsets of the memory plan (codegen/memory_plan.h)
// made without buffer reuse (kernel buffers never alias; a reshape whose operand and result
// both stay in the arena is a view: no step, its slot is the operand's bytes); values that
// outlive the call are pooled (a variable's new value) or kept outside (constants, cond /
// while results); gradient buckets become the executable's collective regions; contraction
// products and kernel temporaries live in a scratch area after the planned values that every
// step reuses (steps run one after another).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/codegen/memory_plan.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/executable.h"

namespace kiln::codegen {

// A buffer of an executable's scratch area: live only while its step runs.
struct ScratchBuffer {
  std::string step;  // the step's name (its fusion group)
  std::string role;  // "contraction product" or "kernel temporary"
  TensorType type;
  size_t offset = 0;  // arena offset
};

// The arena of one executable exactly as compile_graph lays it out: the graph's values at the
// offsets of plan_memory without buffer reuse (kernel buffers never alias), then a
// scratch area from `scratch_offset` that every step reuses for its contraction product and
// kernel temporaries. arena_bytes == Executable::arena_bytes(), the bytes each call's arena
// has. Some values the plan places in the arena are kept elsewhere by the executable (a
// variable's new value: pooled, outlives the call; cond / while results: returned by the
// nested executable): `elsewhere` names them, their planned bytes stay unused. Cond / while
// bodies are nested executables with arenas of their own (not counted here). Points at the
// optimized graph's values: valid while that graph lives unchanged.
struct ArenaLayout {
  // plan_memory(graph, {.reuse_buffers = false, .views = the reshapes that stay in the arena})
  MemoryPlan plan;
  std::vector<std::pair<const ir::Value*, std::string>> elsewhere;  // value, "pooled" | "external"
  size_t scratch_offset = 0;
  std::vector<ScratchBuffer> scratch;
  size_t arena_bytes = 0;

  // "# arena 60.2 KiB = planned values 40.0 KiB (lower bound ..., ...) + scratch 20.2 KiB ..."
  std::string summary() const;
  // summary(), then one line per value and per gradient bucket (MemoryPlan::to_table) and one
  // per scratch buffer.
  std::string to_text(const ir::Graph& g) const;
};

// Gradient buckets in compiled steps (codegen/memory_plan.h, docs/distributed.md): the most
// bytes of all_reduce results one sum covers. set_bucket_bytes()'s value, else
// KILN_BUCKET_BYTES, else 1 MiB; 0: every all_reduce sums alone. Every rank must use the same
// value (the ranks' sums must match).
size_t bucket_bytes();
// nullopt: back to KILN_BUCKET_BYTES / the default. Applies to graphs compiled afterwards.
void set_bucket_bytes(std::optional<size_t> bytes);
inline constexpr size_t kDefaultBucketBytes = size_t(1) << 20;

// The memory plan codegen compiles `g` (top level) with: no buffer reuse, sub-graph
// parameters of unknown shape accepted (they may receive stacks), cond / while results
// outside the arena, gradient buckets of bucket_bytes(), and as views every reshape whose
// operand and result are not read by an assignment (those leave the arena for a pool or the
// variable's buffer).
MemoryPlan plan_arena_values(const ir::Graph& g);

// Whether node n is a reshape that `plan` makes a view of its operand (no step runs for it).
bool is_view(const MemoryPlan& plan, const ir::Node& n);

// The steps of one executable, as the step builder made them, for lay_out_arena.
struct ArenaSteps {
  const std::unordered_map<const ir::Value*, int>& slots;  // the graph's values' slots
  int num_slots = 0;                                       // slots in all (some have no value)
  std::vector<runtime::ExecutableStep>& steps;             // bucket and temporaries filled in
  const std::vector<std::pair<int, runtime::Array>>& constants;
  const std::unordered_set<int>& updated_in_variables;  // kernel outputs written into a variable
  const std::unordered_set<int>& products_in_outputs;   // contraction products a group returns
};

// Where every slot lives and the executable's collective regions.
struct ArenaResult {
  ArenaLayout layout;  // its arena_bytes is the executable's arena size
  std::vector<runtime::SlotStorage> storage;
  std::vector<runtime::CollectiveBucketLayout> buckets;
};

// Lays out `plan` (plan_arena_values of the steps' graph) as described at the top; fills in
// each all_reduce step's bucket and each kernel's temporary offsets.
ArenaResult lay_out_arena(MemoryPlan plan, ArenaSteps in);

}  // namespace kiln::codegen
