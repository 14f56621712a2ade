#include "kiln/codegen/jit.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <mutex>

#include "kiln/codegen/target_machine.h"
#include "kiln/ir/error.h"

namespace kiln::codegen {
namespace {

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

}  // namespace

KernelModule new_kernel_module(const std::string& module_name, const std::string& symbol) {
  KernelModule k;
  k.context = std::make_unique<llvm::LLVMContext>();
  k.module = std::make_unique<llvm::Module>(module_name, *k.context);
  k.target = current_target();
  llvm::TargetMachine& tm = thread_target_machine(*k.target);
  k.module->setTargetTriple(tm.getTargetTriple().str());
  k.module->setDataLayout(tm.createDataLayout());
  k.symbol = symbol;
  return k;
}

void optimize_module(KernelModule& kernel) {
  llvm::Module& module = *kernel.module;
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(module, &os))
    internal_error(
        __FILE__, __LINE__,
        "codegen produced invalid LLVM IR for " + module.getName().str() + ": " + os.str());
  llvm::TargetMachine& tm = thread_target_machine(*kernel.target);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = kPipelineTuning.loop_vectorization;
  tuning.SLPVectorization = kPipelineTuning.slp_vectorization;
  tuning.LoopInterleaving = kPipelineTuning.loop_interleaving;
  tuning.LoopUnrolling = kPipelineTuning.loop_unrolling;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
  llvm::MDNode* tag = streaming_store_tag(module.getContext());
  const llvm::DataLayout& dl = module.getDataLayout();
  for (llvm::Function& f : module)
    for (llvm::Instruction& i : llvm::instructions(f))
      if (auto* store = llvm::dyn_cast<llvm::StoreInst>(&i);
          store != nullptr && store->getMetadata(llvm::LLVMContext::MD_tbaa) == tag &&
          store->getValueOperand()->getType()->isVectorTy() &&
          store->getAlign().value() >= dl.getTypeStoreSize(store->getValueOperand()->getType()))
        store->setMetadata(
            llvm::LLVMContext::MD_nontemporal,
            llvm::MDNode::get(module.getContext(),
                              {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                  llvm::Type::getInt32Ty(module.getContext()), 1))}));
}

llvm::MDNode* streaming_store_tag(llvm::LLVMContext& ctx) {
  llvm::MDBuilder md(ctx);
  llvm::MDNode* root = md.createTBAARoot("kiln streaming stores");
  llvm::MDNode* type = md.createTBAAScalarTypeNode("streamed", root);
  return md.createTBAAStructTagNode(type, type, 0);
}

static std::string emit(KernelModule& kernel, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (thread_target_machine(*kernel.target).addPassesToEmitFile(pm, os, nullptr, type))
    internal_error(__FILE__, __LINE__,
                   "LLVM cannot emit code for the target CPU " + kernel.target->cpu);
  pm.run(*kernel.module);
  return std::string(buffer.data(), buffer.size());
}

std::string emit_object(KernelModule& kernel) {
  return emit(kernel, llvm::CodeGenFileType::ObjectFile);
}

std::string emit_assembly(KernelModule& kernel) {
  return emit(kernel, llvm::CodeGenFileType::AssemblyFile);
}

std::string module_text(const llvm::Module& module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os, nullptr);
  return os.str();
}

struct Jit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex mutex;
  int dylibs = 0;
};

Jit::Jit() : impl_(std::make_unique<Impl>()) {
  initialize_native_target();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) throw Error("codegen: cannot create the LLVM JIT: " + to_string(jit.takeError()));
  impl_->jit = std::move(*jit);
  // Runtime helpers and the C library (double-precision math) come from the process itself.
  auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl_->jit->getDataLayout().getGlobalPrefix());
  if (!generator)
    throw Error("codegen: cannot search the process's symbols: " +
                to_string(generator.takeError()));
  impl_->jit->getMainJITDylib().addGenerator(std::move(*generator));
}

Jit& Jit::instance() {
  static Jit* jit = new Jit();  // never destroyed: kernels may run during static destruction
  return *jit;
}

std::vector<void*> Jit::link(std::vector<ObjectToLink> objects) {
  std::vector<void*> out;
  if (objects.empty()) return out;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  llvm::orc::LLJIT& jit = *impl_->jit;
  auto dylib = jit.createJITDylib("kiln.kernels." + std::to_string(impl_->dylibs++));
  if (!dylib) throw Error("codegen: cannot create a JITDylib: " + to_string(dylib.takeError()));
  dylib->addToLinkOrder(jit.getMainJITDylib());
  llvm::orc::SymbolLookupSet set;
  std::vector<llvm::orc::SymbolStringPtr> names;
  for (ObjectToLink& o : objects) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(o.bytes, o.symbol);
    if (llvm::Error e = jit.addObjectFile(*dylib, std::move(buffer)))
      throw Error("codegen: the JIT rejected the object of kernel " + o.symbol + ": " +
                  to_string(std::move(e)));
    names.push_back(jit.mangleAndIntern(o.symbol));
    set.add(names.back());
  }
  auto result =
      jit.getExecutionSession().lookup(llvm::orc::makeJITDylibSearchOrder(&*dylib), std::move(set));
  if (!result) throw Error("codegen: JIT symbol lookup failed: " + to_string(result.takeError()));
  for (const auto& n : names) out.push_back((*result)[n].getAddress().toPtr<void*>());
  return out;
}

void* compile_uncached(KernelModule kernel) {
  optimize_module(kernel);
  std::string object = emit_object(kernel);
  std::vector<ObjectToLink> one;
  one.push_back({std::move(object), kernel.symbol});
  return Jit::instance().link(std::move(one)).front();
}

}  // namespace kiln::codegen
