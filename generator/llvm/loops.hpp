// Structured control flow for IRBuilder code: counted loops with loop-carried values, and guarded blocks.
#pragma once

#include <functional>
#include <vector>

#include <llvm/IR/IRBuilder.h>

namespace tessera {

using LoopValues = std::vector<llvm::Value*>;

// Emits for (iv = begin; iv < end; iv += step) carried = body(iv, carried); returns the final carried values.
// All of begin, end and step are i64; the loop is rotated so the body is one straight block when it can be.
LoopValues emit_for(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end, llvm::Value* step,
                    const LoopValues& init,
                    const std::function<LoopValues(llvm::Value* iv, const LoopValues& carried)>& body,
                    const char* name);

// The same without carried values.
void emit_for(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end, llvm::Value* step,
              const std::function<void(llvm::Value* iv)>& body, const char* name);

// Emits if (cond) then(); continues after it.
void emit_if(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& then, const char* name);

// Emits values = cond ? then() : otherwise() over blocks (both return as many values, of matching types); the
// values are joined by phis where the branches differ.
LoopValues emit_select_values(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<LoopValues()>& then,
                              const std::function<LoopValues()>& otherwise, const char* name);

// Emits if (cond) then(); else otherwise(); continues after it.
void emit_if_else(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& then,
                  const std::function<void()>& otherwise, const char* name);

}  // namespace tessera
