#include "kiln/runtime/executable.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <type_traits>

#include "kiln/ir/error.h"
#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/collectives.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

void check_status(const KernelCall& call, int32_t status) {
  if (status == kKernelIntegerDivisionByZero)
    throw Error(
        fmt::format("div: integer division by zero in compiled kernel {} (a divisor "
                    "has a zero; check the divisor or use a float dtype)",
                    call.layout.symbol));
  if (status != kKernelOk)
    throw Error(fmt::format("compiled kernel {} reported status {}", call.layout.symbol, status));
}

int64_t grain_rows(const KernelLayout& l) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, l.row_elements));
}

// The frame buffers of a kernel call: inputs, outputs (slots already hold their arrays),
// temporaries (in the arena). An overwriting output and its input both get the output's buffer
// (Executable::bind_overwrites put the input's contents there).
std::vector<void*> kernel_buffers(const KernelCall& call, std::vector<Array>& slots, char* arena) {
  std::vector<void*> buffers;
  buffers.reserve(call.inputs.size() + call.outputs.size() + call.temporary_offsets.size());
  for (int s : call.inputs) buffers.push_back(slots[size_t(s)].raw());
  for (int s : call.outputs) buffers.push_back(slots[size_t(s)].raw());
  for (size_t off : call.temporary_offsets) buffers.push_back(arena + off);
  for (const auto& [o, i] : call.layout.overwrites) buffers[i] = buffers[call.inputs.size() + o];
  return buffers;
}

// gather(params, i, axis 0) with a scalar index i of heap-owned params (a while's stacks, a
// variable's value, an argument): row i is contiguous, so the result is a view of it (the view
// keeps params alive; arrays are immutable, and a view's owner counts as shared, so nothing
// updates it in place). An empty Array when the step is not such a gather (or the index is
// out of range: the kernel reports it; or rows are not 64-byte multiples). Params in this
// call's arena are not viewed: a later step may reuse their bytes. Params that are an argument
// of the call (`argument`: a while body's operand in its caller's arena, say) are viewed even
// when they are views themselves: the caller keeps those bytes for the whole call, and no view
// outlives it (results are detached).
Array row_view(const ExecutableStep& s, std::span<const Array> in, bool argument) {
  if (s.op != OpKind::Gather || in.size() != 2 || in[1].shape.rank() != 0) return {};
  const Array& params = in[0];
  if (!params.storage || (params.storage->is_view() && !argument) || params.shape.rank() == 0 ||
      s.attrs.get_int("axis", "gather") != 0)
    return {};
  const int64_t i =
      in[1].dtype == DType::i32 ? int64_t(*in[1].data<int32_t>()) : *in[1].data<int64_t>();
  const size_t row_bytes = size_t(s.type.shape.num_elements()) * dtype_size(s.type.dtype);
  // Kernels take buffers 64-byte aligned (codegen/lower_kernel.cc).
  if (i < 0 || i >= params.shape[0] || row_bytes % kAlignment != 0) return {};
  auto* data = static_cast<char*>(params.raw()) + size_t(i) * row_bytes;
  return Array{s.type.dtype, s.type.shape, Storage::view(data, row_bytes, params.storage)};
}

// A 2-d matmul whose epilogue reads the product only at the rows it computes.
bool blockable(const ExecutableStep& s, std::span<const Array> in) {
  if (s.op != OpKind::MatMul || !s.kernel) return false;
  if (in[0].shape.rank() != 2 || in[1].shape.rank() != 2 ||
      (s.type.dtype != DType::f32 && s.type.dtype != DType::f64 && s.type.dtype != DType::bf16))
    return false;
  const KernelLayout& l = s.kernel->layout;
  if (l.inputs_by_row.empty() || !l.inputs_by_row.back()) return false;
  int64_t m = s.type.shape[0], n = s.type.shape[1];
  if (l.extent != m && l.extent != m * n) return false;
  // Too few rows to split (gemm() would split the columns): the product runs as one parallel
  // GEMM before the epilogue, instead of a row block per task that leaves threads idle.
  const bool ta = s.attrs.get_bool("transpose_a", "matmul"),
             tb = s.attrs.get_bool("transpose_b", "matmul");
  const int64_t k = ta ? in[0].shape[0] : in[0].shape[1];
  // (bf16 products run on the float32 engine: gemm_bf16.)
  const bool f32 = s.type.dtype != DType::f64;
  const int64_t tasks =
      f32 ? gemm_tasks<float>(m, n, k, ta, tb) : gemm_tasks<double>(m, n, k, ta, tb);
  const int64_t row_blocks =
      f32 ? gemm_row_blocks<float>(m, n, k, ta, tb) : gemm_row_blocks<double>(m, n, k, ta, tb);
  // A float32 product whose tasks split the columns to pack B block by block also runs whole,
  // its epilogue after it (runtime/gemm_plan.cc: faster than row blocks each packing all of B).
  if (s.type.dtype == DType::f32 && tasks > 1 && gemm_packs_b_by_columns(m, n, k, ta, tb))
    return false;
  return tasks <= 1 || row_blocks > 1;
}

// A convolution (conv2d, conv2d_backprop_input) whose epilogue reads the product only at the
// images it computes: the epilogue then runs image by image after them (conv_by_images).
bool conv_blockable(const ExecutableStep& s, std::span<const Array> in) {
  if ((s.op != OpKind::Conv2D && s.op != OpKind::Conv2DBackpropInput) || !s.kernel) return false;
  if ((s.type.dtype != DType::f32 && s.type.dtype != DType::bf16) || s.type.shape.rank() != 4 ||
      in.size() != 2)
    return false;
  const KernelLayout& l = s.kernel->layout;
  if (l.inputs_by_row.empty() || !l.inputs_by_row.back()) return false;
  if (l.iteration == "rows") return l.extent == s.type.shape[0];  // a row per image
  return l.iteration == "flat" && l.extent == s.type.shape.num_elements();
}

// The convolution image by image, the epilogue's rows of each image right after it; false
// (nothing run) where the convolution has no such form.
bool blocked_conv(const ExecutableStep& s, std::span<const Array> in, Array& product,
                  std::span<void* const> buffers) {
  const KernelCall& call = *s.kernel;
  const int64_t scale = call.layout.extent / s.type.shape[0];
  std::atomic<int32_t> failed{0};
  const bool ran = conv_by_images(s.op, in, s.attrs, product, [&](int64_t n0, int64_t n1) {
    int32_t status = 0;
    KernelFrame frame{buffers.data(), &status};
    call.entry(&frame, n0 * scale, n1 * scale);
    if (status != 0) failed.store(status);
  });
  if (ran) check_status(call, failed.load());
  return ran;
}

// The product in blocks of whole rows, each block's epilogue rows run right after it. A bf16
// product is computed in float32 scratch (gemm_bf16: its operands widened as they are packed, a
// float32 operand of a fused cast rounded first), each block's rows rounded into c right before
// their epilogue rows.
template <typename T>
void blocked_matmul(const ExecutableStep& s, std::span<const Array> in, Array& c,
                    std::span<void* const> buffers) {
  bool ta = s.attrs.get_bool("transpose_a", "matmul"),
       tb = s.attrs.get_bool("transpose_b", "matmul");
  const int64_t m = s.type.shape[0], n = s.type.shape[1];
  const int64_t k = ta ? in[0].shape[0] : in[0].shape[1];
  const int64_t lda = in[0].shape[1], ldb = in[1].shape[1];
  const KernelCall& call = *s.kernel;
  const int64_t scale = call.layout.extent == m ? 1 : n;
  std::atomic<int32_t> failed{0};
  auto epilogue = [&](int64_t r0, int64_t r1) {
    int32_t status = 0;
    KernelFrame frame{buffers.data(), &status};
    call.entry(&frame, r0 * scale, r1 * scale);
    if (status != 0) failed.store(status);
  };
  if constexpr (std::is_same_v<T, bfloat16>) {
    Scratch product(ScratchSlot::kBf16Result, size_t(m * n) * sizeof(float));
    const float* f = product.as<float>();
    bfloat16* out = c.data<bfloat16>();
    const std::function<void(int64_t, int64_t)> rows = [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0 * n; i < r1 * n; ++i) out[i] = bfloat16::from_float(f[i]);
      epilogue(r0, r1);
    };
    gemm_bf16(ta, tb, m, n, k, bf16_matmul_operand(in[0]), lda, bf16_matmul_operand(in[1]), ldb,
              product.as<float>(), n, true, &rows);
  } else {
    gemm_rows<T>(ta, tb, m, n, k, in[0].data<T>(), lda, in[1].data<T>(), ldb, c.data<T>(), n,
                 epilogue);
  }
  check_status(call, failed.load());
}

const char* category_of(ExecutableStep::Kind k) {
  switch (k) {
    case ExecutableStep::Kind::kKernel:
      return "kernel";
    case ExecutableStep::Kind::kContraction:
      return "contraction";
    case ExecutableStep::Kind::kOp:
      return "op";
    case ExecutableStep::Kind::kAssign:
      return "assign";
    default:
      return "control";
  }
}

}  // namespace

Array Executable::detach(const Array& a) {
  if (!a.storage || !a.storage->is_view()) return a;
  Array c = Array::empty(a.type());
  if (a.nbytes() > 0) std::memcpy(c.raw(), a.raw(), a.nbytes());
  return c;
}

void run_kernel_call(const KernelCall& call, std::span<void* const> buffers) {
  const int64_t extent = call.layout.extent;
  if (extent <= 0) return;
  const int64_t grain = grain_rows(call.layout);
  if (extent <= grain || num_threads() == 1) {
    int32_t status = 0;
    KernelFrame frame{buffers.data(), &status};
    call.entry(&frame, 0, extent);
    check_status(call, status);
    return;
  }
  std::atomic<int32_t> failed{0};
  parallel_for(extent, grain, [&](int64_t b, int64_t e) {
    int32_t status = 0;
    KernelFrame frame{buffers.data(), &status};
    call.entry(&frame, b, e);
    if (status != 0) failed.store(status);
  });
  check_status(call, failed.load());
}

struct Executable::Pools {
  std::mutex mutex;
  std::vector<std::shared_ptr<Storage>> free_arenas;
  std::vector<std::vector<std::shared_ptr<Storage>>> pooled;  // per slot
  ArenaAllocations allocated;
};

Executable::Executable(std::string name, std::vector<SlotStorage> slots, size_t arena_bytes,
                       std::vector<int> parameter_slots, std::vector<int> variable_slots,
                       std::vector<std::pair<int, Array>> constants,
                       std::vector<ExecutableStep> steps, std::vector<int> output_slots,
                       std::vector<CollectiveBucketLayout> buckets)
    : name_(std::move(name)),
      slot_storage_(std::move(slots)),
      arena_bytes_(arena_bytes),
      pools_(std::make_unique<Pools>()),
      parameter_slots_(std::move(parameter_slots)),
      variable_slots_(std::move(variable_slots)),
      constants_(std::move(constants)),
      steps_(std::move(steps)),
      output_slots_(std::move(output_slots)),
      buckets_(std::move(buckets)) {
  pools_->pooled.resize(slot_storage_.size());
  variable_of_slot_.assign(slot_storage_.size(), -1);
  argument_slot_.assign(slot_storage_.size(), false);
  for (int p : parameter_slots_) argument_slot_[size_t(p)] = true;
  for (size_t i = 0; i < variable_slots_.size(); ++i)
    variable_of_slot_[size_t(variable_slots_[i])] = int(i);
  output_parameter_.assign(output_slots_.size(), -1);
  for (size_t o = 0; o < output_slots_.size(); ++o)
    for (size_t p = 0; p < parameter_slots_.size(); ++p)
      if (parameter_slots_[p] == output_slots_[o]) output_parameter_[o] = int(p);
  auto bytes_of = [&](int slot) {
    const TensorType& t = slot_storage_[size_t(slot)].type;
    return t.shape.is_fully_known() ? double(t.shape.num_elements()) * double(dtype_size(t.dtype))
                                    : 0.0;
  };
  // What a step reads of its operands: all of each, except input 0 of an op that selects some
  // of its elements (slice, gather), read only as much as the output.
  auto read_of = [&](const std::vector<int>& inputs, double output_bytes, bool selects) {
    double bytes = 0;
    for (size_t j = 0; j < inputs.size(); ++j)
      bytes +=
          j == 0 && selects ? std::min(bytes_of(inputs[j]), output_bytes) : bytes_of(inputs[j]);
    return bytes;
  };
  // A concat moves each piece once (read and written), except a piece planned in its window
  // of the concat's arena result (a concat region, codegen/memory_plan.h): computed there, it
  // is neither read nor written by the concat.
  auto concat_bytes = [&](const ExecutableStep& s) {
    const SlotStorage& out = slot_storage_[size_t(s.output)];
    const bool contiguous =
        out.kind == SlotStorage::Kind::kArena &&
        rules::concat_pieces_contiguous(s.type.shape, s.attrs.get_int("axis", "concat"));
    double bytes = 0, window = double(out.offset);
    for (int piece : s.inputs) {
      const SlotStorage& in = slot_storage_[size_t(piece)];
      if (!contiguous || in.kind != SlotStorage::Kind::kArena || double(in.offset) != window)
        bytes += 2 * bytes_of(piece);
      window += bytes_of(piece);
    }
    return bytes;
  };
  for (ExecutableStep& s : steps_) {
    double bytes = 0;
    if (s.kind == ExecutableStep::Kind::kOp && s.op == OpKind::Concat) {
      bytes = concat_bytes(s);
    } else if (s.output >= 0 && s.kind != ExecutableStep::Kind::kAssign) {
      bytes += bytes_of(s.output);
      bytes += read_of(s.inputs, bytes_of(s.output), s.selects);
    } else {
      bytes += read_of(s.inputs, 0, false);
    }
    if (s.kernel) {
      double written = 0;
      for (int o : s.kernel->outputs) written += bytes_of(o);
      if (s.kind == ExecutableStep::Kind::kKernel)
        bytes += read_of(s.kernel->inputs, written, s.selects);
      bytes += written;
    }
    s.bytes = s.kind == ExecutableStep::Kind::kAssign ? 0.0 : bytes;  // assign moves no data
    if (s.kind == ExecutableStep::Kind::kContraction && s.op == OpKind::MatMul) {
      const Shape& a = slot_storage_[size_t(s.inputs[0])].type.shape;
      bool ta = s.attrs.get_bool("transpose_a", "matmul");
      int64_t k = ta ? a[a.rank() - 2] : a[a.rank() - 1];
      s.flops = 2.0 * double(s.type.shape.num_elements()) * double(k);
    }
  }
}

Executable::~Executable() = default;

std::shared_ptr<Storage> Executable::acquire_arena() const {
  {
    std::lock_guard<std::mutex> lock(pools_->mutex);
    if (!pools_->free_arenas.empty()) {
      std::shared_ptr<Storage> a = std::move(pools_->free_arenas.back());
      pools_->free_arenas.pop_back();
      return a;
    }
    ++pools_->allocated.arenas;
    pools_->allocated.bytes += arena_bytes_;
  }
  return Storage::allocate(arena_bytes_);
}

Executable::ArenaAllocations Executable::arena_allocations() const {
  std::lock_guard<std::mutex> lock(pools_->mutex);
  return pools_->allocated;
}

void Executable::release_arena(std::shared_ptr<Storage> arena) const {
  std::lock_guard<std::mutex> lock(pools_->mutex);
  pools_->free_arenas.push_back(std::move(arena));
}

void Executable::bind_overwrites(const KernelCall& call, std::vector<Array>& slots,
                                 const std::vector<long>& donated) const {
  for (const auto& [o, i] : call.layout.overwrites) {
    const int in = call.inputs[i], out = call.outputs[o];
    Array& old_value = slots[size_t(in)];
    // Held by the donating caller and by this slot only: nobody else can observe the
    // variable's previous value.
    const int var = variable_of_slot_[size_t(in)];
    if (var >= 0 && donated[size_t(var)] > 0 &&
        old_value.storage.use_count() == donated[size_t(var)] + 1) {
      slots[size_t(out)] = old_value;
      continue;
    }
    Array copy = acquire_pooled(size_t(out));
    if (copy.nbytes() > 0) std::memcpy(copy.raw(), old_value.raw(), copy.nbytes());
    slots[size_t(out)] = std::move(copy);
  }
}

Array Executable::acquire_pooled(size_t slot, bool spare) const {
  const TensorType& t = slot_storage_[slot].type;
  const size_t bytes = size_t(t.shape.num_elements()) * dtype_size(t.dtype);
  std::lock_guard<std::mutex> lock(pools_->mutex);
  auto& pool = pools_->pooled[slot];
  if (pool.empty())  // this call's buffer and the next call's (this one may be kept)
    for (int i = 0; i < (spare ? 2 : 1); ++i) pool.push_back(Storage::allocate(bytes));
  for (const auto& s : pool)
    if (s.use_count() == 1) return Array{t.dtype, t.shape, s};
  pool.push_back(Storage::allocate(bytes));
  return Array{t.dtype, t.shape, pool.back()};
}

std::vector<Array> Executable::run(std::span<const Array> args, std::vector<Array>& variables,
                                   const std::vector<bool>& donate,
                                   std::span<const Array> into) const {
  KILN_ASSERT(args.size() == parameter_slots_.size(), "executable called with the wrong arity");
  KILN_ASSERT(variables.size() == variable_slots_.size(), "executable: wrong variable count");
  KILN_ASSERT(into.empty() || into.size() == output_slots_.size(),
              "executable: `into` must hold one array per output");
  // Per slot: the caller's array to compute it in (a pooled output slot returned once).
  std::vector<const Array*> given(slot_storage_.size(), nullptr);
  for (size_t j = 0; j < into.size(); ++j) {
    const int o = output_slots_[j];
    if (into[j].storage && slot_storage_[size_t(o)].kind == SlotStorage::Kind::kPooled &&
        into[j].type() == slot_storage_[size_t(o)].type &&
        std::count(output_slots_.begin(), output_slots_.end(), o) == 1)
      given[size_t(o)] = &into[j];
  }
  std::vector<Array> slots(slot_storage_.size());
  std::shared_ptr<Storage> arena = arena_bytes_ > 0 ? acquire_arena() : nullptr;
  char* base = arena ? static_cast<char*>(arena->data()) : nullptr;
  for (size_t i = 0; i < slot_storage_.size(); ++i) {
    const SlotStorage& st = slot_storage_[i];
    if (st.kind == SlotStorage::Kind::kArena)
      slots[i] = Array{
          st.type.dtype, st.type.shape,
          Storage::view(base + st.offset,
                        size_t(st.type.shape.num_elements()) * dtype_size(st.type.dtype), arena)};
    else if (st.kind == SlotStorage::Kind::kPooled)
      slots[i] = given[i] != nullptr ? *given[i] : acquire_pooled(i);
  }
  for (size_t i = 0; i < args.size(); ++i) slots[size_t(parameter_slots_[i])] = args[i];
  // Per variable: how many hold its storage now, if the caller donated it (else 0). The
  // variable's buffer may be overwritten if no one else took hold of it by then.
  std::vector<long> donated(variables.size(), 0);
  for (size_t i = 0; i < variables.size(); ++i) {
    if (i < donate.size() && donate[i] && variables[i].storage &&
        !variables[i].storage->is_borrowed())
      donated[i] = variables[i].storage.use_count();
    slots[size_t(variable_slots_[i])] = variables[i];
  }
  for (const auto& [slot, array] : constants_) slots[size_t(slot)] = array;
  auto gather = [&](const std::vector<int>& ids) {
    std::vector<Array> v;
    for (int s : ids) v.push_back(slots[size_t(s)]);
    return v;
  };
  ProfileScope call_scope(name_, "call");
  // all_reduce steps run on the communicator's thread while the following steps compute
  // (runtime/collectives.h): a step that reads a slot still being summed waits for it first.
  Communicator* comm = communicator();
  // (the slots each sum fills: one all_reduce's result, or a bucket's)
  std::vector<std::pair<std::vector<int>, std::unique_ptr<PendingCollective>>> pending;
  // Per slot: a step reads it or the call returns it (only with several ranks).
  std::vector<char> read;
  if (comm && comm->size() > 1) {
    read.assign(slot_storage_.size(), 0);
    for (int o : output_slots_) read[size_t(o)] = 1;
    for (const ExecutableStep& s : steps_) {
      for (int i : s.inputs) read[size_t(i)] = 1;
      if (s.kernel)
        for (int i : s.kernel->inputs) read[size_t(i)] = 1;
    }
  }
  auto settle = [&](const std::vector<int>& read) {
    for (auto it = pending.begin(); it != pending.end();)
      if (std::find_first_of(read.begin(), read.end(), it->first.begin(), it->first.end()) !=
          read.end()) {
        it->second->wait();
        it = pending.erase(it);
      } else {
        ++it;
      }
  };
  for (const ExecutableStep& s : steps_) {
    if (!pending.empty()) {
      settle(s.inputs);
      if (s.kernel) settle(s.kernel->inputs);
    }
    ProfileScope step_scope(s.name, category_of(s.kind), s.flops, s.bytes);
    switch (s.kind) {
      case ExecutableStep::Kind::kOp: {
        // A bucket's all_reduce: its result already lies in the bucket's region; the operand
        // is there too unless it is packed (copied now). The last one sums the region.
        if (s.op == OpKind::AllReduce && s.bucket >= 0 && comm && comm->size() > 1) {
          Array& out = slots[size_t(s.output)];
          const Array& in = slots[size_t(s.inputs[0])];
          if (out.nbytes() > 0 && out.raw() != in.raw()) {
            std::memcpy(out.raw(), in.raw(), out.nbytes());
            add_collective_packed(int64_t(out.nbytes()));
          }
          if (s.starts_bucket) {
            const CollectiveBucketLayout& b = buckets_[size_t(s.bucket)];
            for (const auto& [offset, bytes] : b.padding) std::memset(base + offset, 0, bytes);
            pending.emplace_back(
                b.slots,
                comm->start_all_reduce_sum(base + b.offset, int64_t(b.bytes / dtype_size(b.dtype)),
                                           b.dtype, name_ + ": " + b.name));
          }
          break;
        }
        // (Only when a step reads the sum or the call returns it: the memory plan keeps the
        // sum's arena bytes until its last reader, so nothing overwrites them meanwhile.)
        if (s.op == OpKind::AllReduce && comm && comm->size() > 1 && read[size_t(s.output)]) {
          Array& out = slots[size_t(s.output)];
          if (!out.storage) out = Array::empty(s.type);
          const Array& in = slots[size_t(s.inputs[0])];
          if (out.nbytes() > 0 && out.raw() != in.raw())
            std::memcpy(out.raw(), in.raw(), out.nbytes());
          pending.emplace_back(
              std::vector<int>{s.output},
              comm->start_all_reduce_sum(out.raw(), out.shape.num_elements(), out.dtype,
                                         name_ + ": " + s.name + " " + s.type.to_string()));
          break;
        }
        std::vector<Array> in = gather(s.inputs);
        Array& out = slots[size_t(s.output)];
        if (Array row = row_view(s, in, argument_slot_[size_t(s.inputs[0])]); row.storage)
          out = std::move(row);
        else if (out.storage)
          kernel_for(s.op)(in, s.attrs, out);  // into its planned buffer
        else
          out = run_kernel(s.op, in, s.attrs, s.type);
        break;
      }
      case ExecutableStep::Kind::kKernel: {
        bind_overwrites(*s.kernel, slots, donated);
        std::vector<void*> buffers = kernel_buffers(*s.kernel, slots, base);
        run_kernel_call(*s.kernel, buffers);
        break;
      }
      case ExecutableStep::Kind::kContraction: {
        std::vector<Array> in = gather(s.inputs);
        if (s.kernel) bind_overwrites(*s.kernel, slots, donated);
        if (blockable(s, in)) {
          std::vector<void*> buffers = kernel_buffers(*s.kernel, slots, base);
          if (s.type.dtype == DType::f32)
            blocked_matmul<float>(s, in, slots[size_t(s.output)], buffers);
          else if (s.type.dtype == DType::bf16)
            blocked_matmul<bfloat16>(s, in, slots[size_t(s.output)], buffers);
          else
            blocked_matmul<double>(s, in, slots[size_t(s.output)], buffers);
          break;
        }
        Array& product = slots[size_t(s.output)];
        if (product.storage && conv_blockable(s, in)) {
          std::vector<void*> buffers = kernel_buffers(*s.kernel, slots, base);
          if (blocked_conv(s, in, product, buffers)) break;
        }
        if (product.storage)
          kernel_for(s.op)(in, s.attrs, product);
        else
          product = run_kernel(s.op, in, s.attrs, s.type);
        if (s.kernel) {
          // Its own event, nested in the contraction's: the table's self time of the
          // contraction is then the product alone.
          ProfileScope epilogue_scope(s.name, "epilogue");
          std::vector<void*> buffers = kernel_buffers(*s.kernel, slots, base);
          run_kernel_call(*s.kernel, buffers);
        }
        break;
      }
      case ExecutableStep::Kind::kAssign: {
        Array value = slots[size_t(s.inputs[0])];
        Array& var = variables[size_t(s.variable)];
        if (s.assign_kind == ir::NodeKind::kAssignAdd ||
            s.assign_kind == ir::NodeKind::kAssignSub) {
          Array pair[2] = {var, value};
          value = run_op(s.assign_kind == ir::NodeKind::kAssignAdd ? OpKind::Add : OpKind::Sub,
                         pair, {});
        }
        var = value;
        slots[size_t(s.output)] = value;
        break;
      }
      case ExecutableStep::Kind::kCond: {
        const Array& pred = slots[size_t(s.inputs[0])];
        const bool take = pred.data<bool>()[0];
        std::vector<Array> operands(s.inputs.size() - 1);
        for (size_t i = 1; i < s.inputs.size(); ++i) operands[i - 1] = slots[size_t(s.inputs[i])];
        std::vector<Array> no_vars;
        std::vector<Array> out = s.bodies[take ? 0 : 1]->run(operands, no_vars);
        for (size_t i = 0; i < s.outputs.size(); ++i) slots[size_t(s.outputs[i])] = detach(out[i]);
        break;
      }
      case ExecutableStep::Kind::kWhile:
        run_while(s, slots);
        break;
    }
  }
  for (auto& [slot, sum] : pending) sum->wait();
  pending.clear();
  std::vector<Array> out = gather(output_slots_);
  for (Array& v : variables) v = detach(v);
  // Results are detached (copied out of views of this call's arena), except those computed in
  // the caller's `into` arrays and the caller's own arguments passed back (a while body's loop
  // variable handed on to another: the caller detaches what it keeps beyond its own call).
  for (size_t j = 0; j < out.size(); ++j) {
    const int o = output_slots_[j];
    const Array* in_place = given[size_t(o)];
    const bool own = in_place != nullptr && out[j].storage == in_place->storage;
    if (!own && !argument_slot_[size_t(o)]) out[j] = detach(out[j]);
  }
  slots.clear();
  if (arena) release_arena(std::move(arena));
  return out;
}

}  // namespace kiln::runtime
