#include "kiln/codegen/host_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/codegen/target_machine.h"
#include "kiln/ir/error.h"

namespace kiln::codegen {

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

void initialize_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::unique_ptr<llvm::TargetMachine> create_target_machine(const KernelTarget& t) {
  initialize_native_target();
  std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr)
    throw Error("codegen: no LLVM target for the host (" + triple + "): " + error);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // FMA contraction allowed
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, t.cpu, t.llvm_features, options, llvm::Reloc::PIC_,
                                  std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    throw Error("codegen: LLVM could not create a target machine for " + triple + ", CPU " + t.cpu);
  return tm;
}

llvm::TargetMachine& thread_target_machine(const KernelTarget& t) {
  // One per target per thread: a handful of targets at most (a test switching levels).
  thread_local std::unordered_map<std::string, std::unique_ptr<llvm::TargetMachine>> machines;
  std::unique_ptr<llvm::TargetMachine>& tm = machines[t.cpu + ';' + t.llvm_features];
  if (!tm) tm = create_target_machine(t);
  return *tm;
}

void apply_target_attributes(llvm::Function& f, const KernelTarget& t) {
  f.addFnAttr("target-cpu", t.cpu);
  f.addFnAttr("target-features", t.llvm_features);
  f.addFnAttr("prefer-vector-width", std::to_string(t.vector_bits));
  f.addFnAttr("min-legal-vector-width", "0");
}

}  // namespace kiln::codegen
