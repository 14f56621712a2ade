#include "kiln/codegen/arena_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "kiln/runtime/knobs.h"

namespace kiln::codegen {

using ir::Graph;
using ir::Node;
using ir::Value;
using Step = runtime::ExecutableStep;

namespace {
std::mutex bucket_mutex;
std::optional<size_t> bucket_bytes_set;

// The plan's gradient buckets as the executable runs them: each all_reduce step learns its
// bucket; every value the plan puts in a region must be an arena slot at its planned offset.
void lay_out_buckets(const MemoryPlan& plan, ArenaSteps& in, ArenaResult& out) {
  std::unordered_map<int, size_t> step_of_output;
  for (size_t i = 0; i < in.steps.size(); ++i)
    if (in.steps[i].kind == Step::Kind::kOp && in.steps[i].op == OpKind::AllReduce)
      step_of_output[in.steps[i].output] = i;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const CollectiveBucket& k = plan.buckets[b];
    runtime::CollectiveBucketLayout layout;
    layout.name = fmt::format("bucket {} ({} gradient(s), {} B)", b, k.members.size(), k.bytes);
    layout.dtype = k.dtype;
    layout.offset = k.offset;
    layout.bytes = k.bytes;
    for (size_t i = 0; i < k.members.size(); ++i) {
      const BucketMember& m = k.members[i];
      const int sum_slot = in.slots.at(m.sum);
      for (const Value* v : {m.sum, m.packed.empty() ? m.gradient : nullptr}) {
        if (v == nullptr) continue;
        const runtime::SlotStorage& st = out.storage[size_t(in.slots.at(v))];
        KILN_ASSERT(st.kind == runtime::SlotStorage::Kind::kArena && st.offset == plan.of(v).offset,
                    "codegen: a value of a gradient bucket is not kept at its planned place");
      }
      layout.slots.push_back(sum_slot);
      const size_t end = i + 1 < k.members.size() ? k.members[i + 1].offset : k.bytes;
      if (end > m.offset + m.size)
        layout.padding.emplace_back(k.offset + m.offset + m.size, end - m.offset - m.size);
      Step& s = in.steps.at(step_of_output.at(sum_slot));
      s.bucket = int(b);
      s.starts_bucket = i + 1 == k.members.size();
    }
    out.buckets.push_back(std::move(layout));
  }
}
}  // namespace

size_t bucket_bytes() {
  {
    std::lock_guard<std::mutex> lock(bucket_mutex);
    if (bucket_bytes_set) return *bucket_bytes_set;
  }
  if (auto knob = runtime::knobs::bucket_bytes()) return size_t(*knob);
  return kDefaultBucketBytes;
}

void set_bucket_bytes(std::optional<size_t> bytes) {
  std::lock_guard<std::mutex> lock(bucket_mutex);
  bucket_bytes_set = bytes;
}

MemoryPlan plan_arena_values(const Graph& g) {
  MemoryPlanOptions options;
  options.reuse_buffers = false;
  options.unknown_parameters = true;            // a sub-graph's parameters may receive stacks
  options.control_flow_results_outside = true;  // the cond / while steps return them
  options.bucket_bytes = bucket_bytes();
  std::unordered_set<const Value*> assigned;
  for (const auto& n : g.nodes())
    if (n->is_assignment()) assigned.insert(n->input(0));
  for (const auto& n : g.nodes())
    if (n->is_op(OpKind::Reshape) && !assigned.count(n->input(0)) && !assigned.count(n->output()))
      options.views.insert(n.get());
  return plan_memory(g, options);
}

bool is_view(const MemoryPlan& plan, const Node& n) {
  return n.is_op(OpKind::Reshape) && plan.of(n.output()).view_of != nullptr;
}

ArenaResult lay_out_arena(MemoryPlan plan_in, ArenaSteps in) {
  using Kind = runtime::SlotStorage::Kind;
  ArenaResult out;
  ArenaLayout& layout = out.layout;
  layout.plan = std::move(plan_in);
  const MemoryPlan& plan = layout.plan;
  std::vector<runtime::SlotStorage>& storage = out.storage;
  storage.assign(size_t(in.num_slots), {});
  for (const auto& [v, s] : in.slots) {
    runtime::SlotStorage& st = storage[size_t(s)];
    st.type = v->type();
    const ValuePlan& vp = plan.of(v);
    if (vp.kind == BufferKind::kArena) {
      st.kind = Kind::kArena;
      st.offset = vp.offset;
    } else if (vp.kind == BufferKind::kOutput) {
      st.kind = Kind::kPooled;
    }
  }
  for (const Step& s : in.steps) {
    if (s.kind == Step::Kind::kAssign) {  // the new value outlives the call in the variable
      // (updated in the variable's buffer: the kernel's step binds it, or a pooled copy)
      storage[size_t(s.inputs[0])].kind =
          in.updated_in_variables.count(s.inputs[0]) ? Kind::kExternal : Kind::kPooled;
      storage[size_t(s.output)].kind = Kind::kExternal;
    }
    if (s.kind == Step::Kind::kCond || s.kind == Step::Kind::kWhile)
      for (int o : s.outputs) storage[size_t(o)].kind = Kind::kExternal;
  }
  // A pooled value that is also a constant or argument stays external. (A contraction's
  // constant operand has a slot of its own and no Value: its type comes from the array.)
  for (const auto& [slot_id, array] : in.constants) {
    storage[size_t(slot_id)].kind = Kind::kExternal;
    storage[size_t(slot_id)].type = array.type();
  }
  for (const ValuePlan& vp : plan.values) {
    auto it = in.slots.find(vp.value);
    if (!vp.in_arena() || it == in.slots.end()) continue;
    Kind k = storage[size_t(it->second)].kind;
    if (k != Kind::kArena)
      layout.elsewhere.emplace_back(vp.value, k == Kind::kPooled ? "pooled" : "external");
  }
  lay_out_buckets(plan, in, out);
  // Contraction products and kernel temporaries live only while their step runs, and
  // steps run one after another: every step lays its own out from the same scratch base.
  const size_t scratch = (plan.arena_bytes + 63) / 64 * 64;
  layout.scratch_offset = scratch;
  size_t arena_end = scratch, end = scratch;
  auto append = [&](const Step& s, const char* role, const TensorType& t) {
    size_t off = (end + 63) / 64 * 64;
    end = off + size_t(t.shape.num_elements()) * dtype_size(t.dtype);
    arena_end = std::max(arena_end, end);
    layout.scratch.push_back({s.name, role, t, off});
    return off;
  };
  for (Step& s : in.steps) {
    end = scratch;
    if (s.kind == Step::Kind::kContraction && !in.products_in_outputs.count(s.output)) {
      runtime::SlotStorage& st = storage[size_t(s.output)];
      st.kind = Kind::kArena;
      st.type = s.type;
      st.offset = append(s, "contraction product", s.type);
    }
    if (s.kernel) {
      s.kernel->temporary_offsets.clear();
      for (const TensorType& t : s.kernel->layout.temporaries)
        s.kernel->temporary_offsets.push_back(append(s, "kernel temporary", t));
    }
  }
  layout.arena_bytes = (arena_end + 63) / 64 * 64;
  return out;
}

std::string ArenaLayout::summary() const {
  std::string s = fmt::format(
      "# arena {} = planned values {} + scratch {} (contraction products and kernel "
      "temporaries, reused by every step)\n",
      format_bytes(arena_bytes), format_bytes(scratch_offset),
      format_bytes(arena_bytes - scratch_offset));
  s += fmt::format("# planned values: {}\n", plan.to_string());
  if (!elsewhere.empty()) {
    size_t unused = 0;
    for (const auto& [v, where] : elsewhere) unused += plan.of(v).size;
    s += fmt::format(
        "# {} planned value(s) ({}) are kept outside the arena by the executable "
        "(variables' new values, control-flow results); their planned bytes stay unused\n",
        elsewhere.size(), format_bytes(unused));
  }
  return s;
}

std::string ArenaLayout::to_text(const Graph& g) const {
  std::string s = summary();
  std::unordered_map<const Value*, std::string> moved(elsewhere.begin(), elsewhere.end());
  std::string table = plan.to_table(g);
  // to_table: to_string(), one line per value in plan.values order, one per bucket.
  size_t pos = table.find('\n') + 1;
  for (const ValuePlan& vp : plan.values) {
    size_t eol = table.find('\n', pos);
    std::string line = table.substr(pos, eol - pos);
    pos = eol + 1;
    if (auto it = moved.find(vp.value); it != moved.end())
      line += fmt::format(" (not used: the executable keeps it {})",
                          it->second == "pooled" ? "in a pooled buffer" : "outside");
    s += line + "\n";
  }
  s += table.substr(pos);  // the gradient buckets' lines
  for (const ScratchBuffer& b : scratch)
    s += fmt::format("scratch {} of {} {} {} B @ {}\n", b.role, b.step, b.type.to_string(),
                     size_t(b.type.shape.num_elements()) * dtype_size(b.type.dtype), b.offset);
  return s;
}

}  // namespace kiln::codegen
