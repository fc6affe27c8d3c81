// Flash-decoding on the CPU: when a call has too few blocks for the threads, or its heads' key rows are interleaved in
// memory (BSHD), each block's keys are split into chunks run as separate tasks. A chunk's task leaves its rows'
// output (normalised over the chunk) and log-sum-exp in f32 scratch; merging weighs each chunk by its exp(lse).
#pragma once

#include <cstdint>

#include "generator/attention/attention_abi.hpp"
#include "generator/attention/cpu_attention_config.hpp"
#include "generator/core/dtype.hpp"
#include "ops/attention/attention_binding.hpp"

namespace tessera {

// Keys per chunk (a multiple of block_kv), or 0 for no split: only in-place (decoding) configs split, into enough
// chunks to give `participants` threads two tasks each, and into chunks whose K and V rows stay within the TLB's
// reach when a key's row is a page or more away from the next (heads interleaved).
std::int64_t key_chunk_length(const AttentionBinding& bound, const CpuAttentionConfig& config, std::int64_t blocks,
                              int participants);

// Points a block's call at its chunk's scratch: O rows of `dv` floats (f32 whatever the signature's type) from
// o_part, the LSE at lse_part, one per row.
void aim_at_chunk_scratch(AttentionBlockArgs& call, float* o_part, float* lse_part, std::int64_t dv);

// Merges `chunks` partial results of one block (chunk c's rows at o_parts + c·o_chunk_floats and lse_parts +
// c·lse_chunk_floats, as aim_at_chunk_scratch lays them out) into the block's O (of `o_type`, f32 or bf16) and LSE as
// `call` addresses them.
void merge_key_chunks(const AttentionBlockArgs& call, std::int64_t chunks, const float* o_parts,
                      std::int64_t o_chunk_floats, const float* lse_parts, std::int64_t lse_chunk_floats,
                      std::int64_t dv, DType o_type);

}  // namespace tessera
