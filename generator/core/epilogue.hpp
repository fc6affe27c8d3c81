// The epilogue: an expression over acc, c, alpha, beta and user-named tensors, with its text parser. A sampled
// product (SDDMM) has its own dialect: acc, alpha, the sampling pattern's value s and tensors [m] / [n], no c.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "generator/core/expr.hpp"

namespace tessera {

// How a user tensor is indexed by the output coordinates.
enum class IndexForm : unsigned char {
  M,   // scale[m]: one value per output row
  N,   // bias[n]: one value per output column
  MN,  // residual[m,n]: a matrix shaped like the output
};
std::string_view index_form_name(IndexForm form);  // "m", "n", "m,n"

struct EpilogueTensor {
  std::string name;
  IndexForm form;
  friend bool operator==(const EpilogueTensor&, const EpilogueTensor&) = default;
};

class Epilogue {
 public:
  // Parses user text; throws EpilogueError naming the column.
  static Epilogue parse(std::string_view text);
  // The sampled dialect (SDDMM): acc, alpha, s and tensors [m] or [n]; throws EpilogueError naming the column.
  static Epilogue parse_sampled(std::string_view text);
  // Checks a tree built in code by the same rules as parsed text.
  static Epilogue from_tree(Expr tree);
  // The BLAS default, alpha*acc + beta*c.
  static Epilogue linear_combination();

  const Expr& tree() const { return state_->tree; }
  const std::string& text() const { return state_->text; }  // canonical, printed once
  // Named tensors, sorted by name.
  const std::vector<EpilogueTensor>& tensors() const { return state_->tensors; }
  bool reads_c() const { return state_->reads_c; }
  bool reads_alpha() const { return state_->reads_alpha; }
  bool reads_beta() const { return state_->reads_beta; }
  bool reads_s() const { return state_->reads_s; }  // the sampled dialect's pattern value
  bool sampled() const { return state_->sampled; }
  // True when every c appears inside a product with beta (as in beta*c), so beta = 0 means C is never read.
  bool c_scaled_by_beta() const { return state_->c_scaled_by_beta; }
  // True when it calls exp, tanh, sigmoid, silu or a gelu: a vectorised polynomial per element, which the CPU
  // back-end evaluates with the accumulator tile parked in memory rather than in registers.
  bool calls_transcendental() const { return state_->calls_transcendental; }
  // The same epilogue object (copies share it): a cheap first test before comparing texts.
  bool same_as(const Epilogue& other) const { return state_ == other.state_; }

 private:
  // Immutable and shared, so that copying an epilogue (every call binds one) costs one reference count.
  struct State {
    Expr tree;
    std::string text;
    std::vector<EpilogueTensor> tensors;
    bool reads_c = false, reads_alpha = false, reads_beta = false, c_scaled_by_beta = false, reads_s = false;
    bool sampled = false;
    bool calls_transcendental = false;
  };
  Epilogue(Expr tree, bool sampled);
  std::shared_ptr<const State> state_;
};

// Names with a fixed meaning in epilogue text.
bool is_reserved_epilogue_name(std::string_view name);

}  // namespace tessera
