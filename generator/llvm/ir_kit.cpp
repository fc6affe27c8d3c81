#include "generator/llvm/ir_kit.hpp"

#include <llvm/ADT/STLExtras.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <llvm/TargetParser/Host.h>
#include "generator/core/error.hpp"

#include <algorithm>
#include <bit>
#include <functional>

namespace tessera {

IrKit::IrKit(llvm::LLVMContext& ctx, const std::string& module_name, const CpuTarget& target,
             std::string target_features)
    : target_(target),
      target_features_(std::move(target_features)),
      lanes_(target.vector_lanes()),
      ctx_(ctx),
      module_(std::make_unique<llvm::Module>(module_name, ctx)),
      b_(ctx) {
  f32_ = b_.getFloatTy();
  i64_ = b_.getInt64Ty();
  ptr_ = b_.getPtrTy();
  vec_ = llvm::FixedVectorType::get(f32_, lanes_);
  tensor_ty_ = llvm::StructType::create(ctx, {ptr_, i64_, i64_, i64_}, "tessera.TensorArg");
}

namespace {
// Asked once: each answer runs cpuid several times, and in a virtual machine every cpuid exits to the hypervisor.
const std::string& host_cpu_name() {
  static const std::string name = llvm::sys::getHostCPUName().str();
  return name;
}
}  // namespace

llvm::Function* IrKit::make_function(const std::string& name, llvm::Type* ret, std::vector<llvm::Type*> params,
                                     bool external) {
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(ret, params, false),
                                    external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage, name,
                                    module_.get());
  const bool avx512 = target_.isa == CpuIsa::Avx512;
  fn->addFnAttr("target-cpu", avx512 ? "x86-64-v4" : "x86-64-v3");
  fn->addFnAttr("tune-cpu", host_cpu_name());
  fn->addFnAttr("min-legal-vector-width", avx512 ? "512" : "256");
  fn->addFnAttr("prefer-vector-width", avx512 ? "512" : "256");
  if (!target_features_.empty()) fn->addFnAttr("target-features", target_features_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::BasicBlock::Create(ctx_, "entry", fn);
  b_.SetInsertPoint(&fn->getEntryBlock());
  return fn;
}

std::unique_ptr<llvm::Module> IrKit::verified_module(const char* emitter) {
  std::string error;
  llvm::raw_string_ostream os(error);
  if (llvm::verifyModule(*module_, &os)) throw CompileError(std::string(emitter) + " produced invalid IR: " + error);
  // Parts a kernel's config leaves unused (a packing routine for an operand read in place, an edge kernel no tile
  // needs) are emitted by the generic structure and called by nothing: the backend would still compile them, at
  // 0.5-8 ms each. Internal functions without uses go, until none is left.
  for (bool erased = true; erased;) {
    erased = false;
    for (llvm::Function& f : llvm::make_early_inc_range(*module_))
      if (f.hasLocalLinkage() && f.use_empty()) {
        f.eraseFromParent();
        erased = true;
      }
  }
  return std::move(module_);
}

void IrKit::unoptimised(llvm::Function* fn) {
  fn->addFnAttr(llvm::Attribute::OptimizeNone);
  fn->addFnAttr(llvm::Attribute::NoInline);
}

llvm::Value* IrKit::i64c(std::int64_t v) { return b_.getInt64(v); }

llvm::Value* IrKit::gep(llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(f32_, base, index); }

llvm::Value* IrKit::opaque(llvm::Value* value) {
  auto* type = llvm::FunctionType::get(value->getType(), {value->getType()}, false);
  return b_.CreateCall(llvm::InlineAsm::get(type, "", "=r,0", false), {value});
}

llvm::Value* IrKit::smin(llvm::Value* x, llvm::Value* y) { return b_.CreateSelect(b_.CreateICmpSLT(x, y), x, y); }

llvm::Value* IrKit::smax(llvm::Value* x, llvm::Value* y) { return b_.CreateSelect(b_.CreateICmpSLT(x, y), y, x); }

bool IrKit::all_true(llvm::Value* mask) {
  auto* c = llvm::dyn_cast<llvm::Constant>(mask);
  return c && c->isAllOnesValue();
}

llvm::Value* IrKit::load_masked(llvm::Value* ptr, llvm::Value* mask) {
  if (all_true(mask)) return b_.CreateAlignedLoad(vec_, ptr, llvm::Align(4));
  return b_.CreateMaskedLoad(vec_, ptr, llvm::Align(4), mask, llvm::Constant::getNullValue(vec_));
}

llvm::Value* IrKit::widen_bf16(llvm::Value* halves) {
  const auto n = llvm::cast<llvm::FixedVectorType>(halves->getType())->getNumElements();
  auto* words = llvm::FixedVectorType::get(b_.getInt32Ty(), n);
  return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(halves, words), 16), llvm::FixedVectorType::get(f32_, n));
}

llvm::Value* IrKit::load_masked_bf16(llvm::Value* ptr, llvm::Value* mask) {
  auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), static_cast<unsigned>(lanes_));
  llvm::Value* loaded =
      all_true(mask) ? static_cast<llvm::Value*>(b_.CreateAlignedLoad(halves, ptr, llvm::Align(2)))
                     : b_.CreateMaskedLoad(halves, ptr, llvm::Align(2), mask, llvm::Constant::getNullValue(halves));
  return widen_bf16(loaded);
}

void IrKit::store_masked(llvm::Value* value, llvm::Value* ptr, llvm::Value* mask, llvm::Align align) {
  if (all_true(mask))
    b_.CreateAlignedStore(value, ptr, align);
  else
    b_.CreateMaskedStore(value, ptr, align, mask);
}

void IrKit::store_first_lanes(llvm::Value* value, llvm::Value* ptr, int n, llvm::Align align) {
  auto* type = llvm::cast<llvm::FixedVectorType>(value->getType());
  const int width = static_cast<int>(type->getNumElements());
  if (n >= width) {
    b_.CreateAlignedStore(value, ptr, align);
    return;
  }
  // n as a sum of powers of two, the widest piece first: each a plain store of the lanes it covers.
  for (int at = 0; at < n;) {
    const int piece = static_cast<int>(std::bit_floor(static_cast<unsigned>(n - at)));
    llvm::Value* part = nullptr;
    if (piece == 1) {
      part = b_.CreateExtractElement(value, static_cast<std::uint64_t>(at));
    } else {
      std::vector<int> lanes(static_cast<std::size_t>(piece));
      for (int i = 0; i < piece; ++i) lanes[static_cast<std::size_t>(i)] = at + i;
      part = b_.CreateShuffleVector(value, lanes);
    }
    b_.CreateAlignedStore(part, b_.CreateConstGEP1_64(type->getElementType(), ptr, static_cast<std::uint64_t>(at)),
                          align);
    at += piece;
  }
}

void IrKit::store_lanes(llvm::Value* value, llvm::Value* ptr, llvm::Value* count, llvm::Align align) {
  const int width = static_cast<int>(llvm::cast<llvm::FixedVectorType>(value->getType())->getNumElements());
  if (auto* known = llvm::dyn_cast<llvm::ConstantInt>(count)) {
    store_first_lanes(value, ptr, static_cast<int>(std::clamp<std::int64_t>(known->getSExtValue(), 0, width)), align);
    return;
  }
  if (target_.isa != CpuIsa::Avx2) {  // AVX-512's masked stores are single instructions
    b_.CreateMaskedStore(value, ptr, align, lane_mask(width, count));
    return;
  }
  // A whole vector, or one of the partial counts by a switch whose every case is plain stores.
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* done = llvm::BasicBlock::Create(b_.getContext(), "lanes.done", fn);
  auto* none = llvm::BasicBlock::Create(b_.getContext(), "lanes.none", fn);
  auto* whole = llvm::BasicBlock::Create(b_.getContext(), "lanes.whole", fn);
  auto* partial = llvm::BasicBlock::Create(b_.getContext(), "lanes.partial", fn);
  b_.CreateCondBr(b_.CreateICmpSGE(count, i64c(width)), whole, partial);
  b_.SetInsertPoint(whole);
  b_.CreateAlignedStore(value, ptr, align);
  b_.CreateBr(done);
  b_.SetInsertPoint(partial);
  llvm::SwitchInst* choice = b_.CreateSwitch(count, none, static_cast<unsigned>(width - 1));
  for (int n = 1; n < width; ++n) {
    auto* block = llvm::BasicBlock::Create(b_.getContext(), "lanes.first", fn);
    choice->addCase(b_.getInt64(static_cast<std::uint64_t>(n)), block);
    b_.SetInsertPoint(block);
    store_first_lanes(value, ptr, n, align);
    b_.CreateBr(done);
  }
  b_.SetInsertPoint(none);
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

llvm::Constant* IrKit::lane_indices(int n) {
  std::vector<llvm::Constant*> v;
  for (int i = 0; i < n; ++i) v.push_back(b_.getInt64(i));
  return llvm::ConstantVector::get(v);
}

llvm::Value* IrKit::lane_mask(int n, llvm::Value* limit, std::int64_t first) {
  llvm::Value* lanes = b_.CreateAdd(lane_indices(n), b_.CreateVectorSplat(n, i64c(first)));
  return b_.CreateICmpSLT(lanes, b_.CreateVectorSplat(n, limit));
}

TensorFields IrKit::load_tensor(llvm::Value* tensor_ptr) {
  const auto field = [&](unsigned i, llvm::Type* t) {
    return b_.CreateLoad(t, b_.CreateStructGEP(tensor_ty_, tensor_ptr, i));
  };
  return {field(0, ptr_), field(1, i64_), field(2, i64_), field(3, i64_)};
}

TensorFields IrKit::dense(TensorFields t, const Layout& l, std::int64_t rows, std::int64_t cols) {
  if (l.kind() == LayoutKind::RowMajor) t.rs = i64c(cols);
  if (l.kind() == LayoutKind::ColMajor) t.cs = i64c(rows);
  return t;
}

llvm::Value* IrKit::is_dense(const TensorFields& t, const Layout& l, std::int64_t rows, std::int64_t cols) {
  if (l.kind() == LayoutKind::RowMajor) return b_.CreateICmpEQ(t.rs, i64c(cols));
  if (l.kind() == LayoutKind::ColMajor) return b_.CreateICmpEQ(t.cs, i64c(rows));
  return b_.getTrue();
}

llvm::Value* IrKit::transpose_rows(std::vector<llvm::Value*> rows, int rows_here) {
  llvm::Value* zero = llvm::Constant::getNullValue(vec_);
  while (rows.size() & (rows.size() - 1)) rows.push_back(zero);
  for (int width = lanes_; rows.size() > 1; width *= 2) {
    std::vector<int> concat(2 * static_cast<std::size_t>(width));
    for (int i = 0; i < 2 * width; ++i) concat[static_cast<std::size_t>(i)] = i;
    std::vector<llvm::Value*> next;
    for (std::size_t i = 0; i < rows.size(); i += 2)
      next.push_back(b_.CreateShuffleVector(rows[i], rows[i + 1], concat));
    rows = std::move(next);
  }
  std::vector<int> transpose;
  for (int q = 0; q < lanes_; ++q)
    for (int r = 0; r < rows_here; ++r) transpose.push_back(r * lanes_ + q);
  return b_.CreateShuffleVector(rows[0], transpose);
}

llvm::Value* IrKit::load_lanes(const TensorFields& t, llvm::Value* offset, const Expr& col_stride, llvm::Value* stride,
                               llvm::Value* mask) {
  llvm::Value* zero = llvm::Constant::getNullValue(vec_);
  if (is_constant(col_stride, 0))
    return b_.CreateVectorSplat(lanes_, b_.CreateAlignedLoad(f32_, gep(t.data, offset), llvm::Align(4)));
  if (is_constant(col_stride, 1)) return load_masked(gep(t.data, offset), mask);
  return b_.CreateMaskedGather(vec_, lane_pointers(t.data, offset, stride), llvm::Align(4), mask, zero);
}

llvm::Value* IrKit::lane_pointers(llvm::Value* base, llvm::Value* offset, llvm::Value* stride) {
  return gep(base, b_.CreateAdd(b_.CreateVectorSplat(lanes_, offset),
                                b_.CreateMul(lane_indices(lanes_), b_.CreateVectorSplat(lanes_, stride))));
}

std::vector<llvm::Value*> IrKit::columns_of_rows(std::vector<llvm::Value*> rows) {
  const int height = rows.size() <= 4 ? 4 : 8;
  while (static_cast<int>(rows.size()) < height) rows.push_back(llvm::Constant::getNullValue(vec_));
  const auto shuffle = [&](llvm::Value* x, llvm::Value* y, int width, const std::function<int(int lane, int e)>& pick) {
    std::vector<int> mask;
    for (int lane = 0; lane < width / 4; ++lane)
      for (int e = 0; e < 4; ++e) mask.push_back(pick(lane, e));
    return b_.CreateShuffleVector(x, y, mask);
  };
  const int n = lanes_;
  std::vector<llvm::Value*> t(static_cast<std::size_t>(height)), u(t.size());
  for (int i = 0; i < height; i += 2)
    for (int half = 0; half < 2; ++half)
      t[static_cast<std::size_t>(i + half)] =
          shuffle(rows[static_cast<std::size_t>(i)], rows[static_cast<std::size_t>(i + 1)], n,
                  [=](int l, int e) { return (e % 2 ? n : 0) + 4 * l + 2 * half + e / 2; });
  for (int g = 0; g < height; g += 4)
    for (int j = 0; j < 2; ++j)
      for (int half = 0; half < 2; ++half)
        u[static_cast<std::size_t>(g + 2 * j + half)] =
            shuffle(t[static_cast<std::size_t>(g + j)], t[static_cast<std::size_t>(g + j + 2)], n,
                    [=](int l, int e) { return (e / 2 ? n : 0) + 4 * l + 2 * half + e % 2; });
  std::vector<llvm::Value*> columns(static_cast<std::size_t>(n));
  std::vector<int> part;
  const auto take = [&](llvm::Value* x, int first, int count) {
    part.resize(static_cast<std::size_t>(count));
    for (int e = 0; e < count; ++e) part[static_cast<std::size_t>(e)] = first + e;
    return b_.CreateShuffleVector(x, part);
  };
  for (int i = 0; i < 4; ++i)
    for (int lane = 0; lane < n / 4; ++lane) {
      llvm::Value*& column = columns[static_cast<std::size_t>(4 * lane + i)];
      if (height == 4) {
        column = take(u[static_cast<std::size_t>(i)], 4 * lane, 4);
      } else if (n == 16 && lane % 2 == 0) {
        // Lanes (L, L + 1) of both halves in one 512-bit shuffle (vpermt2ps), then its 256-bit halves.
        llvm::Value* pair = shuffle(u[static_cast<std::size_t>(i)], u[static_cast<std::size_t>(4 + i)], n,
                                    [=](int l, int e) { return (l % 2 ? n : 0) + 4 * (lane + l / 2) + e; });
        column = take(pair, 0, 8);
        columns[static_cast<std::size_t>(4 * (lane + 1) + i)] = take(pair, 8, 8);
      } else if (n != 16) {
        column = shuffle(u[static_cast<std::size_t>(i)], u[static_cast<std::size_t>(4 + i)], 8,
                         [=](int l, int e) { return (l ? n : 0) + 4 * lane + e; });
      }
    }
  return columns;
}

std::vector<llvm::Value*> IrKit::transpose16(const std::vector<llvm::Value*>& rows) {
  const auto shuffle = [&](llvm::Value* x, llvm::Value* y, const std::function<int(int lane, int e)>& pick) {
    std::vector<int> mask;
    for (int lane = 0; lane < 4; ++lane)
      for (int e = 0; e < 4; ++e) mask.push_back(pick(lane, e));
    return b_.CreateShuffleVector(x, y, mask);
  };
  // Element e of 128-bit lane L: unpack takes 32-bit (or 64-bit) pairs from x and y alternately, low or high half.
  const auto unpack32 = [&](llvm::Value* x, llvm::Value* y, int half) {
    return shuffle(x, y, [=](int l, int e) { return (e % 2 ? 16 : 0) + 4 * l + 2 * half + e / 2; });
  };
  const auto unpack64 = [&](llvm::Value* x, llvm::Value* y, int half) {
    return shuffle(x, y, [=](int l, int e) { return (e / 2 ? 16 : 0) + 4 * l + 2 * half + e % 2; });
  };
  // Lanes {first, first + 2} of x, then of y.
  const auto lanes = [&](llvm::Value* x, llvm::Value* y, int first) {
    return shuffle(x, y, [=](int l, int e) { return (l / 2 ? 16 : 0) + 4 * (first + 2 * (l % 2)) + e; });
  };
  std::vector<llvm::Value*> t(16), r(16), out(16);
  for (std::size_t i = 0; i < 16; i += 2) {
    t[i] = unpack32(rows[i], rows[i + 1], 0);
    t[i + 1] = unpack32(rows[i], rows[i + 1], 1);
  }
  for (std::size_t g = 0; g < 16; g += 4)
    for (std::size_t j = 0; j < 2; ++j) {
      r[g + 2 * j] = unpack64(t[g + j], t[g + j + 2], 0);
      r[g + 2 * j + 1] = unpack64(t[g + j], t[g + j + 2], 1);
    }
  for (std::size_t h : {0, 8})
    for (std::size_t j = 0; j < 4; ++j) {
      t[h + j] = lanes(r[h + j], r[h + 4 + j], 0);
      t[h + 4 + j] = lanes(r[h + j], r[h + 4 + j], 1);
    }
  for (std::size_t j = 0; j < 8; ++j) {
    out[j] = lanes(t[j], t[8 + j], 0);
    out[8 + j] = lanes(t[j], t[8 + j], 1);
  }
  return out;
}

}  // namespace tessera
