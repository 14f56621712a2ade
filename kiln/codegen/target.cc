#include "kiln/codegen/target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "kiln/codegen/host_target.h"
#include "kiln/codegen/target_machine.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/knobs.h"
#include "kiln/version.h"

namespace kiln::codegen {
namespace {

// Bumped whenever the lowering changes the code it generates for the same kernel IR in a
// way the IR text does not show (e.g. flags), so stale cache files are not reused.
constexpr const char* kKernelFormatVersion = "kiln-kernels-2";

// What LLVM knows about the host: its triple, CPU, and every feature its host detection
// reports with whether the host has it (sorted by name).
struct Host {
  std::string triple;
  const llvm::Target* target = nullptr;
  std::string cpu;
  std::vector<std::pair<std::string, bool>> features;
  const std::pair<std::string, bool>* find(const std::string& f) const {
    auto it = std::lower_bound(features.begin(), features.end(), f,
                               [](const auto& a, const std::string& b) { return a.first < b; });
    return it != features.end() && it->first == f ? &*it : nullptr;
  }
  bool knows(const std::string& f) const { return find(f) != nullptr; }
  bool has(const std::string& f) const {
    const auto* p = find(f);
    return p != nullptr && p->second;
  }
};

const Host& host() {
  static const Host h = [] {
    initialize_native_target();
    Host out;
    out.triple = llvm::sys::getProcessTriple();
    std::string error;
    out.target = llvm::TargetRegistry::lookupTarget(out.triple, error);
    if (out.target == nullptr)
      throw Error("codegen: no LLVM target for the host (" + out.triple + "): " + error);
    out.cpu = host_cpu_name();
    for (const auto& f : llvm::sys::getHostCPUFeatures())
      out.features.emplace_back(f.getKey().str(), f.getValue());
    std::sort(out.features.begin(), out.features.end());
    return out;
  }();
  return h;
}

std::unique_ptr<llvm::MCSubtargetInfo> subtarget(const std::string& cpu) {
  const Host& h = host();
  std::unique_ptr<llvm::MCSubtargetInfo> sti(h.target->createMCSubtargetInfo(h.triple, cpu, ""));
  if (!sti) throw Error("codegen: LLVM has no subtarget information for " + h.triple);
  return sti;
}

bool cpu_is_known(const std::string& cpu) {
  static const std::unique_ptr<llvm::MCSubtargetInfo> generic = subtarget("generic");
  return !cpu.empty() && generic->isCPUStringValid(cpu);
}

// x86-64 hosts report "64bit"; a CPU without it cannot run the JIT's 64-bit code.
bool lacks_64bit(const std::vector<std::string>& features) {
  return host().has("64bit") &&
         !std::binary_search(features.begin(), features.end(), std::string("64bit"));
}

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string s;
  for (const auto& i : items) {
    if (!s.empty()) s.append(separator);
    s.append(i);
  }
  return s;
}

// "+f" or "-f" appended to a comma-separated LLVM feature string.
void append_feature(std::string& list, const std::string& feature, bool enabled) {
  if (!list.empty()) list.push_back(',');
  list.push_back(enabled ? '+' : '-');
  list.append(feature);
}

unsigned vector_bits(const std::vector<std::string>& features) {
  auto has = [&](const char* f) {
    return std::binary_search(features.begin(), features.end(), std::string(f));
  };
  if (has("avx512f")) return 512u;
  if (has("avx")) return 256u;
  return 128u;
}

KernelTarget native_target() {
  const Host& h = host();
  KernelTarget t;
  t.name = "native";
  t.cpu = h.cpu;
  std::vector<std::string> on;
  for (const auto& [f, enabled] : h.features) {
    if (enabled) on.push_back(f);
    append_feature(t.llvm_features, f, enabled);
  }
  t.features = join(on, ",");
  t.vector_bits = vector_bits(on);
  return t;
}

// The process-wide setting: set_target_cpu's name (nullopt: the default) and its resolution
// (null until first needed).
struct Setting {
  std::mutex mutex;
  std::optional<std::string> requested;
  std::shared_ptr<const KernelTarget> resolved;
};

Setting& setting() {
  static Setting s;
  return s;
}

}  // namespace

std::vector<std::string> known_target_cpus() {
  std::vector<std::string> names;
  for (const auto& kv : subtarget("generic")->getAllProcessorDescriptions())
    names.emplace_back(kv.Key);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> cpu_features(const std::string& cpu) {
  if (!cpu_is_known(cpu))
    throw Error(fmt::format("codegen: LLVM {} does not know the CPU \"{}\"", llvm_version(), cpu));
  std::unique_ptr<llvm::MCSubtargetInfo> sti = subtarget(cpu);
  std::vector<std::string> on;
  for (const auto& kv : sti->getAllProcessorFeatures())
    if (sti->getFeatureBits().test(kv.Value) && host().knows(kv.Key)) on.emplace_back(kv.Key);
  std::sort(on.begin(), on.end());
  return on;
}

KernelTarget resolve_target(const std::string& name) {
  if (name == "native") return native_target();
  const Host& h = host();
  if (!cpu_is_known(name)) {
    std::vector<std::string> cpus;
    for (const auto& c : known_target_cpus())
      if (!lacks_64bit(cpu_features(c))) cpus.push_back(c);
    throw Error(fmt::format(
        "target CPU \"{}\" is not known to LLVM {}: use native (the host, {}), an x86-64 "
        "level (x86-64-v2, x86-64-v3, x86-64-v4) or one of LLVM's CPU names: {}",
        name, llvm_version(), h.cpu, join(cpus)));
  }
  std::vector<std::string> on = cpu_features(name);
  if (lacks_64bit(on))
    throw Error(
        fmt::format("target CPU \"{}\" is a 32-bit CPU and kiln generates 64-bit code: use native, "
                    "x86-64-v2, x86-64-v3 or x86-64-v4",
                    name));
  std::vector<std::string> missing;
  for (const auto& f : on)
    if (!h.has(f)) missing.push_back(f);
  if (!missing.empty())
    throw Error(fmt::format(
        "target CPU \"{}\" needs instruction-set features this host (CPU {}) lacks: {}; its "
        "kernels could not run here. Use a target the host can run: native, or a lower level "
        "such as x86-64-v3 or x86-64-v2",
        name, h.cpu, join(missing)));
  KernelTarget t;
  t.name = name;
  t.cpu = name;
  t.features = join(on, ",");
  for (const auto& [f, enabled] : h.features) {
    bool has = std::binary_search(on.begin(), on.end(), f);
    append_feature(t.llvm_features, f, has);
  }
  t.vector_bits = vector_bits(on);
  return t;
}

std::shared_ptr<const KernelTarget> current_target() {
  Setting& s = setting();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.resolved) return s.resolved;
  if (s.requested) {
    s.resolved = std::make_shared<const KernelTarget>(resolve_target(*s.requested));
    return s.resolved;
  }
  std::string name = runtime::knobs::target_cpu().value_or("native");
  try {
    s.resolved = std::make_shared<const KernelTarget>(resolve_target(name));
  } catch (const Error& e) {
    throw Error(
        fmt::format("KILN_TARGET_CPU=\"{}\": {} (or unset KILN_TARGET_CPU)", name, e.what()));
  }
  return s.resolved;
}

std::string target_cpu() { return current_target()->name; }

void set_target_cpu(const std::string& name) {
  std::shared_ptr<const KernelTarget> t;
  if (!name.empty()) t = std::make_shared<const KernelTarget>(resolve_target(name));
  Setting& s = setting();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.requested = name.empty() ? std::nullopt : std::optional<std::string>(name);
  s.resolved = std::move(t);
}

ScopedTargetCpu::ScopedTargetCpu(const std::string& name) {
  {
    Setting& s = setting();
    std::lock_guard<std::mutex> lock(s.mutex);
    previous_ = s.requested;
  }
  set_target_cpu(name);
}

ScopedTargetCpu::~ScopedTargetCpu() {
  // The previous setting was valid (or is the default, resolved again when needed).
  Setting& s = setting();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.requested = previous_;
  s.resolved = nullptr;
}

std::string target_description(const KernelTarget& t) {
  return std::string(kKernelFormatVersion) + ";llvm " + llvm_version() + ";kiln " KILN_VERSION +
         ";cpu " + t.cpu + ";features " + t.features +
         ";O3,fp-contract=fast,prefer-vector-width=" + std::to_string(t.vector_bits) +
         ",vectorize=" + std::to_string(kPipelineTuning.loop_vectorization) +
         ",slp=" + std::to_string(kPipelineTuning.slp_vectorization) +
         ",interleave=" + std::to_string(kPipelineTuning.loop_interleaving) +
         ",unroll=" + std::to_string(kPipelineTuning.loop_unrolling);
}

std::string target_description() { return target_description(*current_target()); }

}  // namespace kiln::codegen
