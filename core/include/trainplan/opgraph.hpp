// The step graph: the whole training step as a short list of ops over tensors --
// embedding (first pipeline stage), one transformer layer (dense or MoE, repeated
// L times), final norm, LM head and loss (last stage).
//
// Every op carries its role (an enum; names are labels only), its forward FLOPs,
// its GEMM shape, the bytes it moves through HBM, the weights it owns (parameters,
// trainable or frozen, shard class, TP split), what it saves for backward (and
// whether selective recompute repeats it), and the collectives it triggers
// (TP/SP, EP; context parallelism would add its ring here). Memory and time both
// walk this one list; count_params (model.cpp) is the independent cross-check of
// its weights.
//
// Sizes are per token of one micro-batch (multiply by s*b); attention-score
// tensors are per token per key position (multiply by s*s*b).
#pragma once

#include <string>
#include <vector>

#include "trainplan/training.hpp"

namespace trainplan {

// How a tensor or weight is split across the tensor-parallel group.
enum class Split {
    Replicated,      // full hidden vector on every TP rank; sequence parallelism splits it by t
    TensorParallel,  // heads / FFN columns / vocabulary split by t
};

// Where an op runs: once on the first pipeline stage, in every layer, or once on
// the last stage.
enum class Site { First, Layer, Last };

// What an op is. Memory and time key on these, never on names.
enum class OpRole {
    Embedding, PositionEmbedding, EmbeddingNorm, EmbeddingDropout,
    AttnNorm, QProj, KProj, VProj, Rope,
    FlashAttention, AttnLayoutCopies, AttnScores, AttnSoftmax, AttnDropout, AttnValues,
    OProj, PostAttnNorm, AttnOutDropout, AttnResidualAdd,
    MlpNorm, GateUpProj, UpProj, ActFn, ActMul, DownProj,
    Router, RouterTopK, MoeCombine,
    PostMlpNorm, MlpOutDropout, MlpResidualAdd,
    LoraDropout, LoraA, LoraB,
    FinalNorm, LmHead, Loss,
};

enum class OpKind { Gemm, LoraGemm, AttentionScores, AttentionValues, FlashAttention, Norm, Elementwise, Dropout, Router, Lookup };

// How ZeRO / EP shard a weight (and its gradient and optimizer states).
enum class ShardClass { Dense, Expert, Embedding, Norm };

// The weights an op owns (per layer for layer ops).
struct WeightDef {
    double params = 0;              // before any split
    bool trainable = false;         // has a gradient and optimizer states
    ShardClass shard = ShardClass::Dense;
    bool tp_split = false;          // split by the tensor-parallel group (EP also splits Expert)
    // Megatron keeps a copy of tied word embeddings on the last stage when the
    // pipeline has more than one stage; the copy is not a parameter of the model.
    bool tied_copy = false;
    bool adapter = false;           // a LoRA adapter matrix
    // Base linear-layer weights: what QLoRA stores quantized (and dequantizes per matmul).
    [[nodiscard]] bool quantizable() const {
        return tp_split && !adapter && (shard == ShardClass::Dense || shard == ShardClass::Expert);
    }
};

// Collectives an op triggers once per forward (and again in backward).
enum class CollectiveKind {
    TensorParallel,  // all-reduce (or all-gather + reduce-scatter with SP) over the TP group
    ExpertAllToAll,  // token dispatch / combine over the EP group
    // ContextParallel: the ring of K/V blocks would be added here.
};
struct CollectiveDef {
    CollectiveKind kind = CollectiveKind::TensorParallel;
    double bytes_per_token = 0;  // message size per token of the micro-batch
};

struct TensorDef {
    std::string name;               // label (tests, debugging)
    double elems_per_token = 0;     // x s*b
    double elems_per_token_sq = 0;  // x s*s*b (attention scores, masks)
    double bytes_per_elem = 2;
    Split split = Split::TensorParallel;
    int producer = -1;              // op that writes it (index into ops), -1 = from outside the graph
    bool logits = false;            // the loss's logits copies (booked as `logits` in memory)
};

struct OpDef {
    std::string name;  // label only: nothing compares it
    OpRole role = OpRole::ActFn;
    OpKind kind = OpKind::Elementwise;
    Site site = Site::Layer;
    Split split = Split::TensorParallel;
    // Forward FLOPs per token (x s*b) and per token per key (x s*s*b, before any
    // causal saving).
    double flops_per_token = 0;
    double flops_per_token_sq = 0;
    // GEMM: tokens x k  @  k x n  (n, k before TP split).
    double gemm_n = 0, gemm_k = 0;
    double gemm_rows_per_token = 1;  // MoE experts: top_k rows per token ...
    int gemm_groups = 1;             // ... spread over E separate expert GEMMs
    bool row_parallel = false;       // TP splits k (input is TP-split), else n
    bool fp8_gemm = true;            // runs in fp8 under fp8-mixed (Transformer Engine keeps the LM head in 16-bit)
    bool trainable_weight = true;    // has a weight gradient in backward
    // Bytes read + written in HBM per token by a memory-bound op, and per token
    // per key (softmax / dropout over eager attention scores).
    double hbm_bytes_per_token = 0;
    double hbm_bytes_per_token_sq = 0;
    double bwd_hbm_factor = 2;       // backward traffic / forward traffic
    bool selective_recompute = false;  // repeated in backward under selective recompute (Korthikanti Sec. 5)
    WeightDef weight;
    std::vector<CollectiveDef> collectives;
    std::vector<int> saves;  // indices into StepGraph::tensors
};

// Saved-activation bytes, as coefficients:
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

struct StepGraph {
    std::vector<TensorDef> tensors;
    std::vector<OpDef> ops;               // all sites, in execution order
    ActivationCoeffs stored_none;         // one layer, recompute = none
    ActivationCoeffs stored_selective;    // one layer, recompute = selective
    ActivationCoeffs stored_full;         // one layer, recompute = full: the layer input only
    ActivationCoeffs stored_first;        // embedding side, per in-flight micro-batch
    ActivationCoeffs stored_last;         // final norm and LM-head inputs, one micro-batch
    ActivationCoeffs logits;              // the loss's logits copies, one micro-batch
    // Selective recompute repeats these forward FLOPs per layer (per token per key).
    double selective_flops_per_token_sq = 0;

    // Stored bytes per layer under a recompute policy.
    [[nodiscard]] const ActivationCoeffs& stored(Recompute r) const {
        return r == Recompute::Full ? stored_full : r == Recompute::Selective ? stored_selective : stored_none;
    }
    // Parameters of the model the ops own (L layers + both ends; tied copies
    // excluded), all or only the trainable ones. Equals count_params (tested).
    [[nodiscard]] double model_params(std::int64_t layers, bool trainable_only = false) const;
};
using LayerGraph = StepGraph;  // the former name (one layer plus the ends)

// Builds the step of `m` as trained by `t` (method, dropout, FlashAttention,
// activation dtype and framework change the list). MoE layers use the expected
// tokens per expert under balanced routing.
[[nodiscard]] StepGraph build_step_graph(const ModelSpec& m, const TrainingSetup& t);
[[nodiscard]] inline StepGraph build_layer_graph(const ModelSpec& m, const TrainingSetup& t) { return build_step_graph(m, t); }

// Bytes per element of stored activations under a precision policy.
[[nodiscard]] double activation_bytes_per_elem(Precision p);

}  // namespace trainplan
