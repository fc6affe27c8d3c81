#include "jit/orc_session.hpp"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "generator/core/error.hpp"
#include "jit/disk_cache.hpp"

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

// This thread's target machine for a kind of object: a TargetMachine is not thread-safe, and one per compile
// costs ~1 ms. The JIT's objects keep the JIT's code model; a shared library's are position-independent with the
// small code model (no text relocations).
llvm::TargetMachine& thread_target_machine(ObjectKind kind) {
  thread_local std::unique_ptr<llvm::TargetMachine> machines[2];
  auto& tm = machines[kind == ObjectKind::jit ? 0 : 1];
  if (!tm) {
    auto jtmb = host_machine();
    if (kind == ObjectKind::library) {
      jtmb.setRelocationModel(llvm::Reloc::PIC_);
      jtmb.setCodeModel(llvm::CodeModel::Small);
    }
    tm = unwrap(jtmb.createTargetMachine(), "creating a target machine");
  }
  return *tm;
}

// Whether the bytes are an object file that defines `symbol`.
bool defines_symbol(const std::string& object, const std::string& symbol) {
  auto parsed = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, symbol));
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return false;
  }
  for (const auto& s : (*parsed)->symbols()) {
    auto name = s.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == symbol) return true;
  }
  return false;
}

// The host's CPU and features as LLVM sees them: generated code depends on them (tune-cpu, the JIT's defaults).
const std::string& host_cpu_identity() {
  static const std::string identity = [] {
    std::vector<std::string> features;
    for (const auto& f : llvm::sys::getHostCPUFeatures()) {
      std::string feature(1, f.second ? '+' : '-');
      feature.append(f.first().data(), f.first().size());
      features.push_back(std::move(feature));
    }
    std::sort(features.begin(), features.end());
    std::string text = llvm::sys::getHostCPUName().str();
    for (const auto& f : features) text += "," + f;
    return text;
  }();
  return identity;
}

}  // namespace

const char* origin_name(KernelOrigin origin) {
  switch (origin) {
    case KernelOrigin::memory:
      return "memory";
    case KernelOrigin::disk:
      return "disk";
    case KernelOrigin::built:
      return "built";
  }
  return "?";
}

OrcSession::OrcSession(OrcOptions options) : options_(options) {
  initialise_llvm();
  jit_ = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(host_machine()).create(), "creating LLJIT");
}

OrcSession::~OrcSession() = default;

Hash128 OrcSession::disk_key(const CpuModuleSource& source, ObjectKind kind) const {
  return hash_text(fmt::format("cpu-object|{}|{}|{}|{}|{}|{}|{}|{}", source.key.hex(), source.entry, TESSERA_VERSION,
                               generator_fingerprint(), LLVM_VERSION_STRING, host_cpu_identity(), options_.ir_opt_level,
                               kind == ObjectKind::jit ? "jit" : "library"));
}

std::string OrcSession::compile_object(const CpuModuleSource& source, ObjectKind kind) const {
  llvm::TargetMachine& tm = thread_target_machine(kind);
  llvm::LLVMContext ctx;
  auto module = host_module(source, ctx, tm, options_.ir_opt_level);
  // TESSERA_DUMP=DIR: the IR and the assembly of every module as it is built.
  if (const std::string dir = environment("TESSERA_DUMP"); !dir.empty()) {
    std::string ir;
    llvm::raw_string_ostream ir_stream(ir);
    module->print(ir_stream, nullptr);
    dump_file(dir, source.entry + ".ll", ir);
    dump_file(dir, source.entry + ".s", assembly(source, options_.ir_opt_level));
  }
  auto object = unwrap(llvm::orc::SimpleCompiler(tm)(*module), "compiling " + source.entry);
  return std::string(object->getBuffer());
}

OrcEntry OrcSession::compile(const CpuModuleSource& source) {
  const std::string& name = source.entry;
  const auto linked = [&]() -> void* {
    if (auto sym = jit_->lookup(name))
      return sym->toPtr<void*>();
    else
      llvm::consumeError(sym.takeError());
    return nullptr;
  };
  {
    std::lock_guard lock(mutex_);
    if (void* address = linked()) return {address, KernelOrigin::memory};
  }
  OrcEntry entry;
  const std::string object = cached_object(source, ObjectKind::jit, &entry.origin);
  std::lock_guard lock(mutex_);
  if (void* address = linked()) return {address, KernelOrigin::memory};  // another thread linked it meanwhile
  if (auto err = jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, name)))
    throw CompileError("adding " + name + ": " + llvm::toString(std::move(err)));
  entry.address = unwrap(jit_->lookup(name), "linking " + name).toPtr<void*>();
  return entry;
}

std::string OrcSession::cached_object(const CpuModuleSource& source, ObjectKind kind, KernelOrigin* origin) const {
  const DiskCache* disk = source.key == Hash128{} ? nullptr : options_.disk_cache;
  const Hash128 key = disk ? disk_key(source, kind) : Hash128{};
  // With TESSERA_DUMP every kernel is built (and dumped) rather than loaded.
  std::optional<std::string> object = disk && environment("TESSERA_DUMP").empty() ? disk->load(key) : std::nullopt;
  // An entry intact on disk that is not an object defining the symbol (written by something else under its key)
  // is compiled again rather than used.
  if (object && defines_symbol(*object, source.entry)) {
    if (origin) *origin = KernelOrigin::disk;
    return std::move(*object);
  }
  std::string built = compile_object(source, kind);
  if (origin) *origin = KernelOrigin::built;
  if (disk) disk->store(key, source.entry, "cpu", built);
  return built;
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
