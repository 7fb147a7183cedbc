// The layer op graph: one transformer layer (and the embedding / LM head / loss
// around the stack) as a short list of ops over named tensors.
//
// Every op knows its forward FLOPs, whether it is a GEMM (and its shape), how it
// is split by tensor parallelism, and which tensors it saves for backward. Memory
// (which tensors stay alive) and time (what each op costs) are both derived from
// this one list, so a change of architecture is a change of the list.
//
// Sizes are per token of one micro-batch (multiply by s*b); attention-score
// tensors are per token per key position (multiply by s*s*b).
#pragma once

#include <string>
#include <vector>

#include "trainplan/training.hpp"

namespace trainplan {

// How a tensor is split across the tensor-parallel group.
enum class Split {
    Replicated,  // full hidden vector on every TP rank; sequence parallelism splits it by t
    TensorParallel,  // heads / FFN columns split by t
};

struct TensorDef {
    std::string name;
    double elems_per_token = 0;     // x s*b
    double elems_per_token_sq = 0;  // x s*s*b (attention scores, masks)
    double bytes_per_elem = 2;
    Split split = Split::TensorParallel;
    bool attention_core = false;    // dropped by selective recompute (Korthikanti et al. 2022, Sec. 4)
};

enum class OpKind { Gemm, LoraGemm, AttentionScores, AttentionValues, FlashAttention, Norm, Elementwise, Dropout, Router };

struct OpDef {
    std::string name;
    OpKind kind = OpKind::Elementwise;
    Split split = Split::TensorParallel;
    // Forward FLOPs per token (x s*b) and per token per key (x s*s*b, before any
    // causal saving).
    double flops_per_token = 0;
    double flops_per_token_sq = 0;
    // GEMM: tokens x k  @  k x n  (n, k before TP split).
    double gemm_n = 0, gemm_k = 0;
    bool row_parallel = false;  // TP splits k (input is TP-split), else n
    bool trainable_weight = true;  // has a weight gradient in backward
    // Bytes read + written in HBM per token by a memory-bound op.
    double hbm_bytes_per_token = 0;
    std::vector<int> saves;  // indices into LayerGraph::tensors
};

// Saved-activation bytes of one layer, as coefficients:
//   bytes(s, b, t, sp) = s*b*(replicated / (sp ? t : 1) + tensor_parallel / t)
//                      + s*s*b * squared / t
struct ActivationCoeffs {
    double replicated = 0;
    double tensor_parallel = 0;
    double squared = 0;

    [[nodiscard]] double bytes(double s, double b, double t, bool sp) const {
        return s * b * (replicated / (sp ? t : 1.0) + tensor_parallel / t) + s * s * b * squared / t;
    }
};

struct LayerGraph {
    std::vector<TensorDef> tensors;
    std::vector<OpDef> ops;
    ActivationCoeffs stored_none;       // recompute = none
    ActivationCoeffs stored_selective;  // recompute = selective
    ActivationCoeffs stored_full;       // recompute = full: the layer input only
};

// Builds one layer of `m` as trained by `t` (method, dropout, FlashAttention and
// activation dtype change the list). MoE layers use the expected tokens per
// expert under balanced routing.
[[nodiscard]] LayerGraph build_layer_graph(const ModelSpec& m, const TrainingSetup& t);

// Bytes per element of stored activations under a precision policy.
[[nodiscard]] double activation_bytes_per_elem(Precision p);

}  // namespace trainplan
