#include "jit/orc_session.hpp"

#include <llvm/CodeGen/MachineModuleInfo.h>
#include <llvm/CodeGen/Passes.h>
#include <llvm/CodeGen/TargetPassConfig.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "generator/core/error.hpp"
#include "jit/disk_cache.hpp"
#include "jit/object_bundle.hpp"

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

// The module's machine code, as an object file or assembly: LLVM's codegen pipeline as
// TargetMachine::addPassesToEmitMC builds it, less the post-RA list scheduler. That pass took 5-7% of the backend's
// time, and out-of-order cores reorder what it would: the compile benchmark's kernels and the odd, small and skinny
// suites ran as fast without it (Zen 5, alternated runs), while the cold compile median fell by about 7%.
std::string machine_code(llvm::Module& module, llvm::TargetMachine& target, const std::string& what,
                         llvm::CodeGenFileType type = llvm::CodeGenFileType::ObjectFile) {
  auto& tm = static_cast<llvm::LLVMTargetMachine&>(target);
  tm.Options.MCOptions.EmitDwarfUnwind = llvm::EmitDwarfUnwindType::Always;  // as for the JIT (addPassesToEmitMC)
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream out(bytes);
  llvm::legacy::PassManager pm;
  auto* machine_info = new llvm::MachineModuleInfoWrapperPass(&tm);
  llvm::TargetPassConfig* config = tm.createPassConfig(pm);
  config->setDisableVerify(true);
  config->disablePass(&llvm::PostRASchedulerID);
  pm.add(config);
  pm.add(machine_info);
  if (config->addISelPasses()) throw CompileError("compiling " + what + ": no instruction selector");
  config->addMachinePasses();
  config->setInitialized();
  if (tm.addAsmPrinter(pm, out, nullptr, type, machine_info->getMMI().getContext()))
    throw CompileError("compiling " + what + ": the target cannot emit this kind of file");
  pm.add(llvm::createFreeMachineFunctionPass());
  pm.run(module);
  return std::string(bytes.data(), bytes.size());
}

// A target machine for a kind of object, lent for one compile: a TargetMachine is not thread-safe, and creating
// one costs ~0.3 ms, so they are kept for the process rather than per thread (a runtime's compile workers are its
// own; a fresh runtime's would pay it again). The JIT's objects keep the JIT's code model; a shared library's are
// position-independent with the small code model (no text relocations).
class TargetMachineLease {
 public:
  explicit TargetMachineLease(ObjectKind kind) : kind_(kind) {
    {
      std::lock_guard lock(pool_mutex());
      auto& idle = pool(kind_);
      if (!idle.empty()) {
        tm_ = std::move(idle.back());
        idle.pop_back();
        return;
      }
    }
    auto jtmb = host_machine();
    if (kind_ == ObjectKind::library) {
      jtmb.setRelocationModel(llvm::Reloc::PIC_);
      jtmb.setCodeModel(llvm::CodeModel::Small);
      // A library runs on other machines: its ISA is each function's own (target-cpu x86-64-v3 or -v4 and the
      // extensions' target-features), not this host's. The host's feature string would override them: "-avx512f"
      // on an AVX2 host made its AVX-512 variants AVX2 code (and AVX-512 attention's vscalefps unselectable), and
      // "+avx512f" on an AVX-512 host let EVEX instructions into its AVX2 variants.
      jtmb.setCPU("x86-64");
      jtmb.getFeatures() = llvm::SubtargetFeatures();
    }
    tm_ = unwrap(jtmb.createTargetMachine(), "creating a target machine");
  }
  ~TargetMachineLease() {
    std::lock_guard lock(pool_mutex());
    pool(kind_).push_back(std::move(tm_));
  }
  TargetMachineLease(const TargetMachineLease&) = delete;
  TargetMachineLease& operator=(const TargetMachineLease&) = delete;

  llvm::TargetMachine& operator*() const { return *tm_; }

 private:
  static std::mutex& pool_mutex() {
    static std::mutex mutex;
    return mutex;
  }
  // Never destroyed: a TargetMachine must not outlive LLVM's own static state at exit.
  static std::vector<std::unique_ptr<llvm::TargetMachine>>& pool(ObjectKind kind) {
    static auto* pools = new std::vector<std::unique_ptr<llvm::TargetMachine>>[2];
    return pools[kind == ObjectKind::jit ? 0 : 1];
  }

  ObjectKind kind_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

// Whether the bytes are an object file, or a bundle of them, that defines `symbol`.
bool defines_symbol(const std::string& bytes, const std::string& symbol) {
  const auto objects = unbundle_objects(bytes);
  if (!objects) return false;
  for (const std::string& object : *objects) {
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
  }
  return false;
}

// TESSERA_PERF_MAP=1: every function of a linked kernel object is appended to /tmp/perf-PID.map, perf's file of JIT
// symbols, so that `perf report` names kernels and `perf script` gives offsets into them. The JIT resolves only
// global names (`address`); the object's other functions are placed relative to a global one of its text.
void write_perf_map(const std::string& object, const std::function<std::uint64_t(const std::string&)>& address) {
  auto parsed = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, "kernel"));
  if (!parsed) return llvm::consumeError(parsed.takeError());
  struct Function {
    std::string name;
    std::uint64_t value, size;
    bool global;
    llvm::object::section_iterator section;
  };
  std::vector<Function> functions;
  for (const llvm::object::ELFSymbolRef s : (*parsed)->symbols()) {
    auto name = s.getName();
    auto value = s.getValue();
    auto type = s.getType();
    auto flags = s.getFlags();
    auto section = s.getSection();
    if (name && value && type && flags && section && *type == llvm::object::SymbolRef::ST_Function &&
        !(*flags & llvm::object::SymbolRef::SF_Undefined))
      functions.push_back(
          {name->str(), *value, s.getSize(), (*flags & llvm::object::SymbolRef::SF_Global) != 0, *section});
    if (!section) llvm::consumeError(section.takeError());
    if (!name) llvm::consumeError(name.takeError());
    if (!value) llvm::consumeError(value.takeError());
    if (!type) llvm::consumeError(type.takeError());
    if (!flags) llvm::consumeError(flags.takeError());
  }
  const auto anchor = std::find_if(functions.begin(), functions.end(), [](const Function& f) { return f.global; });
  if (anchor == functions.end()) return;
  const std::uint64_t anchor_address = address(anchor->name);
  if (anchor_address == 0) return;
  std::string lines;
  for (const Function& f : functions)
    if (f.section == anchor->section)
      lines += fmt::format("{:x} {:x} {}\n", anchor_address + f.value - anchor->value, f.size, f.name);
  if (std::FILE* file = std::fopen(fmt::format("/tmp/perf-{}.map", ::getpid()).c_str(), "a")) {
    std::fputs(lines.c_str(), file);
    std::fclose(file);
  }
}

// How much a function costs LLVM's backend, roughly: about 5 us per instruction plus 5 ms per function (Zen 5: a
// packing routine or a driver of 100-150 instructions in a few loops takes 5-8 ms, a 1000-instruction micro-kernel
// 9 ms; a function of one trivial loop 0.5 ms).
std::size_t compile_weight(const llvm::Function& f) { return f.getInstructionCount() + 1000; }

// The module's functions in `parts` groups of about equal weight (the heaviest first, each to the lightest group).
std::vector<std::vector<std::string>> partition_functions(const llvm::Module& module, std::size_t parts) {
  std::vector<std::pair<std::size_t, std::string>> weights;
  for (const llvm::Function& f : module)
    if (!f.isDeclaration()) weights.emplace_back(compile_weight(f), f.getName().str());
  std::sort(weights.rbegin(), weights.rend());
  std::vector<std::vector<std::string>> groups(std::min(parts, weights.size()));
  std::vector<std::size_t> load(groups.size(), 0);
  for (const auto& [weight, name] : weights) {
    const auto lightest = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[lightest] += weight;
    groups[lightest].push_back(name);
  }
  return groups;
}

// Makes the module's local functions visible to the other parts of it, under names no other module has.
void externalise_functions(llvm::Module& module, const std::string& entry) {
  for (llvm::Function& f : module)
    if (!f.isDeclaration() && f.hasLocalLinkage()) {
      f.setName(entry + "." + f.getName());
      f.setLinkage(llvm::GlobalValue::ExternalLinkage);
      f.setVisibility(llvm::GlobalValue::HiddenVisibility);
    }
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
  // The workers sleep at once after a job (compiles are rare) and stay on whatever CPU they are given.
  if (options_.compile_threads > 1)
    compile_pool_ = std::make_unique<ThreadPool>(options_.compile_threads - 1, 0, false);
  jit_ = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(host_machine()).create(), "creating LLJIT");
}

OrcSession::~OrcSession() = default;

Hash128 OrcSession::disk_key(const CpuModuleSource& source, ObjectKind kind) const {
  return hash_text(fmt::format("cpu-object|{}|{}|{}|{}|{}|{}|{}|{}", source.key.hex(), source.entry, TESSERA_VERSION,
                               generator_fingerprint(), LLVM_VERSION_STRING, host_cpu_identity(), options_.ir_opt_level,
                               kind == ObjectKind::jit ? "jit" : "library"));
}

std::optional<std::vector<std::string>> OrcSession::compile_parts(const CpuModuleSource& source) const {
  // Each part emits the module in a context of its own (an LLVMContext is used by one thread at a time) and plans
  // the same partition from it, so no thread waits for a plan: emitting costs 0.4-1 ms, a function's backend 3-10.
  const auto parts = compile_pool_->max_participants();
  std::vector<std::string> objects(static_cast<std::size_t>(parts));
  const auto compile_group = [&](std::int64_t part, void*) {
    TargetMachineLease tm(ObjectKind::jit);
    llvm::LLVMContext ctx;
    auto module = host_module(source, ctx, *tm, 0);
    const auto groups = partition_functions(*module, static_cast<std::size_t>(parts));
    if (static_cast<std::size_t>(part) >= groups.size()) return;
    if (groups.size() > 1) {
      const auto& group = groups[static_cast<std::size_t>(part)];
      std::vector<llvm::Function*> others;  // defined here, compiled in another part
      for (llvm::Function& f : *module)
        if (!f.isDeclaration() && std::find(group.begin(), group.end(), f.getName().str()) == group.end())
          others.push_back(&f);
      externalise_functions(*module, source.entry);
      for (llvm::Function* f : others) {
        f->deleteBody();
        f->setVisibility(llvm::GlobalValue::HiddenVisibility);
      }
    }
    objects[static_cast<std::size_t>(part)] = machine_code(*module, *tm, source.entry);
  };
  if (!compile_pool_->try_run(parts, parts, 0, compile_group)) return std::nullopt;
  std::erase_if(objects, [](const std::string& object) { return object.empty(); });
  return objects;
}

std::string OrcSession::compile_object(const CpuModuleSource& source, ObjectKind kind) const {
  // Only the JIT's modules without the IR pipeline are split: a library archives one object per kernel and builds
  // its kernels in parallel already, and the IR pipeline works across functions.
  if (compile_pool_ && kind == ObjectKind::jit && options_.ir_opt_level == 0 && environment("TESSERA_DUMP").empty())
    if (auto objects = compile_parts(source)) return bundle_objects(*objects);
  TargetMachineLease tm(kind);
  llvm::LLVMContext ctx;
  auto module = host_module(source, ctx, *tm, options_.ir_opt_level);
  // TESSERA_DUMP=DIR: the IR and the assembly of every module as it is built.
  if (const std::string dir = environment("TESSERA_DUMP"); !dir.empty()) {
    std::string ir;
    llvm::raw_string_ostream ir_stream(ir);
    module->print(ir_stream, nullptr);
    dump_file(dir, source.entry + ".ll", ir);
    dump_file(dir, source.entry + ".s", assembly(source, options_.ir_opt_level));
  }
  return machine_code(*module, *tm, source.entry);
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
  const auto objects = unbundle_objects(object);
  if (!objects) throw CompileError("adding " + name + ": not an object bundle");
  for (const std::string& part : *objects)
    if (auto err = jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(part, name)))
      throw CompileError("adding " + name + ": " + llvm::toString(std::move(err)));
  entry.address = unwrap(jit_->lookup(name), "linking " + name).toPtr<void*>();
  if (!environment("TESSERA_PERF_MAP").empty())
    for (const std::string& part : *objects)
      write_perf_map(part, [&](const std::string& symbol) -> std::uint64_t {
        if (auto found = jit_->lookup(symbol))
          return found->getValue();
        else
          llvm::consumeError(found.takeError());
        return 0;
      });
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
  return machine_code(*module, *tm, source.entry, llvm::CodeGenFileType::AssemblyFile);
}

std::string OrcSession::llvm_version() { return LLVM_VERSION_STRING; }

}  // namespace tessera
