#include "generator/gemm/gemm_epilogue_binding.hpp"

#include <stdexcept>

namespace tessera {

EpilogueRead bind_epilogue_leaf(const GemmSignature& s, const ExprNode& leaf, const Expr& row, const Expr& col,
                                const Expr& batch) {
  const Expr zero = int_constant(0);
  if (leaf.op == ExprOp::Var) {
    if (leaf.name == "acc") return {EpilogueSource::Accumulator, 0, {}, {}, {}};
    if (leaf.name == "alpha") return {EpilogueSource::Alpha, 0, {}, {}, {}};
    if (leaf.name == "beta") return {EpilogueSource::Beta, 0, {}, {}, {}};
    if (leaf.name != "c") throw std::logic_error("epilogue: unknown variable " + leaf.name);
    if (!s.c.layout.reads_memory()) return {EpilogueSource::ZeroC, 0, {}, {}, {}};
    return {EpilogueSource::C, 0, "c", s.c.layout.offset("c", row, col, batch), s.c.layout.col_stride("c")};
  }
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    const EpilogueInput& in = s.inputs[i];
    if (in.name != leaf.name) continue;
    const std::string prefix = "in." + in.name;
    const Layout& l = in.operand.layout;
    switch (in.form) {
      case IndexForm::M:
        return {EpilogueSource::Input, i, prefix, l.offset(prefix, row, zero, batch), zero, true};
      case IndexForm::N:
        return {EpilogueSource::Input, i, prefix, l.offset(prefix, zero, col, batch), l.col_stride(prefix)};
      case IndexForm::MN:
        break;
    }
    return {EpilogueSource::Input, i, prefix, l.offset(prefix, row, col, batch), l.col_stride(prefix)};
  }
  throw std::logic_error("epilogue: unknown tensor " + leaf.name);
}

}  // namespace tessera
