// Binds user SpmmArgs / SddmmArgs to a kernel: validates every argument (the pattern through the inspector), copies
// operands the kernels do not read in place, and produces the problem and the kernel's arguments.
#pragma once

#include <memory>
#include <vector>

#include "generator/sparse/sparse_abi.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

struct SpmmBinding {
  SpmmProblem problem;
  SpmmKernelArgs args;
  std::vector<TensorArg> inputs;
  std::shared_ptr<const SparsePlan> plan;
  std::vector<float> b_copy;  // B as row-major f32 when it was given in another layout
  // A in column panels (K tiled so that each panel's B rows stay in the L2), run one after another; empty: A whole.
  std::shared_ptr<const std::vector<SparseMatrixData>> panels;
  // Panels sized for the L1: each task takes its rows through every panel in turn (its D rows stay in cache, one
  // dispatch for all panels); else each panel is one pass of every task, so that the panel stays in the L2.
  bool panels_per_task = false;
  // D's columns computed this many at a time (N tiled so that B's column panel stays in the L2), each column panel
  // over every K panel; 0: all at once. The kernel rounds it up to its tile width.
  std::int64_t column_panel = 0;

  SpmmKernelArgs kernel_args() const {
    SpmmKernelArgs a = args;
    a.inputs = inputs.data();
    return a;
  }
};

struct SddmmBinding {
  SddmmProblem problem;
  SddmmKernelArgs args;
  std::vector<TensorArg> inputs;
  std::shared_ptr<const SparsePlan> plan;
  std::vector<float> a_copy, b_copy;  // A and B as row-major f32 when given otherwise

  SddmmKernelArgs kernel_args() const {
    SddmmKernelArgs a = args;
    a.inputs = inputs.data();
    return a;
  }
};

// Where the arrays live. Host arrays are inspected (or checked against the given plan), and operands the CPU
// kernels do not read in place are copied. Device arrays cannot be read: the plan (made from the host arrays of the
// same pattern) is required and matched by shape, and every operand must already be as the CUDA kernels read it.
enum class Residence { Host, Device };

// `threads`: the threads the plan is made for when args carry none. Throw InvalidArgument naming the argument.
SpmmBinding bind_spmm(const SpmmArgs& args, int threads, Residence where = Residence::Host);
SddmmBinding bind_sddmm(const SddmmArgs& args, int threads, Residence where = Residence::Host);

}  // namespace tessera
