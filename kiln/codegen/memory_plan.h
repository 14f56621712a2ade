// Memory planning: where every value of a graph lives while it runs, with one arena of
// scratch memory per executable. Part of codegen, not a pass: it produces a plan and leaves
// the graph alone; codegen/arena_layout.h lays an executable's arena out from it.
//
// Contract of plan_memory(g):
//   - Every dimension of every top-level value must be known; otherwise a kiln::Error naming
//     the first such value ("memory planning needs known shapes; %3 is f32[?,128]: specialise
//     the signature").
//   - Schedule: the top-level nodes in program order; node i runs at step i. Parameters and
//     variable entry values are defined at step -1 (function entry); graph outputs live until
//     step num_steps (the return). A value's lifetime is [defining step, last use step] (a
//     value nobody uses still lives at its defining step, where it is written).
//   - Nodes with sub-graphs (cond, while, fusion) are planned as one step (v1): their operands
//     are used and their outputs defined at the node's step; values inside sub-graphs are not
//     planned (the executor gives them their own memory). Their results never reuse an
//     operand's buffer.
//   - Values outside the arena: parameters (the caller's buffers), variable entry values and
//     assignment results (the new value of a variable is written into the variable's
//     buffer), constants (their literal data) and graph outputs (returned to the caller; a
//     value that is both a graph output and one of the kinds before keeps that kind and has
//     `graph_output` set).
//   - Everything else (op results, cond / while results) lives in the arena at a 64-byte
//     aligned offset. Reuse: the result of an elementwise op (or a reshape) takes the buffer
//     of an operand that is an arena value, dies at this node and has the same number of
//     elements and element size (so no operand that is broadcast, no dtype size change); the
//     first such operand wins and `reuses_buffer_of` records it. Values sharing a buffer this way
//     form one buffer whose lifetime is the union of theirs.
//   - Views (options.views): the result of a listed reshape node takes its operand's buffer
//     whenever both are arena values of the same size, whether or not the operand dies there:
//     no byte moves (the executable runs no step for it) and `view_of` records the operand.
//     The buffer lives until the last use of any of its values, and nothing reuses it
//     before then.
//   - Concat regions (options.concat_regions): a concat whose pieces are whole,
//     contiguous blocks of its arena result (every dimension before its axis is 1: axis 0 of
//     a stack of time steps, say) is one buffer, its region, and an operand is computed at its
//     place in it when it is an arena value of an op or fusion whose one use is this concat, at
//     an offset that is a multiple of the alignment (`placed_in` records the concat's result).
//     The concat then moves only the other pieces (its kernel skips a piece that already lies
//     at its place), as XLA's buffer assignment does. The region lives from its first such
//     operand's step to the result's last use; such operands reuse no buffer.
//   - Offsets: greedy by size (as TFLite / XLA): buffers sorted by aligned size, largest first
//     (ties: earlier start, then value order); each goes into the smallest gap (best fit, ties:
//     lowest offset) between the already placed buffers whose lifetimes overlap its own, or
//     after the last of them when no gap fits. Deterministic.
//   - Gradient buckets (options.bucket_bytes > 0; docs/distributed.md): the top-level
//     all_reduce nodes, in program order, are grouped into buckets: runs of consecutive
//     all_reduce nodes of one dtype, each bucket at most bucket_bytes (aligned sizes; a larger
//     value is a bucket alone). An all_reduce whose result is not an arena value, or is read by
//     an assignment, belongs to no bucket and ends the run. A bucket is one arena buffer (its
//     region): the members' results in all_reduce order, each at an aligned offset; the bytes
//     between them (padding) are summed too (the executable zeroes them first: a sum of
//     zeros). A member is "direct" when its operand can be computed at its place in the region
//     (an arena op or fusion result whose one use is this all_reduce): operand and result then
//     share those bytes and the sum runs on them. Otherwise it is "packed" (a parameter,
//     variable, constant, graph output, cond / while result, or a value read elsewhere): the
//     operand keeps its own buffer and is copied into the region at the all_reduce's step. The
//     region lives from its first direct operand's (or packed all_reduce's) step to its last
//     result's last use, and to the end when a result is never read (its sum may still run).
//     No value reuses a bucket's bytes, nor a member another's.
//   - lower_bound_bytes: max over steps of the sum of the aligned sizes of the arena buffers
//     alive at that step (a reused buffer counts once). No offset assignment for the
//     same buffers does better, so arena_bytes >= lower_bound_bytes.
// The plan points at the graph's values: it is valid while the graph is unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::codegen {

struct MemoryPlanOptions {
  // Arena offsets and the sizes used for packing are multiples of this (a power of two).
  size_t alignment = 64;
  // Let elementwise results reuse the buffer of an operand that dies at their node.
  bool reuse_buffers = true;
  // Gradient buckets (see the contract above): at most this many bytes each; 0: no buckets.
  size_t bucket_bytes = 0;
  // Accept parameters of unknown shape (planned with no bytes): the sub-graphs of a while that
  // receive a stacked while's stacks (codegen sets it; a stack's length is the trip count).
  bool unknown_parameters = false;
  // Plan the results of cond and while nodes with no bytes: the executable keeps them
  // outside the arena (its nested executables make them; codegen sets it).
  bool control_flow_results_outside = false;
  // Reshape nodes whose result may be a view of its operand's buffer (see the contract);
  // codegen lists those whose operand and result both stay in its arena.
  std::unordered_set<const ir::Node*> views;
  // Compute a concat's operands at their place in its result (see the contract).
  bool concat_regions = true;
};

// Where a value lives.
enum class BufferKind : uint8_t {
  kArena,      // in the executable's arena at `offset`
  kParameter,  // the caller's argument
  kVariable,   // a variable's buffer (its entry value or an assignment's new value)
  kConstant,   // the constant's literal data
  kOutput,     // its own buffer, returned to the caller
};

// "arena", "parameter", "variable", "constant", "output".
std::string_view buffer_kind_name(BufferKind kind);

struct ValuePlan {
  const ir::Value* value = nullptr;
  BufferKind kind = BufferKind::kArena;
  size_t size = 0;     // bytes (elements * dtype size), not rounded up
  size_t offset = 0;   // arena offset (kArena only; 0 otherwise)
  int first_step = 0;  // defining step (-1: parameters and variable entries)
  int last_step = 0;   // last use (num_steps when it is a graph output)
  // kArena: the operand whose buffer this value reuses (null if none).
  const ir::Value* reuses_buffer_of = nullptr;
  // kArena: the operand whose buffer this reshape result views (null if none).
  const ir::Value* view_of = nullptr;
  // kArena: the concat result in whose bytes this operand is computed (null if none).
  const ir::Value* placed_in = nullptr;
  // kVariable: the variable's index.
  int variable = -1;
  bool graph_output = false;
  // An all_reduce result in a bucket, or a direct member's operand: the bucket's index.
  int bucket = -1;

  bool in_arena() const { return kind == BufferKind::kArena; }
};

// One all_reduce node of a gradient bucket.
struct BucketMember {
  const ir::Value* gradient = nullptr;  // the all_reduce's operand
  const ir::Value* sum = nullptr;       // its result, at the region's offset + `offset`
  size_t offset = 0;                    // within the region (a multiple of the alignment)
  size_t size = 0;                      // bytes
  int step = 0;                         // the all_reduce's step
  // Empty: direct (the operand is computed at the result's place). Otherwise why the operand
  // is copied into the region: "parameter", "variable", "constant", "graph output",
  // "cond result", "while result", "read by another node".
  std::string packed;
};

// A gradient bucket: the results of consecutive all_reduce nodes in one arena region, summed
// by one collective that starts at the step of its last member.
struct CollectiveBucket {
  DType dtype = DType::f32;
  size_t offset = 0;  // arena offset of the region
  size_t bytes = 0;   // the region: the members and the padding after each (aligned)
  int first_step = 0;
  int last_step = 0;
  std::vector<BucketMember> members;

  int start_step() const { return members.back().step; }
  // Bytes of the region that belong to no member (zeroed before the sum).
  size_t padding() const;
  // No member packed: the sum needs no copy.
  bool direct() const;
};

struct MemoryPlan {
  // One entry per top-level value in ValueNumbering order (parameters, variable entries, node
  // outputs in program order).
  std::vector<ValuePlan> values;
  int num_steps = 0;  // top-level nodes
  size_t alignment = 64;
  size_t arena_bytes = 0;
  size_t lower_bound_bytes = 0;
  std::vector<CollectiveBucket> buckets;  // in all_reduce order

  // The plan of `v` (a top-level value of the planned graph); kiln::Error otherwise.
  const ValuePlan& of(const ir::Value* v) const;
  // Number of arena values, and how many of them reuse an operand's buffer.
  int arena_values() const;
  int reusing_values() const;
  int view_values() const;    // values with view_of set
  int placed_values() const;  // values with placed_in set (computed in a concat's result)
  // "arena 1.2 MiB (lower bound 1.1 MiB, 1.05x), 37 buffers, 12 reusing an operand's" (then
  // ", 2 view(s)", ", 3 computed in a concat's result" and, with buckets, ", 2 gradient
  // buckets (1 direct, 1 packed)" where there are any).
  std::string to_string() const;
  // to_string() then one line per value: `%7 arena [3, 5] 32768 B @ 65536 reuses %6`
  // (a bucket's value: `... @ 4160 bucket 0 +64`; a concat's operand computed in its result:
  // `... @ 8192 in %9 +4096`), then one line per bucket:
  // `bucket 0 f32 @ 4096 1088 B (padding 48 B) [2, 9], sum at step 6, direct: %5 @ +0 1000 B
  // direct, %8 @ +1024 40 B direct` (a packed member: `packed (while result) from %7`).
  std::string to_table(const ir::Graph& g) const;

 private:
  friend MemoryPlan plan_memory(const ir::Graph& g, const MemoryPlanOptions& options);
  std::unordered_map<const ir::Value*, size_t> index_;
};

MemoryPlan plan_memory(const ir::Graph& g, const MemoryPlanOptions& options = {});

// "512 B", "3.0 KiB", "1.2 MiB", "2.0 GiB".
std::string format_bytes(size_t bytes);

}  // namespace kiln::codegen
