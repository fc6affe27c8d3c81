#include "generator/llvm/vector_math.hpp"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <cmath>
#include <initializer_list>
#include <iterator>
#include <numbers>
#include <vector>

namespace tessera {

namespace {

llvm::Value* k(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }

llvm::Value* fma(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z});
}

// Estrin's scheme, highest coefficient first: pairs a + b·z, then pairs of pairs with z², z⁴, ... A degree-6
// polynomial is 3 dependent FMAs deep instead of Horner's 6. An epilogue's chains are long enough for their
// latency to bound it: a loop of AVX2 gelu on Zen 3 took 1.2 ns per element over a copy with Horner, 0.4 with
// Estrin.
llvm::Value* polynomial(llvm::IRBuilder<>& b, llvm::Value* z, std::initializer_list<double> coefficients) {
  std::vector<llvm::Value*> terms;  // lowest coefficient first
  for (auto it = std::rbegin(coefficients); it != std::rend(coefficients); ++it) terms.push_back(k(z, *it));
  llvm::Value* power = z;
  while (terms.size() > 1) {
    std::vector<llvm::Value*> next;
    for (std::size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back(fma(b, terms[i + 1], power, terms[i]));
    if (terms.size() % 2 == 1) next.push_back(terms.back());
    terms = std::move(next);
    if (terms.size() > 1) power = b.CreateFMul(power, power);
  }
  return terms.front();
}

llvm::Type* int_type_like(llvm::IRBuilder<>& b, llvm::Value* x) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(x->getType()))
    return llvm::VectorType::get(b.getInt32Ty(), v->getElementCount());
  return b.getInt32Ty();
}

}  // namespace

// Cephes expf: x = n·ln2 + r with |r| ≤ ln2/2, e^r by a degree-6 polynomial, then scaled by 2^n in two
// halves so that n from -150 to 128 neither overflows the exponent field nor loses the denormal range.
llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Value* xc =
      b.CreateIntrinsic(llvm::Intrinsic::maxnum, {ft},
                        {b.CreateIntrinsic(llvm::Intrinsic::minnum, {ft}, {x, k(x, 88.72283905206835)}), k(x, -104.0)});
  llvm::Value* n = b.CreateIntrinsic(llvm::Intrinsic::floor, {ft}, {fma(b, xc, k(x, std::numbers::log2e), k(x, 0.5))});
  llvm::Value* r = fma(b, n, k(x, -0.693359375), xc);
  r = fma(b, n, k(x, 2.12194440e-4), r);
  llvm::Value* p = polynomial(
      b, r, {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1});
  llvm::Value* y = fma(b, p, b.CreateFMul(r, r), b.CreateFAdd(r, k(x, 1.0)));
  llvm::Type* it = int_type_like(b, x);
  llvm::Value* ni = b.CreateFPToSI(n, it);
  llvm::Value* n1 = b.CreateAShr(ni, 1);
  llvm::Value* n2 = b.CreateSub(ni, n1);
  const auto pow2 = [&](llvm::Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, llvm::ConstantInt::get(it, 127)), 23), ft);
  };
  llvm::Value* result = b.CreateFMul(b.CreateFMul(y, pow2(n1)), pow2(n2));
  // Above the clamp the true result overflows to +inf; NaN stays NaN.
  result = b.CreateSelect(b.CreateFCmpOGT(x, k(x, 88.72283905206835)), k(x, INFINITY), result);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
}

// 2^x = 2^n · 2^f with n = round(x), |f| ≤ ½: 2^f = e^{f·ln2} by its Taylor series to degree 6 (truncation below
// 1.2e-7 relative) or, for `bits` ≤ 8 (weights rounded to bf16), degree 4 (1.3e-5), then scaled by 2^n. Half the
// operations of emit_exp: no two-part range reduction and one scaling. A softmax's exponents are independent of one
// another, so the loop is bound by throughput: Horner's scheme (one FMA per degree) over Estrin's (which adds the
// powers of f).
llvm::Value* emit_exp2(llvm::IRBuilder<>& b, llvm::Value* x, int bits) {
  llvm::Type* ft = x->getType();
  auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(ft);
  // 16 lanes are AVX-512's: vscalefps scales by 2^n (and overflows to inf) in one instruction.
  const bool scalef = vector && vector->getNumElements() == 16;
  // The clamps as selects that keep a NaN x (one vminps / vmaxps each; minnum and maxnum add a NaN test apiece).
  llvm::Value* low = k(x, -126.0);
  llvm::Value* below = x;
  if (!scalef) {
    llvm::Value* high = k(x, 127.0);
    below = b.CreateSelect(b.CreateFCmpOLT(high, x), high, x);
  }
  llvm::Value* xc = b.CreateSelect(b.CreateFCmpOGT(low, below), low, below);
  llvm::Value* n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {ft}, {xc});
  llvm::Value* f = b.CreateFSub(xc, n);
  const double ln2 = std::numbers::ln2;
  const int degree = bits <= 8 ? 4 : 6;
  llvm::Value* p = k(x, std::pow(ln2, degree) / std::tgamma(degree + 1));
  for (int d = degree - 1; d >= 0; --d) p = fma(b, p, f, k(x, std::pow(ln2, d) / std::tgamma(d + 1)));
  if (scalef)
    return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
                             {p, n, llvm::PoisonValue::get(ft), b.getInt16(0xffff), b.getInt32(4)});
  llvm::Type* it = int_type_like(b, x);
  llvm::Value* scale =
      b.CreateBitCast(b.CreateShl(b.CreateAdd(b.CreateFPToSI(n, it), llvm::ConstantInt::get(it, 127)), 23), ft);
  return b.CreateFMul(p, scale);
}

// Cephes logf: x = m·2^e with m in [√½, √2), log(1 + (m − 1)) by a degree-8 polynomial, e·ln2 added in two parts.
llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = int_type_like(b, x);
  llvm::Value* bits = b.CreateBitCast(x, it);
  llvm::Value* e = b.CreateSub(b.CreateLShr(bits, 23), llvm::ConstantInt::get(it, 126));
  llvm::Value* m = b.CreateBitCast(
      b.CreateOr(b.CreateAnd(bits, llvm::ConstantInt::get(it, 0x007fffff)), llvm::ConstantInt::get(it, 0x3f000000)),
      ft);  // in [0.5, 1)
  llvm::Value* small = b.CreateFCmpOLT(m, k(x, std::numbers::sqrt2 / 2));
  llvm::Value* ef = b.CreateSIToFP(b.CreateSub(e, b.CreateZExt(small, it)), ft);
  llvm::Value* r = b.CreateFSub(b.CreateSelect(small, b.CreateFAdd(m, m), m), k(x, 1.0));
  llvm::Value* z = b.CreateFMul(r, r);
  llvm::Value* p = polynomial(b, r,
                              {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                               -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  llvm::Value* y = b.CreateFMul(b.CreateFMul(p, r), z);
  y = fma(b, ef, k(x, -2.12194440e-4), y);
  y = fma(b, z, k(x, -0.5), y);
  return fma(b, ef, k(x, 0.693359375), b.CreateFAdd(r, y));
}

// Cephes tanhf: an odd polynomial for |x| < 0.625, else 1 - 2/(e^{2|x|} + 1) with the sign restored.
llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* small = fma(
      b, b.CreateFMul(x, z),
      polynomial(b, z, {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1, -3.33332819422E-1}),
      x);
  llvm::Value* e = emit_exp(b, b.CreateFMul(ax, k(x, 2.0)));
  llvm::Value* large = b.CreateFSub(k(x, 1.0), b.CreateFDiv(k(x, 2.0), b.CreateFAdd(e, k(x, 1.0))));
  large = b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {large, x});
  return b.CreateSelect(b.CreateFCmpOLT(ax, k(x, 0.625)), small, large);
}

llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x) {
  return b.CreateFDiv(k(x, 1.0), b.CreateFAdd(k(x, 1.0), emit_exp(b, b.CreateFNeg(x))));
}

// erf(x) as an odd rational function on [-4, 4] (outside it erf is ±1 in f32): |error| ≤ 7e-8, no exp, one
// division. The coefficients are the ones Eigen and XLA use for f32.
llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Value* xc = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {t},
                                      {b.CreateIntrinsic(llvm::Intrinsic::minnum, {t}, {x, k(x, 4.0)}), k(x, -4.0)});
  llvm::Value* x2 = b.CreateFMul(xc, xc);
  llvm::Value* p = b.CreateFMul(
      xc, polynomial(b, x2,
                     {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                      -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02}));
  llvm::Value* q = polynomial(b, x2,
                              {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                               -7.37332916720468e-03, -1.42647390514189e-02});
  return b.CreateFDiv(p, q);
}

// gelu(x) = x·Φ(x) = 0.5·x·(1 + erf(x/√2)), as PyTorch computes it in f32.
llvm::Value* emit_gelu(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* erf = emit_erf(b, b.CreateFMul(x, k(x, 1.0 / std::numbers::sqrt2)));
  return b.CreateFMul(b.CreateFMul(x, k(x, 0.5)), b.CreateFAdd(k(x, 1.0), erf));
}

llvm::Value* emit_gelu_tanh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* inner = b.CreateFMul(fma(b, b.CreateFMul(b.CreateFMul(x, x), x), k(x, 0.044715), x),
                                    k(x, std::sqrt(2.0 / std::numbers::pi)));
  return b.CreateFMul(b.CreateFMul(x, k(x, 0.5)), b.CreateFAdd(k(x, 1.0), emit_tanh(b, inner)));
}

}  // namespace tessera
