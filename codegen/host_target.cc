#include "codegen/host_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "codegen/target_machine.h"
#include "ir/error.h"

namespace kiln::codegen {
namespace {

// Bumped whenever the lowering changes the code it generates for the same kernel IR in a
// way the IR text does not show (e.g. flags), so stale cache files are not reused.
constexpr const char* kKernelFormatVersion = "kiln-kernels-2";

std::string features_for_llvm() {
  std::string s;
  for (const auto& f : llvm::sys::getHostCPUFeatures()) {
    if (!s.empty()) s += ',';
    s += f.getValue() ? '+' : '-';
    s += f.getKey().str();
  }
  return s;
}

}  // namespace

std::string llvm_version() { return LLVM_VERSION_STRING; }

std::string host_cpu_name() { return llvm::sys::getHostCPUName().str(); }

std::string host_cpu_features() {
  std::vector<std::string> on;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.getValue()) on.push_back(f.getKey().str());
  std::sort(on.begin(), on.end());
  std::string s;
  for (const auto& f : on) s += (s.empty() ? "" : ",") + f;
  return s;
}

std::string target_description() {
  return std::string(kKernelFormatVersion) + ";llvm " + llvm_version() + ";kiln " KILN_VERSION +
         ";cpu " + host_cpu_name() + ";features " + host_cpu_features() +
         ";O3,fp-contract=fast,prefer-vector-width=" + std::to_string(preferred_vector_bits()) +
         ",vectorize=" + std::to_string(kPipelineTuning.loop_vectorization) +
         ",slp=" + std::to_string(kPipelineTuning.slp_vectorization) +
         ",interleave=" + std::to_string(kPipelineTuning.loop_interleaving) +
         ",unroll=" + std::to_string(kPipelineTuning.loop_unrolling);
}

void initialize_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::unique_ptr<llvm::TargetMachine> create_host_target_machine() {
  initialize_native_target();
  std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr)
    throw Error("codegen: no LLVM target for the host (" + triple + "): " + error);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // FMA contraction allowed
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, host_cpu_name(), features_for_llvm(), options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw Error("codegen: LLVM could not create a target machine for " + triple);
  return tm;
}

llvm::TargetMachine& thread_target_machine() {
  thread_local std::unique_ptr<llvm::TargetMachine> tm = create_host_target_machine();
  return *tm;
}

unsigned preferred_vector_bits() {
  static const unsigned bits = [] {
    auto features = llvm::sys::getHostCPUFeatures();
    auto has = [&](const char* f) {
      auto it = features.find(f);
      return it != features.end() && it->getValue();
    };
    if (has("avx512f")) return 512u;
    if (has("avx")) return 256u;
    return 128u;
  }();
  return bits;
}

void apply_target_attributes(llvm::Function& f) {
  static const std::string cpu = host_cpu_name();
  static const std::string features = features_for_llvm();
  f.addFnAttr("target-cpu", cpu);
  f.addFnAttr("target-features", features);
  f.addFnAttr("prefer-vector-width", std::to_string(preferred_vector_bits()));
  f.addFnAttr("min-legal-vector-width", "0");
}

}  // namespace kiln::codegen
