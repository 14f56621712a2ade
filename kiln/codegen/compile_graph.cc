#include "kiln/codegen/compile_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "kiln/codegen/compiler.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/passes/memory_plan.h"
#include "kiln/passes/refine_shapes.h"
#include "kiln/runtime/knobs.h"

namespace kiln::codegen {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;
using Step = runtime::ExecutableStep;

const Node* contraction_of(const Graph& body) {
  for (const auto& n : body.nodes())
    if (n->kind() == NodeKind::kOp && op_info(n->op()).has(kContraction)) return n.get();
  return nullptr;
}

// A graph holding one op node of `n`'s kind and attributes on fresh parameters.
std::unique_ptr<Graph> one_op_body(const Node& n, std::string name) {
  auto g = std::make_unique<Graph>(std::move(name));
  std::vector<Value*> in;
  for (const Value* v : n.inputs()) in.push_back(g->add_parameter(v->type()));
  g->set_outputs({g->add_op(n.op(), in, n.attrs())->output()});
  return g;
}

std::string kernel_name(const Node& n) {
  std::string base = n.name().empty() ? std::string(n.op_name()) : n.name();
  return base;
}

runtime::Array literal_array(const ir::Literal& lit) {
  runtime::Array a = runtime::Array::empty(lit.type());
  if (lit.byte_size() > 0) std::memcpy(a.raw(), lit.data(), lit.byte_size());
  return a;
}

class GraphCompiler {
 public:
  explicit GraphCompiler(const Graph& g) : g_(g) {}

  // Compiles the graph; kernels (with their one-op bodies) are appended to `out` (nested
  // executables of cond / while bodies append theirs too). Fills out.arena when `top`.
  std::shared_ptr<const runtime::Executable> build(CompiledGraph& out, bool top) {
    find_in_place_updates();
    plan_ = plan_memory();
    std::vector<int> params, vars;
    for (const auto& p : g_.parameters()) params.push_back(slot(p.get()));
    for (const auto& v : g_.variables()) vars.push_back(slot(v.entry));
    for (const auto& up : g_.nodes()) add_node(*up, &out);
    std::vector<CompiledKernel> compiled = compile_kernels(requests_);
    for (size_t i = 0; i < compiled.size(); ++i) {
      runtime::KernelCall& call = *calls_[i];
      call.layout = compiled[i].layout;
      call.entry = compiled[i].entry;
      for (const auto& [o, in] : call.layout.in_place) in_place_slots_.insert(call.outputs[o]);
      out.kernels.push_back({requests_[i], std::move(compiled[i])});
    }
    for (auto& b : bodies_) out.kernel_bodies.push_back(std::move(b));
    std::vector<int> outs;
    for (const Value* v : g_.outputs()) {
      if (!v->shape().is_fully_known())
        throw Error(
            fmt::format("codegen: graph {} returns a value of unknown shape {} (a "
                        "stacked while's stack?); compiled graphs return values of "
                        "known shapes",
                        g_.name(), v->type().to_string()));
      outs.push_back(slot(v));
    }
    ArenaLayout arena = lay_out_memory();
    const size_t arena_bytes = arena.arena_bytes;
    if (top) out.arena = std::move(arena);
    return std::make_shared<runtime::Executable>(
        g_.name(), std::move(storage_), arena_bytes, std::move(params), std::move(vars),
        std::move(constants_), std::move(steps_), std::move(outs), std::move(buckets_));
  }

  // Only the requests (for dumps); `owned` keeps one-op bodies alive.
  std::vector<KernelRequest> requests(std::vector<std::unique_ptr<Graph>>& owned) {
    find_in_place_updates();
    plan_ = plan_memory();
    for (const auto& up : g_.nodes()) add_node(*up, nullptr);
    for (auto& b : bodies_) owned.push_back(std::move(b));
    return requests_;
  }

 private:
  int slot(const Value* v) {
    auto [it, inserted] = slots_.try_emplace(v, next_slot_);
    if (inserted) ++next_slot_;
    return it->second;
  }
  int fresh_slot() { return next_slot_++; }

  void check_known(const Node& n) {
    // A stacked while's stacks (outputs after its loop variables, before the trip count) get
    // their length at run time; they live outside the arena (the while step makes them).
    const size_t dynamic_from = n.while_stacked() ? n.while_loop_variables() : n.num_outputs();
    const size_t dynamic_to = n.while_stacked() ? 2 * n.while_loop_variables() : 0;
    for (size_t i = 0; i < n.num_outputs(); ++i)
      if (!(i >= dynamic_from && i < dynamic_to) && !n.output(i)->shape().is_fully_known())
        throw Error(
            fmt::format("codegen: {} in graph {} has unknown shape {}; compiled graphs "
                        "need concrete shapes (specialise the graph to its arguments)",
                        n.op_name(), g_.name(), n.output(i)->shape().to_string()));
  }

  // Variables a kernel may update in place: a value assigned to a variable (the variable's
  // only assignment) that is computed by a kernel which also reads the variable's entry value,
  // when no later step reads the entry value and it is not a graph output. Fills
  // assigned_to_ (value -> variable), position_ (node -> program position) and last_reader_
  // (value -> position of its last reader).
  void find_in_place_updates() {
    std::unordered_map<int, int> assignments;
    for (size_t p = 0; p < g_.nodes().size(); ++p) {
      const Node& n = *g_.nodes()[p];
      position_[&n] = p;
      for (const Value* v : n.inputs()) last_reader_[v] = p;
      if (n.kind() == NodeKind::kAssign || n.kind() == NodeKind::kAssignAdd ||
          n.kind() == NodeKind::kAssignSub)
        ++assignments[n.variable()];
    }
    for (const Value* v : g_.outputs()) last_reader_[v] = g_.nodes().size();
    for (const auto& up : g_.nodes())
      if (up->kind() == NodeKind::kAssign && assignments[up->variable()] == 1)
        assigned_to_[up->input(0)] = up->variable();
  }

  // The (output, input) pairs of node n's kernel that update a variable in place.
  // `contraction` (of a fusion body) must not read the variable: its GEMM runs block by
  // block alongside the epilogue that overwrites it.
  std::vector<std::pair<size_t, size_t>> in_place_pairs(const Node& n, const Node* contraction) {
    std::vector<std::pair<size_t, size_t>> pairs;
    for (size_t o = 0; o < n.num_outputs(); ++o) {
      auto it = assigned_to_.find(n.output(o));
      if (it == assigned_to_.end()) continue;
      const Value* entry = g_.variables()[size_t(it->second)].entry;
      if (entry == nullptr || last_reader_[entry] != position_.at(&n)) continue;
      for (size_t i = 0; i < n.inputs().size(); ++i) {
        if (n.input(i) != entry) continue;
        bool read_by_contraction = false;
        if (contraction != nullptr)
          for (const Value* cv : contraction->inputs())
            read_by_contraction |= cv->def() == Value::Def::kParameter && size_t(cv->index()) == i;
        if (!read_by_contraction) pairs.emplace_back(o, i);
        break;
      }
    }
    return pairs;
  }

  std::shared_ptr<runtime::KernelCall> request(KernelRequest r, std::vector<int> inputs,
                                               std::vector<const Value*> outputs) {
    auto call = std::make_shared<runtime::KernelCall>();
    call->inputs = std::move(inputs);
    for (const Value* v : outputs) {
      call->outputs.push_back(slot(v));
      call->output_types.push_back(v->type());
    }
    requests_.push_back(std::move(r));
    calls_.push_back(call);
    return call;
  }

  // Where every slot lives (runtime/executable.h): the memory plan's arena offsets (no
  // in-place reuse: kernel buffers never alias), pooled buffers for values that outlive the
  // call, and contraction products and kernel temporaries in a scratch area after the planned
  // values that every step reuses. Returns the layout (its arena_bytes is the arena size).
  // The memory plan (no in-place reuse: kernel buffers never alias). A reshape whose
  // operand and result both stay arena slots is a view: no step, its slot is the operand's
  // bytes. (Values read by an assignment leave the arena for a pool or the variable's buffer;
  // cond / while results and graph outputs are outside it already.)
  passes::MemoryPlan plan_memory() {
    passes::MemoryPlanOptions options;
    options.in_place = false;
    options.unknown_parameters = true;            // a sub-graph's parameters may receive stacks
    options.control_flow_results_outside = true;  // see the kCond / kWhile steps below
    options.bucket_bytes = bucket_bytes();
    std::unordered_set<const Value*> assigned;
    for (const auto& n : g_.nodes())
      if (n->is_assignment()) assigned.insert(n->input(0));
    for (const auto& n : g_.nodes())
      if (n->is_op(OpKind::Reshape) && !assigned.count(n->input(0)) && !assigned.count(n->output()))
        options.views.insert(n.get());
    return passes::plan_memory(g_, options);
  }

  bool is_view(const Node& n) const {
    return n.is_op(OpKind::Reshape) && plan_.of(n.output()).view_of != nullptr;
  }

  ArenaLayout lay_out_memory() {
    using Kind = runtime::SlotStorage::Kind;
    ArenaLayout layout;
    layout.plan = std::move(plan_);
    const passes::MemoryPlan& plan = layout.plan;
    storage_.assign(size_t(next_slot_), {});
    for (const auto& [v, s] : slots_) {
      runtime::SlotStorage& st = storage_[size_t(s)];
      st.type = v->type();
      const passes::ValuePlan& vp = plan.of(v);
      if (vp.kind == passes::BufferKind::kArena) {
        st.kind = Kind::kArena;
        st.offset = vp.offset;
      } else if (vp.kind == passes::BufferKind::kOutput) {
        st.kind = Kind::kPooled;
      }
    }
    for (const Step& s : steps_) {
      if (s.kind == Step::Kind::kAssign) {  // the new value outlives the call in the variable
        // (in place: the kernel's step binds the variable's own buffer, or a pooled copy)
        storage_[size_t(s.inputs[0])].kind =
            in_place_slots_.count(s.inputs[0]) ? Kind::kExternal : Kind::kPooled;
        storage_[size_t(s.output)].kind = Kind::kExternal;
      }
      if (s.kind == Step::Kind::kCond || s.kind == Step::Kind::kWhile)
        for (int o : s.outputs) storage_[size_t(o)].kind = Kind::kExternal;
    }
    // A pooled value that is also a constant or argument stays external. (A contraction's
    // constant operand has a slot of its own and no Value: its type comes from the array.)
    for (const auto& [slot_id, array] : constants_) {
      storage_[size_t(slot_id)].kind = Kind::kExternal;
      storage_[size_t(slot_id)].type = array.type();
    }
    for (const passes::ValuePlan& vp : plan.values) {
      auto it = slots_.find(vp.value);
      if (!vp.in_arena() || it == slots_.end()) continue;
      Kind k = storage_[size_t(it->second)].kind;
      if (k != Kind::kArena)
        layout.elsewhere.emplace_back(vp.value, k == Kind::kPooled ? "pooled" : "external");
    }
    lay_out_buckets(plan);
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
    for (Step& s : steps_) {
      end = scratch;
      if (s.kind == Step::Kind::kContraction && !products_in_outputs_.count(s.output)) {
        runtime::SlotStorage& st = storage_[size_t(s.output)];
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
    return layout;
  }

  // The plan's gradient buckets as the executable runs them: each all_reduce step learns its
  // bucket; every value the plan puts in a region must be an arena slot at its planned offset.
  void lay_out_buckets(const passes::MemoryPlan& plan) {
    std::unordered_map<int, size_t> step_of_output;
    for (size_t i = 0; i < steps_.size(); ++i)
      if (steps_[i].kind == Step::Kind::kOp && steps_[i].op == OpKind::AllReduce)
        step_of_output[steps_[i].output] = i;
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      const passes::CollectiveBucket& k = plan.buckets[b];
      runtime::CollectiveBucketLayout layout;
      layout.name = fmt::format("bucket {} ({} gradient(s), {} B)", b, k.members.size(), k.bytes);
      layout.dtype = k.dtype;
      layout.offset = k.offset;
      layout.bytes = k.bytes;
      for (size_t i = 0; i < k.members.size(); ++i) {
        const passes::BucketMember& m = k.members[i];
        const int out = slot(m.sum);
        for (const Value* v : {m.sum, m.packed.empty() ? m.gradient : nullptr}) {
          if (v == nullptr) continue;
          const runtime::SlotStorage& st = storage_[size_t(slot(v))];
          KILN_ASSERT(
              st.kind == runtime::SlotStorage::Kind::kArena && st.offset == plan.of(v).offset,
              "codegen: a value of a gradient bucket is not kept at its planned place");
        }
        layout.slots.push_back(out);
        const size_t end = i + 1 < k.members.size() ? k.members[i + 1].offset : k.bytes;
        if (end > m.offset + m.size)
          layout.padding.emplace_back(k.offset + m.offset + m.size, end - m.offset - m.size);
        Step& s = steps_.at(step_of_output.at(out));
        s.bucket = int(b);
        s.starts_bucket = i + 1 == k.members.size();
      }
      buckets_.push_back(std::move(layout));
    }
  }

  std::vector<int> input_slots(const Node& n) {
    std::vector<int> s;
    for (const Value* v : n.inputs()) s.push_back(slot(v));
    return s;
  }
  std::vector<const Value*> outputs_of(const Node& n) {
    std::vector<const Value*> o;
    for (size_t i = 0; i < n.num_outputs(); ++i) o.push_back(n.output(i));
    return o;
  }

  // `out`: where nested executables put their kernels (null: collecting requests only).
  void add_node(const Node& n, CompiledGraph* out) {
    check_known(n);
    Step s;
    switch (n.kind()) {
      case NodeKind::kConstant:
        constants_.emplace_back(slot(n.output()), literal_array(*n.literal()));
        return;
      case NodeKind::kAssign:
      case NodeKind::kAssignAdd:
      case NodeKind::kAssignSub:
        s.kind = Step::Kind::kAssign;
        s.name = std::string(n.op_name());
        s.variable = n.variable();
        s.assign_kind = n.kind();
        s.inputs = input_slots(n);
        s.output = slot(n.output());
        steps_.push_back(std::move(s));
        return;
      case NodeKind::kCond:
      case NodeKind::kWhile:
        s.kind = n.kind() == NodeKind::kCond ? Step::Kind::kCond : Step::Kind::kWhile;
        s.name = std::string(n.op_name());
        s.stacked = n.while_stacked();
        if (s.stacked && n.output(n.while_loop_variables())->shape()[0] >= 0)
          s.stack_trips = n.output(n.while_loop_variables())->shape()[0];
        if (s.stacked)  // a stack no step reads (a gradient loop's, say) is not built
          for (size_t i = 0; i < n.while_loop_variables(); ++i)
            s.stacks_kept.push_back(last_reader_.count(n.output(n.while_loop_variables() + i)) !=
                                    0);
        s.inputs = input_slots(n);
        if (out != nullptr)
          for (const auto& sub : n.subgraphs())
            s.bodies.push_back(GraphCompiler(*sub).build(*out, /*top=*/false));
        for (const Value* v : outputs_of(n)) s.outputs.push_back(slot(v));
        steps_.push_back(std::move(s));
        return;
      case NodeKind::kFusion:
        add_fusion(n);
        return;
      case NodeKind::kOp:
        break;
    }
    if (is_view(n)) return;  // its slot views the operand's arena bytes (plan_memory)
    if (can_lower(n)) {
      bodies_.push_back(one_op_body(n, kernel_name(n)));
      s.kind = Step::Kind::kKernel;
      s.name = kernel_name(n);
      s.kernel = request({bodies_.back().get(), s.name, nullptr, in_place_pairs(n, nullptr)},
                         input_slots(n), outputs_of(n));
      steps_.push_back(std::move(s));
      return;
    }
    s.kind = Step::Kind::kOp;
    s.name = std::string(n.op_name());
    s.op = n.op();
    s.attrs = n.attrs();
    s.inputs = input_slots(n);
    s.type = n.output()->type();
    s.output = slot(n.output());
    steps_.push_back(std::move(s));
  }

  void add_fusion(const Node& n) {
    const Graph& body = n.subgraph(0);
    std::string name(n.fusion_name());
    Step s;
    s.name = name;
    const Node* c = contraction_of(body);
    if (c == nullptr) {
      s.kind = Step::Kind::kKernel;
      s.kernel = request({&body, name, nullptr, in_place_pairs(n, nullptr)}, input_slots(n),
                         outputs_of(n));
      steps_.push_back(std::move(s));
      return;
    }
    // The contraction runs in the library; the rest of the group is its epilogue kernel.
    s.kind = Step::Kind::kContraction;
    s.op = c->op();
    s.attrs = c->attrs();
    s.type = c->output()->type();
    for (const Value* v : c->inputs()) {
      if (v->def() == Value::Def::kParameter) {
        s.inputs.push_back(slot(n.input(size_t(v->index()))));
      } else if (v->producer() != nullptr && v->producer()->kind() == NodeKind::kConstant) {
        int cs = fresh_slot();
        constants_.emplace_back(cs, literal_array(*v->producer()->literal()));
        s.inputs.push_back(cs);
      } else {
        throw Error(
            fmt::format("codegen: the contraction of group {} reads a value computed "
                        "inside the group; fusion must not put producers of a "
                        "contraction in its group",
                        name));
      }
    }
    // A group output that is the contraction's result itself (a convolution's product the
    // backward pass reads) receives the product directly, instead of the epilogue copying it
    // there from a scratch buffer; the epilogue kernel is built without that output.
    size_t product_output = n.num_outputs();
    for (size_t j = 0; j < body.outputs().size() && product_output == n.num_outputs(); ++j)
      if (body.outputs()[j] == c->output() && !assigned_to_.count(n.output(j))) product_output = j;
    if (product_output == n.num_outputs()) {
      s.output = fresh_slot();
      std::vector<int> in = input_slots(n);
      in.push_back(s.output);
      s.kernel = request({&body, name, c, in_place_pairs(n, c)}, std::move(in), outputs_of(n));
      steps_.push_back(std::move(s));
      return;
    }
    s.output = slot(n.output(product_output));
    products_in_outputs_.insert(s.output);
    std::unique_ptr<Graph> epilogue = body.clone();
    std::vector<Value*> kept;
    std::vector<const Value*> kept_outputs;
    for (size_t j = 0; j < body.outputs().size(); ++j)
      if (j != product_output) {
        kept.push_back(epilogue->outputs()[j]);
        kept_outputs.push_back(n.output(j));
      }
    if (kept.empty()) {  // the group is the contraction alone
      steps_.push_back(std::move(s));
      return;
    }
    epilogue->set_outputs(std::move(kept));
    size_t c_index = 0;
    while (body.nodes()[c_index].get() != c) ++c_index;
    std::vector<std::pair<size_t, size_t>> in_place;
    for (auto [o, i] : in_place_pairs(n, c))
      if (o != product_output) in_place.emplace_back(o > product_output ? o - 1 : o, i);
    bodies_.push_back(std::move(epilogue));
    std::vector<int> in = input_slots(n);
    in.push_back(s.output);
    s.kernel = request(
        {bodies_.back().get(), name, bodies_.back()->nodes()[c_index].get(), std::move(in_place)},
        std::move(in), kept_outputs);
    steps_.push_back(std::move(s));
  }

  const Graph& g_;
  passes::MemoryPlan plan_;  // made first; lay_out_memory moves it into the layout
  std::unordered_map<const Value*, int> slots_;
  std::unordered_map<const Node*, size_t> position_;
  std::unordered_map<const Value*, size_t> last_reader_;
  std::unordered_map<const Value*, int> assigned_to_;
  std::unordered_set<int> in_place_slots_;       // outputs written into a variable's buffer
  std::unordered_set<int> products_in_outputs_;  // contraction products held by a group output
  int next_slot_ = 0;
  std::vector<std::pair<int, runtime::Array>> constants_;
  std::vector<runtime::SlotStorage> storage_;
  std::vector<Step> steps_;
  std::vector<runtime::CollectiveBucketLayout> buckets_;
  std::vector<KernelRequest> requests_;
  std::vector<std::shared_ptr<runtime::KernelCall>> calls_;
  std::vector<std::unique_ptr<Graph>> bodies_;
};

}  // namespace

namespace {
std::mutex bucket_mutex;
std::optional<size_t> bucket_bytes_set;
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

CompiledGraph compile_graph_in_full(const Graph& graph) {
  CompiledGraph out;
  out.executable = GraphCompiler(graph).build(out, /*top=*/true);
  return out;
}

std::shared_ptr<const runtime::Executable> compile_graph(const Graph& graph) {
  return compile_graph_in_full(graph).executable;
}

std::vector<KernelRequest> kernel_requests(const Graph& graph,
                                           std::vector<std::unique_ptr<Graph>>& owned) {
  std::vector<KernelRequest> out = GraphCompiler(graph).requests(owned);
  for (const auto& n : graph.nodes())
    if (n->kind() == NodeKind::kCond || n->kind() == NodeKind::kWhile)
      for (const auto& sub : n->subgraphs()) {
        auto more = kernel_requests(*sub, owned);
        out.insert(out.end(), more.begin(), more.end());
      }
  return out;
}

std::string ArenaLayout::summary() const {
  std::string s = fmt::format(
      "# arena {} = planned values {} + scratch {} (contraction products and kernel "
      "temporaries, reused by every step)\n",
      passes::format_bytes(arena_bytes), passes::format_bytes(scratch_offset),
      passes::format_bytes(arena_bytes - scratch_offset));
  s += fmt::format("# planned values: {}\n", plan.to_string());
  if (!elsewhere.empty()) {
    size_t unused = 0;
    for (const auto& [v, where] : elsewhere) unused += plan.of(v).size;
    s += fmt::format(
        "# {} planned value(s) ({}) are kept outside the arena by the executable "
        "(variables' new values, control-flow results); their planned bytes stay unused\n",
        elsewhere.size(), passes::format_bytes(unused));
  }
  return s;
}

std::string ArenaLayout::to_text(const Graph& g) const {
  std::string s = summary();
  std::unordered_map<const Value*, std::string> moved(elsewhere.begin(), elsewhere.end());
  std::string table = plan.to_table(g);
  // to_table: to_string(), one line per value in plan.values order, one per bucket.
  size_t pos = table.find('\n') + 1;
  for (const passes::ValuePlan& vp : plan.values) {
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

CompiledFunction compile_function(const Graph& traced,
                                  const std::vector<TensorType>& argument_types,
                                  const passes::PipelineOptions& options) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  CompiledFunction out;
  out.specialized = traced.clone();
  passes::specialize_parameters(*out.specialized, argument_types);
  out.optimized = out.specialized->clone();
  passes::PassPipeline pipeline = passes::optimize_pipeline(options);
  pipeline.run(*out.optimized);
  out.pass_timings = pipeline.timings();
  auto optimized = Clock::now();
  out.optimize_seconds = std::chrono::duration<double>(optimized - start).count();
  out.code = compile_graph_in_full(*out.optimized);
  out.codegen_seconds = std::chrono::duration<double>(Clock::now() - optimized).count();
  return out;
}

}  // namespace kiln::codegen
