#include "kiln/codegen/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/ir/shape_rules.h"
#include "kiln/ir/value_numbering.h"

namespace kiln::codegen {
namespace {

size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Elementwise ops (and reshape, which copies bytes unchanged) may write their result over an
// operand with the same number of elements and the same element size.
bool may_reuse_operand_buffer(const ir::Node& n) {
  if (n.kind() != ir::NodeKind::kOp || n.num_outputs() != 1) return false;
  return op_info(n.op()).has(kElementwise) || n.op() == OpKind::Reshape;
}

// An arena buffer: one value, or a chain of values each reusing the buffer of the one before.
struct Buffer {
  size_t size = 0;  // aligned
  int first = 0;
  int last = 0;
  size_t order = 0;  // index of its first value in MemoryPlan::values
  size_t offset = 0;
};

using ValueIndex = std::unordered_map<const ir::Value*, size_t>;

// How many times each value is read: by top-level nodes (an operand listed twice counts twice)
// and as a graph output.
std::vector<int> use_counts(const ir::Graph& g, const ValueIndex& index, size_t values) {
  std::vector<int> uses(values, 0);
  for (const auto& n : g.nodes())
    for (const ir::Value* in : n->inputs()) ++uses[index.at(in)];
  for (const ir::Value* out : g.outputs()) ++uses[index.at(out)];
  return uses;
}

// Why an all_reduce's operand cannot be computed at its result's place in a bucket region
// (empty: it can).
std::string packed_because(const ValuePlan& p, int uses) {
  if (p.kind == BufferKind::kParameter) return "parameter";
  if (p.kind == BufferKind::kVariable) return "variable";
  if (p.kind == BufferKind::kConstant) return "constant";
  if (p.kind == BufferKind::kOutput || p.graph_output) return "graph output";
  const ir::Node* producer = p.value->producer();
  if (producer != nullptr && producer->kind() == ir::NodeKind::kCond) return "cond result";
  if (producer != nullptr && producer->kind() == ir::NodeKind::kWhile) return "while result";
  if (uses != 1) return "read by another node";
  return "";
}

// Groups the top-level all_reduce nodes into buckets (memory_plan.h) and makes one buffer per
// bucket region, buffers[0..buckets), with buffer_of set for the values that live in it.
void plan_buckets(const ir::Graph& g, const MemoryPlanOptions& options, MemoryPlan& plan,
                  const ValueIndex& index, std::vector<Buffer>& buffers,
                  std::vector<int>& buffer_of) {
  const size_t align = options.alignment;
  const int end_step = plan.num_steps;
  const std::vector<int> uses = use_counts(g, index, plan.values.size());
  std::vector<char> assigned(plan.values.size(), 0);
  for (const auto& n : g.nodes())
    if (n->is_assignment())
      for (const ir::Value* in : n->inputs()) assigned[index.at(in)] = 1;

  bool open = false;  // the last bucket takes more members
  for (size_t s = 0; s < g.nodes().size(); ++s) {
    const ir::Node& n = *g.nodes()[s];
    if (!n.is_op(OpKind::AllReduce)) continue;
    const size_t si = index.at(n.output()), gi = index.at(n.input(0));
    ValuePlan& sum = plan.values[si];
    if (!sum.in_arena() || assigned[si]) {
      open = false;
      continue;
    }
    const size_t size = align_up(sum.size, align);
    if (open) {
      const CollectiveBucket& last = plan.buckets.back();
      open = last.dtype == sum.value->dtype() && last.bytes + size <= options.bucket_bytes;
    }
    if (!open) {
      plan.buckets.push_back(CollectiveBucket{
          .dtype = sum.value->dtype(), .first_step = int(s), .last_step = int(s), .members = {}});
      open = true;
    }
    CollectiveBucket& b = plan.buckets.back();
    const int id = int(plan.buckets.size() - 1);
    BucketMember m{.gradient = n.input(0),
                   .sum = n.output(),
                   .offset = b.bytes,
                   .size = sum.size,
                   .step = int(s),
                   .packed = packed_because(plan.values[gi], uses[gi])};
    b.bytes += size;
    sum.bucket = id;
    // Never read: its sum may still run when the call ends.
    b.last_step = std::max(b.last_step, uses[si] == 0 ? end_step : sum.last_step);
    if (m.packed.empty()) {
      plan.values[gi].bucket = id;
      b.first_step = std::min(b.first_step, plan.values[gi].first_step);
    }
    b.members.push_back(std::move(m));
  }
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const CollectiveBucket& k = plan.buckets[b];
    for (const BucketMember& m : k.members) {
      buffer_of[index.at(m.sum)] = int(b);
      if (m.packed.empty()) buffer_of[index.at(m.gradient)] = int(b);
    }
    buffers.push_back(
        Buffer{k.bytes, k.first_step, k.last_step, index.at(k.members.front().sum), 0});
  }
}

// The concat regions (memory_plan.h): one buffer per concat with at least one operand computed
// at its place, with buffer_of set for the result and those operands, and their byte
// offsets in the region (`in_region`). Runs before the other buffers are made, after the
// buckets.
void plan_concat_regions(const ir::Graph& g, const MemoryPlanOptions& options, MemoryPlan& plan,
                         const ValueIndex& index, std::vector<Buffer>& buffers,
                         std::vector<int>& buffer_of,
                         std::vector<std::pair<size_t, size_t>>& in_region) {
  const std::vector<int> uses = use_counts(g, index, plan.values.size());
  for (const auto& node : g.nodes()) {
    const ir::Node& n = *node;
    if (!n.is_op(OpKind::Concat)) continue;
    const size_t ri = index.at(n.output());
    const ValuePlan& result = plan.values[ri];
    if (!result.in_arena() || result.bucket >= 0 || buffer_of[ri] >= 0 || result.size == 0)
      continue;
    if (!rules::concat_pieces_contiguous(n.output()->shape(), n.attrs().get_int("axis", "concat")))
      continue;
    std::vector<std::pair<size_t, size_t>> members;  // (value index, byte offset)
    int first = result.first_step;
    size_t offset = 0;
    for (const ir::Value* in : n.inputs()) {
      const size_t ii = index.at(in);
      const ValuePlan& p = plan.values[ii];
      const ir::Node* producer = in->producer();
      const bool computed = producer != nullptr && (producer->kind() == ir::NodeKind::kOp ||
                                                    producer->kind() == ir::NodeKind::kFusion);
      // A reshape that will view its operand's arena bytes moves nothing: left as it is.
      bool viewed = false;
      if (producer != nullptr && options.views.count(producer) > 0) {
        const ValuePlan& operand = plan.values[index.at(producer->input(0))];
        viewed = operand.in_arena() && operand.bucket < 0 && operand.size == p.size;
      }
      if (p.in_arena() && p.bucket < 0 && buffer_of[ii] < 0 && p.size > 0 && computed && !viewed &&
          uses[ii] == 1 && offset % options.alignment == 0) {
        members.emplace_back(ii, offset);
        first = std::min(first, p.first_step);
      }
      offset += p.size;
    }
    if (members.empty()) continue;
    const int b = int(buffers.size());
    buffers.push_back(Buffer{align_up(result.size, options.alignment), first, result.last_step,
                             members.front().first, 0});
    buffer_of[ri] = b;
    for (const auto& [ii, at] : members) {
      buffer_of[ii] = b;
      plan.values[ii].placed_in = n.output();
      in_region.emplace_back(ii, at);
    }
  }
}

}  // namespace

std::string_view buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::kArena:
      return "arena";
    case BufferKind::kParameter:
      return "parameter";
    case BufferKind::kVariable:
      return "variable";
    case BufferKind::kConstant:
      return "constant";
    case BufferKind::kOutput:
      return "output";
  }
  return "?";
}

std::string format_bytes(size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

const ValuePlan& MemoryPlan::of(const ir::Value* v) const {
  auto it = index_.find(v);
  if (it == index_.end())
    throw Error("memory plan: the value is not a top-level value of the planned graph");
  return values[it->second];
}

size_t CollectiveBucket::padding() const {
  size_t used = 0;
  for (const BucketMember& m : members) used += m.size;
  return bytes - used;
}

bool CollectiveBucket::direct() const {
  return std::all_of(members.begin(), members.end(),
                     [](const BucketMember& m) { return m.packed.empty(); });
}

int MemoryPlan::arena_values() const {
  return int(
      std::count_if(values.begin(), values.end(), [](const ValuePlan& p) { return p.in_arena(); }));
}

int MemoryPlan::reusing_values() const {
  return int(std::count_if(values.begin(), values.end(),
                           [](const ValuePlan& p) { return p.reuses_buffer_of != nullptr; }));
}

int MemoryPlan::view_values() const {
  return int(std::count_if(values.begin(), values.end(),
                           [](const ValuePlan& p) { return p.view_of != nullptr; }));
}

int MemoryPlan::placed_values() const {
  return int(std::count_if(values.begin(), values.end(),
                           [](const ValuePlan& p) { return p.placed_in != nullptr; }));
}

std::string MemoryPlan::to_string() const {
  double ratio = lower_bound_bytes == 0 ? 1.0 : double(arena_bytes) / double(lower_bound_bytes);
  std::string s =
      fmt::format("arena {} (lower bound {}, {:.2f}x), {} buffers, {} reusing an operand's",
                  format_bytes(arena_bytes), format_bytes(lower_bound_bytes), ratio, arena_values(),
                  reusing_values());
  if (const int v = view_values(); v > 0) s += fmt::format(", {} view(s)", v);
  if (const int v = placed_values(); v > 0)
    s += fmt::format(", {} computed in a concat's result", v);
  if (!buckets.empty()) {
    const auto direct = std::count_if(buckets.begin(), buckets.end(),
                                      [](const CollectiveBucket& b) { return b.direct(); });
    s += fmt::format(", {} gradient bucket(s) ({} direct, {} packed)", buckets.size(), direct,
                     buckets.size() - size_t(direct));
  }
  return s;
}

std::string MemoryPlan::to_table(const ir::Graph& g) const {
  ir::ValueNumbering numbering(g);
  std::string out = to_string() + "\n";
  for (const ValuePlan& p : values) {
    out += fmt::format("{} {} [{}, {}] {} B", numbering.ref(p.value), buffer_kind_name(p.kind),
                       p.first_step, p.last_step, p.size);
    if (p.in_arena()) out += fmt::format(" @ {}", p.offset);
    if (p.reuses_buffer_of) out += fmt::format(" reuses {}", numbering.ref(p.reuses_buffer_of));
    if (p.view_of) out += fmt::format(" view of {}", numbering.ref(p.view_of));
    if (p.placed_in)
      out +=
          fmt::format(" in {} +{}", numbering.ref(p.placed_in), p.offset - of(p.placed_in).offset);
    if (p.variable >= 0) out += fmt::format(" ${}", p.variable);
    if (p.graph_output && !p.in_arena() && p.kind != BufferKind::kOutput) out += " (output)";
    if (p.bucket >= 0)
      out += fmt::format(" bucket {} +{}", p.bucket, p.offset - buckets[size_t(p.bucket)].offset);
    out += "\n";
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    const CollectiveBucket& k = buckets[b];
    out += fmt::format("bucket {} {} @ {} {} B (padding {} B) [{}, {}], sum at step {}, {}:", b,
                       dtype_short_name(k.dtype), k.offset, k.bytes, k.padding(), k.first_step,
                       k.last_step, k.start_step(), k.direct() ? "direct" : "packed");
    for (size_t i = 0; i < k.members.size(); ++i) {
      const BucketMember& m = k.members[i];
      out += fmt::format("{} {} @ +{} {} B ", i ? "," : "", numbering.ref(m.sum), m.offset, m.size);
      out += m.packed.empty()
                 ? std::string("direct")
                 : fmt::format("packed ({}) from {}", m.packed, numbering.ref(m.gradient));
    }
    out += "\n";
  }
  return out;
}

MemoryPlan plan_memory(const ir::Graph& g, const MemoryPlanOptions& options) {
  const size_t align = options.alignment;
  if (align == 0 || (align & (align - 1)) != 0)
    throw Error(fmt::format("memory planning: alignment {} is not a power of two", align));

  MemoryPlan plan;
  plan.alignment = align;
  plan.num_steps = int(g.nodes().size());
  const int end_step = plan.num_steps;

  // Values whose shape is known only at run time: a stacked while's stacks (made by the
  // while step, outside the arena) and, with options.unknown_parameters, parameters (a
  // sub-graph's, receiving stacks). They take no planned bytes.
  auto dynamic = [&](const ir::Value* v) {
    if (v->def() == ir::Value::Def::kParameter) return options.unknown_parameters;
    const ir::Node* p = v->producer();
    if (p == nullptr || !p->while_stacked()) return false;
    auto i = size_t(v->index());
    return i >= p->while_loop_variables() && i < 2 * p->while_loop_variables();
  };
  auto add_value = [&](const ir::Value* v, BufferKind kind, int step) {
    const bool sized = v->shape().is_fully_known();
    if (!sized && !dynamic(v)) {
      ir::ValueNumbering numbering(g);
      throw Error(
          fmt::format("memory planning needs known shapes; {} is {}: specialise the signature",
                      numbering.ref(v), v->type().to_string()));
    }
    ValuePlan p;
    p.value = v;
    p.kind = kind;
    const ir::Node* producer = v->producer();
    const bool outside =
        options.control_flow_results_outside && producer != nullptr &&
        (producer->kind() == ir::NodeKind::kCond || producer->kind() == ir::NodeKind::kWhile);
    p.size = sized && !outside ? size_t(v->shape().num_elements()) * dtype_size(v->dtype()) : 0;
    p.first_step = step;
    p.last_step = step;
    plan.index_.emplace(v, plan.values.size());
    plan.values.push_back(p);
  };

  for (const auto& p : g.parameters()) add_value(p.get(), BufferKind::kParameter, -1);
  for (size_t i = 0; i < g.variables().size(); ++i) {
    add_value(g.variable(i).entry, BufferKind::kVariable, -1);
    plan.values.back().variable = int(i);
  }
  for (size_t s = 0; s < g.nodes().size(); ++s) {
    const ir::Node& n = *g.nodes()[s];
    BufferKind kind = BufferKind::kArena;
    if (n.kind() == ir::NodeKind::kConstant) kind = BufferKind::kConstant;
    if (n.is_assignment()) kind = BufferKind::kVariable;
    for (size_t o = 0; o < n.num_outputs(); ++o) {
      add_value(n.output(o), kind, int(s));
      if (n.is_assignment()) plan.values.back().variable = n.variable();
    }
  }

  // Lifetimes: last uses by the top-level nodes (cond / while operands included), outputs.
  auto entry = [&](const ir::Value* v) -> ValuePlan& {
    auto it = plan.index_.find(v);
    if (it == plan.index_.end())
      throw Error("memory planning: a node uses a value of another graph (verify the graph)");
    return plan.values[it->second];
  };
  for (size_t s = 0; s < g.nodes().size(); ++s)
    for (const ir::Value* in : g.nodes()[s]->inputs()) {
      ValuePlan& p = entry(in);
      p.last_step = std::max(p.last_step, int(s));
    }
  for (const ir::Value* out : g.outputs()) {
    ValuePlan& p = entry(out);
    p.last_step = end_step;
    p.graph_output = true;
    if (p.kind == BufferKind::kArena) p.kind = BufferKind::kOutput;
  }

  // Buffers: one per bucket region (made first), one per other arena value, except values
  // that reuse a dying operand's buffer or view their operand's buffer.
  std::vector<Buffer> buffers;
  std::vector<int> buffer_of(plan.values.size(), -1);
  if (options.bucket_bytes > 0) plan_buckets(g, options, plan, plan.index_, buffers, buffer_of);
  std::vector<std::pair<size_t, size_t>> in_region;  // (value index, byte offset in its region)
  if (options.concat_regions)
    plan_concat_regions(g, options, plan, plan.index_, buffers, buffer_of, in_region);
  // Whether an input of n other than `in` lives in buffer b (a view of the same bytes).
  auto other_input_in_buffer = [&](const ir::Node& n, const ir::Value* in, int b) {
    for (const ir::Value* other : n.inputs())
      if (other != in && buffer_of[plan.index_.at(other)] == b) return true;
    return false;
  };
  for (size_t s = 0; s < g.nodes().size(); ++s) {
    const ir::Node& n = *g.nodes()[s];
    for (size_t o = 0; o < n.num_outputs(); ++o) {
      size_t vi = plan.index_.at(n.output(o));
      ValuePlan& p = plan.values[vi];
      if (!p.in_arena() || p.bucket >= 0 || p.placed_in != nullptr) continue;
      if (buffer_of[vi] >= 0) {  // a concat region's result, made above
        Buffer& b = buffers[size_t(buffer_of[vi])];
        b.last = std::max(b.last, p.last_step);
        continue;
      }
      if (n.is_op(OpKind::Reshape) && options.views.count(&n)) {
        const size_t ii = plan.index_.at(n.input(0));
        const ValuePlan& q = plan.values[ii];
        if (q.in_arena() && q.bucket < 0 && q.size == p.size && p.size > 0 && buffer_of[ii] >= 0) {
          p.view_of = n.input(0);
          buffer_of[vi] = buffer_of[ii];
          Buffer& b = buffers[size_t(buffer_of[vi])];
          b.last = std::max(b.last, p.last_step);
          continue;
        }
      }
      if (options.reuse_buffers && may_reuse_operand_buffer(n)) {
        for (const ir::Value* in : n.inputs()) {
          size_t ii = plan.index_.at(in);
          const ValuePlan& q = plan.values[ii];
          if (q.in_arena() && q.bucket < 0 && q.last_step == int(s) && q.size == p.size &&
              in->shape().num_elements() == n.output(o)->shape().num_elements() &&
              dtype_size(in->dtype()) == dtype_size(n.output(o)->dtype()) &&
              buffers[size_t(buffer_of[ii])].last < int(s) + 1 &&
              !other_input_in_buffer(n, in, buffer_of[ii])) {
            p.reuses_buffer_of = in;
            buffer_of[vi] = buffer_of[ii];
            Buffer& b = buffers[size_t(buffer_of[vi])];
            b.last = std::max(b.last, p.last_step);
            break;
          }
        }
        if (p.reuses_buffer_of) continue;
      }
      buffer_of[vi] = int(buffers.size());
      buffers.push_back(Buffer{align_up(p.size, align), p.first_step, p.last_step, vi, 0});
    }
  }

  // Greedy by size: largest first, each into the best-fitting gap among the placed buffers
  // that are alive at the same time.
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Buffer& x = buffers[a];
    const Buffer& y = buffers[b];
    if (x.size != y.size) return x.size > y.size;
    if (x.first != y.first) return x.first < y.first;
    return x.order < y.order;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping placed buffers
  for (size_t bi : order) {
    Buffer& b = buffers[bi];
    busy.clear();
    for (size_t pi : placed) {
      const Buffer& o = buffers[pi];
      if (o.first <= b.last && b.first <= o.last && o.size > 0)
        busy.emplace_back(o.offset, o.offset + o.size);
    }
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [start, stop] : busy) {
      if (start > cursor) {
        size_t gap = start - cursor;
        if (gap >= b.size && gap < best_gap) {
          best_gap = gap;
          best = cursor;
        }
      }
      cursor = std::max(cursor, stop);
    }
    b.offset = best != SIZE_MAX ? best : cursor;
    placed.push_back(bi);
    plan.arena_bytes = std::max(plan.arena_bytes, b.offset + b.size);
  }
  for (size_t vi = 0; vi < plan.values.size(); ++vi)
    if (buffer_of[vi] >= 0) plan.values[vi].offset = buffers[size_t(buffer_of[vi])].offset;
  for (const auto& [vi, at] : in_region) plan.values[vi].offset += at;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {  // (region buffers are buffers 0..)
    CollectiveBucket& k = plan.buckets[b];
    k.offset = buffers[b].offset;
    for (const BucketMember& m : k.members) {
      plan.values[plan.index_.at(m.sum)].offset = k.offset + m.offset;
      if (m.packed.empty()) plan.values[plan.index_.at(m.gradient)].offset = k.offset + m.offset;
    }
  }

  // Lower bound: the most bytes of buffers alive at any one step (difference array).
  std::vector<int64_t> delta(size_t(end_step) + 2, 0);
  for (const Buffer& b : buffers) {
    delta[size_t(b.first)] += int64_t(b.size);
    delta[size_t(b.last) + 1] -= int64_t(b.size);
  }
  int64_t live = 0;
  for (int64_t d : delta) {
    live += d;
    plan.lower_bound_bytes = std::max(plan.lower_bound_bytes, size_t(live));
  }
  return plan;
}

}  // namespace kiln::codegen
