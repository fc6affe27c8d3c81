#include "generator/llvm/loops.hpp"

#include <string>

namespace tessera {

LoopValues emit_for(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end, llvm::Value* step,
                    const LoopValues& init,
                    const std::function<LoopValues(llvm::Value* iv, const LoopValues& carried)>& body,
                    const char* name) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  const std::string n(name);
  llvm::BasicBlock* entry = b.GetInsertBlock();
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx, n + ".body", f);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, n + ".exit", f);
  b.CreateCondBr(b.CreateICmpSLT(begin, end), loop, exit);

  b.SetInsertPoint(loop);
  llvm::PHINode* iv = b.CreatePHI(b.getInt64Ty(), 2, n + ".iv");
  iv->addIncoming(begin, entry);
  LoopValues carried;
  std::vector<llvm::PHINode*> phis;
  for (llvm::Value* v : init) {
    llvm::PHINode* phi = b.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, entry);
    phis.push_back(phi);
    carried.push_back(phi);
  }
  const LoopValues next = body(iv, carried);
  llvm::Value* iv_next = b.CreateAdd(iv, step, n + ".next");
  llvm::BasicBlock* latch = b.GetInsertBlock();
  iv->addIncoming(iv_next, latch);
  for (std::size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  b.CreateCondBr(b.CreateICmpSLT(iv_next, end), loop, exit);

  b.SetInsertPoint(exit);
  LoopValues result;
  for (std::size_t i = 0; i < init.size(); ++i) {
    llvm::PHINode* phi = b.CreatePHI(init[i]->getType(), 2);
    phi->addIncoming(init[i], entry);
    phi->addIncoming(next[i], latch);
    result.push_back(phi);
  }
  return result;
}

void emit_for(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end, llvm::Value* step,
              const std::function<void(llvm::Value* iv)>& body, const char* name) {
  emit_for(
      b, begin, end, step, {},
      [&](llvm::Value* iv, const LoopValues&) {
        body(iv);
        return LoopValues{};
      },
      name);
}

void emit_if(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& then, const char* name) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  const std::string n(name);
  llvm::BasicBlock* then_block = llvm::BasicBlock::Create(b.getContext(), n + ".then", f);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(b.getContext(), n + ".done", f);
  b.CreateCondBr(cond, then_block, done);
  b.SetInsertPoint(then_block);
  then();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

LoopValues emit_select_values(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<LoopValues()>& then,
                              const std::function<LoopValues()>& otherwise, const char* name) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  const std::string n(name);
  llvm::BasicBlock* then_block = llvm::BasicBlock::Create(b.getContext(), n + ".then", f);
  llvm::BasicBlock* else_block = llvm::BasicBlock::Create(b.getContext(), n + ".else", f);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(b.getContext(), n + ".done", f);
  b.CreateCondBr(cond, then_block, else_block);
  b.SetInsertPoint(then_block);
  const LoopValues x = then();
  llvm::BasicBlock* then_end = b.GetInsertBlock();
  b.CreateBr(done);
  b.SetInsertPoint(else_block);
  const LoopValues y = otherwise();
  llvm::BasicBlock* else_end = b.GetInsertBlock();
  b.CreateBr(done);
  b.SetInsertPoint(done);
  LoopValues out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i]) {
      out.push_back(x[i]);
      continue;
    }
    llvm::PHINode* phi = b.CreatePHI(x[i]->getType(), 2, n + ".value");
    phi->addIncoming(x[i], then_end);
    phi->addIncoming(y[i], else_end);
    out.push_back(phi);
  }
  return out;
}

void emit_if_else(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& then,
                  const std::function<void()>& otherwise, const char* name) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  const std::string n(name);
  llvm::BasicBlock* then_block = llvm::BasicBlock::Create(b.getContext(), n + ".then", f);
  llvm::BasicBlock* else_block = llvm::BasicBlock::Create(b.getContext(), n + ".else", f);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(b.getContext(), n + ".done", f);
  b.CreateCondBr(cond, then_block, else_block);
  b.SetInsertPoint(then_block);
  then();
  b.CreateBr(done);
  b.SetInsertPoint(else_block);
  otherwise();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

}  // namespace tessera
