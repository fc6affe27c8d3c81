#include "jit/orc_session.hpp"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/IRTransformLayer.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "generator/core/error.hpp"

namespace tessera {

namespace {

void initialise_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

template <class T>
T unwrap(llvm::Expected<T> value, const std::string& what) {
  if (!value) throw CompileError(what + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}

llvm::orc::JITTargetMachineBuilder host_machine() {
  auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

void optimise(llvm::Module& module, llvm::TargetMachine* tm, int level) {
  if (level <= 0) return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const auto opt = level >= 3 ? llvm::OptimizationLevel::O3 : llvm::OptimizationLevel::O2;
  pb.buildPerModuleDefaultPipeline(opt).run(module, mam);
}

// The module with the host's triple and data layout, optimised at the requested level.
std::unique_ptr<llvm::Module> host_module(const CpuModuleSource& source, llvm::LLVMContext& ctx,
                                          llvm::TargetMachine& tm, int ir_opt_level) {
  auto module = source.emit(ctx);
  module->setDataLayout(tm.createDataLayout());
  module->setTargetTriple(tm.getTargetTriple().str());
  optimise(*module, &tm, ir_opt_level);
  return module;
}

}  // namespace

OrcSession::OrcSession(OrcOptions options) : options_(options) {
  initialise_llvm();
  jit_ = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(host_machine()).create(), "creating LLJIT");
  if (options_.ir_opt_level > 0) {
    const int level = options_.ir_opt_level;
    auto tm = unwrap(host_machine().createTargetMachine(), "creating a target machine");
    jit_->getIRTransformLayer().setTransform(
        [level, tm = std::shared_ptr<llvm::TargetMachine>(std::move(tm))](
            llvm::orc::ThreadSafeModule tsm,
            const llvm::orc::MaterializationResponsibility&) -> llvm::Expected<llvm::orc::ThreadSafeModule> {
          tsm.withModuleDo([&](llvm::Module& m) { optimise(m, tm.get(), level); });
          return tsm;
        });
  }
}

OrcSession::~OrcSession() = default;

void* OrcSession::compile(const CpuModuleSource& source) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto module = source.emit(*ctx);
  module->setDataLayout(jit_->getDataLayout());
  module->setTargetTriple(jit_->getTargetTriple().str());
  const std::string& name = source.entry;
  std::lock_guard lock(mutex_);
  if (auto sym = jit_->lookup(name))
    return sym->toPtr<void*>();
  else
    llvm::consumeError(sym.takeError());
  if (auto err = jit_->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))))
    throw CompileError("adding " + name + ": " + llvm::toString(std::move(err)));
  auto sym = unwrap(jit_->lookup(name), "compiling " + name);
  return sym.toPtr<void*>();
}

void* OrcSession::address(const std::string& symbol) {
  std::lock_guard lock(mutex_);
  return unwrap(jit_->lookup(symbol), "looking up " + symbol).toPtr<void*>();
}

std::string OrcSession::ir_text(const CpuModuleSource& source, int ir_opt_level) {
  initialise_llvm();
  auto tm = unwrap(host_machine().createTargetMachine(), "creating a target machine");
  llvm::LLVMContext ctx;
  auto module = host_module(source, ctx, *tm, ir_opt_level);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, nullptr);
  return text;
}

std::string OrcSession::assembly(const CpuModuleSource& source, int ir_opt_level) {
  initialise_llvm();
  auto tm = unwrap(host_machine().createTargetMachine(), "creating a target machine");
  llvm::LLVMContext ctx;
  auto module = host_module(source, ctx, *tm, ir_opt_level);
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw CompileError("the host target cannot emit assembly");
  pm.run(*module);
  return std::string(buffer.str());
}

std::string OrcSession::llvm_version() { return LLVM_VERSION_STRING; }

}  // namespace tessera
