#include "kiln/codegen/compiler.h"

#include <llvm/IR/Function.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "kiln/codegen/jit.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/codegen/target.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/log.h"
#include "kiln/runtime/threading.h"

namespace kiln::codegen {
namespace {

constexpr const char* kPlaceholder = "kiln_kernel";

struct Keyed {
  LoweredKernel lowered;
  std::string key;
  std::string symbol;
  double lower_seconds = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The request as its kernel's code depends on it: the body's canonical text without node
// names and source locations (which lowering never reads), the contraction passed as an
// input, and the overwrite pairs asked for.
std::string request_fingerprint(const KernelRequest& r) {
  std::unique_ptr<ir::Graph> body = r.body->clone();
  body->set_name("k");
  int as_parameter = -1;
  for (size_t i = 0; i < body->nodes().size(); ++i) {
    ir::Node& n = *body->nodes()[i];
    n.set_name("");
    n.set_location({});
    if (r.as_parameter == r.body->nodes()[i].get()) as_parameter = int(i);
  }
  std::string text = ir::print_graph(*body);
  text += fmt::format("as_parameter {}\noverwrites", as_parameter);
  for (auto [o, i] : r.overwrites) text += fmt::format(" {}:{}", o, i);
  return text;
}

Keyed lower_and_key(const KernelRequest& r) {
  auto start = std::chrono::steady_clock::now();
  Keyed k{lower_kernel(*r.body, kPlaceholder, r.as_parameter, r.overwrites), {}, {}, 0};
  // The module's own target (current_target() may change meanwhile in another thread).
  k.key = cache_key(module_text(*k.lowered.module.module),
                    target_description(*k.lowered.module.target));
  k.symbol = "kiln_k_" + k.key;
  k.lowered.module.module->getFunction(kPlaceholder)->setName(k.symbol);
  k.lowered.module.symbol = k.symbol;
  k.lowered.layout.symbol = r.name;
  k.lower_seconds = seconds_since(start);
  return k;
}

std::mutex& compile_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, void*>& linked() {
  static std::unordered_map<std::string, void*> m;
  return m;
}

std::atomic<bool> g_memory_cache{true};

}  // namespace

const char* kernel_source_name(KernelSource source) {
  switch (source) {
    case KernelSource::kMemoryCache:
      return "memory cache";
    case KernelSource::kDiskCache:
      return "disk cache";
    case KernelSource::kCompiled:
      return "compiled";
  }
  return "?";
}

bool memory_cache_enabled() { return g_memory_cache.load(); }
void set_memory_cache_enabled(bool enabled) { g_memory_cache.store(enabled); }

std::vector<CompiledKernel> compile_kernels(const std::vector<KernelRequest>& requests) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  std::atomic<int64_t> optimize_us{0}, emit_us{0};
  // Requests whose bodies are equal but for names (the same layer's kernel at every depth of
  // a model) are lowered once: the first of each fingerprint is lowered and keyed, the others
  // share its key and code.
  std::vector<std::string> fingerprints(requests.size());
  std::vector<double> fingerprint_seconds(requests.size());
  runtime::parallel_tasks(int64_t(requests.size()), [&](int64_t i) {
    auto start = Clock::now();
    fingerprints[size_t(i)] = request_fingerprint(requests[size_t(i)]);
    fingerprint_seconds[size_t(i)] = seconds_since(start);
  });
  std::vector<size_t> same_as(requests.size());  // index of the first equal request
  std::vector<size_t> to_lower;
  {
    std::unordered_map<std::string_view, size_t> first;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto [it, inserted] = first.emplace(fingerprints[i], i);
      same_as[i] = it->second;
      if (inserted) to_lower.push_back(i);
    }
  }
  std::vector<Keyed> kernels(requests.size());
  runtime::parallel_tasks(int64_t(to_lower.size()), [&](int64_t t) {
    const size_t i = to_lower[size_t(t)];
    kernels[i] = lower_and_key(requests[i]);
    kernels[i].lower_seconds += fingerprint_seconds[i];
  });
  for (size_t i = 0; i < requests.size(); ++i)
    if (same_as[i] != i) {
      const Keyed& first = kernels[same_as[i]];
      kernels[i].lowered.layout = first.lowered.layout;
      kernels[i].lowered.layout.symbol = requests[i].name;
      kernels[i].key = first.key;
      kernels[i].symbol = first.symbol;
      kernels[i].lower_seconds = fingerprint_seconds[i];
    }

  std::lock_guard<std::mutex> lock(compile_mutex());
  std::vector<CompiledKernel> out(requests.size());
  std::vector<size_t> to_link, to_compile;
  std::unordered_map<std::string, size_t> first_of_key;  // duplicates within this call
  std::vector<std::pair<size_t, size_t>> duplicates;
  for (size_t i = 0; i < kernels.size(); ++i) {
    out[i].layout = kernels[i].lowered.layout;
    out[i].jit_symbol = kernels[i].symbol;
    out[i].lower_seconds = kernels[i].lower_seconds;
    out[i].source = KernelSource::kMemoryCache;
    if (auto it = linked().find(kernels[i].key); memory_cache_enabled() && it != linked().end()) {
      out[i].entry = reinterpret_cast<runtime::KernelEntry>(it->second);
      count_memory_hit();
      continue;
    }
    if (auto it = first_of_key.find(kernels[i].key); it != first_of_key.end()) {
      duplicates.emplace_back(i, it->second);
      count_memory_hit();
      continue;
    }
    first_of_key[kernels[i].key] = i;
    to_link.push_back(i);
  }
  std::vector<std::string> objects(kernels.size());
  for (size_t i : to_link) {
    if (auto cached = load_cached_object(kernels[i].key)) {
      objects[i] = std::move(*cached);
      out[i].source = KernelSource::kDiskCache;
    } else {
      out[i].source = KernelSource::kCompiled;
      to_compile.push_back(i);
      count_miss();
    }
  }
  runtime::parallel_tasks(int64_t(to_compile.size()), [&](int64_t t) {
    size_t i = to_compile[size_t(t)];
    KernelModule& m = kernels[i].lowered.module;
    auto a = Clock::now();
    optimize_module(m);
    auto b = Clock::now();
    objects[i] = emit_object(m);
    out[i].optimize_seconds = std::chrono::duration<double>(b - a).count();
    out[i].emit_seconds = seconds_since(b);
    optimize_us += std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
    emit_us += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - b).count();
  });
  for (size_t i : to_compile) store_cached_object(kernels[i].key, objects[i]);
  std::vector<ObjectToLink> link;
  for (size_t i : to_link) link.push_back({std::move(objects[i]), kernels[i].symbol});
  std::vector<void*> addresses = Jit::instance().link(std::move(link));
  for (size_t k = 0; k < to_link.size(); ++k) {
    size_t i = to_link[k];
    if (memory_cache_enabled()) linked()[kernels[i].key] = addresses[k];
    out[i].entry = reinterpret_cast<runtime::KernelEntry>(addresses[k]);
  }
  for (auto [i, j] : duplicates) out[i].entry = out[j].entry;
  log_info(
      fmt::format("codegen: {} kernels ({} compiled, {} linked) in {:.1f} ms; O3 {:.1f} ms "
                  "and code emission {:.1f} ms summed over threads",
                  requests.size(), to_compile.size(), to_link.size(),
                  std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
                  optimize_us.load() / 1e3, emit_us.load() / 1e3));
  return out;
}

namespace {

// The optimized kernel as text (LLVM IR or assembly) after a comment line naming it.
std::string kernel_dump(const KernelRequest& request, const char* comment, bool assembly) {
  Keyed k = lower_and_key(request);
  KernelModule& m = k.lowered.module;
  optimize_module(m);
  const runtime::KernelLayout& l = k.lowered.layout;
  return std::string(comment) + " kernel " + request.name + " (symbol " + k.symbol + "; " +
         l.iteration + ", extent " + std::to_string(l.extent) + "; target " + m.target->name +
         ")\n" + (assembly ? emit_assembly(m) : module_text(*m.module));
}

}  // namespace

std::string kernel_llvm_ir(const KernelRequest& request) {
  return kernel_dump(request, ";", /*assembly=*/false);
}

std::string kernel_assembly(const KernelRequest& request) {
  return kernel_dump(request, "#", /*assembly=*/true);
}

}  // namespace kiln::codegen
