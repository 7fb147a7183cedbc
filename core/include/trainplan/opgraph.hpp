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

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
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
    Embedding, PositionEmbedding, EmbeddingNorm, EmbeddingDropout, VisionEncoder,
    AttnNorm, QProj, KProj, VProj, QkvProj, QkNorm, Rope,
    KvRepeat, FlashAttention, AttnLayoutCopies, AttnScores, AttnSoftcap, AttnSoftmax, AttnDropout, AttnValues,
    OProj, PostAttnNorm, AttnOutDropout, AttnResidualAdd,
    MlpNorm, GateUpProj, UpProj, ActFn, ActMul, DownProj,
    Router, RouterTopK, MoeCombine,
    PostMlpNorm, MlpOutDropout, MlpResidualAdd,
    LoraInputCast, LoraDropout, LoraA, LoraB, LoraScaleAdd,
    LinearInputCast,  // a 4-bit linear's x.to(compute dtype) on an fp32 input (fp32_stream)
    FinalNorm, LmHead, LogitSoftcap, Loss,
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
    // A frozen module that PEFT modules_to_save also keeps as a trainable copy
    // (embedding, LM head): the original counts frozen, the copy in `copies`.
    bool module_copy = false;
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
// A short list stored inline (an op saves at most a handful of tensors and triggers at
// most two collectives): building the graph allocates nothing per op. Exceeding the
// capacity is a programming error in the builder (std::length_error).
template <class T, std::size_t N>
class InlineList {
public:
    InlineList() = default;
    InlineList(std::initializer_list<T> xs) { insert(end(), xs); }
    void push_back(const T& x) {
        if (n_ == N) throw std::length_error("trainplan: InlineList capacity exceeded");
        v_[n_++] = x;
    }
    // Appends (the graph builder only ever appends).
    void insert(const T* /*end*/, std::initializer_list<T> xs) {
        for (const T& x : xs) push_back(x);
    }
    void clear() { n_ = 0; }
    [[nodiscard]] std::size_t size() const { return n_; }
    [[nodiscard]] bool empty() const { return n_ == 0; }
    [[nodiscard]] const T& operator[](std::size_t i) const { return v_[i]; }
    [[nodiscard]] T& operator[](std::size_t i) { return v_[i]; }
    [[nodiscard]] const T* begin() const { return v_; }
    [[nodiscard]] const T* end() const { return v_ + n_; }
    [[nodiscard]] T* begin() { return v_; }
    [[nodiscard]] T* end() { return v_ + n_; }

private:
    T v_[N] = {};
    std::size_t n_ = 0;
};

// An op or tensor label, kept as pieces of static storage so that building the graph
// builds no strings: `scope` (the MLP copy, "experts." / "shared_experts."), `adapted`
// (the linear a LoRA op or tensor belongs to, e.g. "gate_proj") and the own `name`.
// str() is the full label, e.g. "experts.gate_proj.lora_A".
struct OpLabel {
    std::string_view scope;
    std::string_view adapted;
    std::string_view name;
    [[nodiscard]] std::string str() const {
        std::string r(scope);
        if (!adapted.empty()) r.append(adapted).append(".");
        return r.append(name);
    }
};

struct CollectiveDef {
    CollectiveKind kind = CollectiveKind::TensorParallel;
    double bytes_per_token = 0;  // message size per token of the micro-batch
};

struct TensorDef {
    std::string_view name;          // label (tests, debugging); static storage, see OpLabel
    std::string_view scope;         // label prefix: "experts." / "shared_experts." or empty
    std::string_view adapted;       // LoRA tensors: the linear they belong to, else empty
    [[nodiscard]] std::string label() const { return OpLabel{scope, adapted, name}.str(); }
    double elems_per_token = 0;     // x s*b
    double elems_per_token_sq = 0;  // x s*s*b (attention scores, masks)
    double bytes_per_elem = 2;
    Split split = Split::TensorParallel;
    int producer = -1;              // op that writes it (index into ops), -1 = from outside the graph
    bool logits = false;            // the loss's logits copies (booked as `logits` in memory)
};

struct OpDef {
    std::string_view name;     // label only: nothing compares it (static storage, see OpLabel)
    std::string_view scope;    // label prefix: "experts." / "shared_experts." or empty
    std::string_view adapted;  // LoRA ops: the linear they adapt, else empty
    [[nodiscard]] std::string label() const { return OpLabel{scope, adapted, name}.str(); }
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
    double casts = 1;                // LinearInputCast: kernels per forward (one per module it feeds)
    int input = -1;                  // GEMM / router: the tensor it multiplies (index into StepGraph::tensors)
    bool row_parallel = false;       // TP splits k (input is TP-split), else n
    bool fp8_gemm = true;            // runs in fp8 under fp8-mixed (Transformer Engine keeps the LM head in 16-bit)
    bool trainable_weight = true;    // has a weight gradient in backward
    // Bytes read + written in HBM per token by a memory-bound op, and per token
    // per key (softmax / dropout over eager attention scores).
    double hbm_bytes_per_token = 0;
    double hbm_bytes_per_token_sq = 0;
    double bwd_hbm_factor = 2;       // backward traffic / forward traffic
    bool selective_recompute = false;  // repeated in backward under selective recompute (Korthikanti Sec. 5)
    // Share of this op's forward repeated under per-op selective recompute (torchtitan
    // `selective_ac_option = "op"`: matmul and attention outputs kept, except every
    // second matmul; everything else recomputed). 1 for recomputed ops, 0.5 for a fused
    // pair of matmuls of which one is kept.
    double per_op_recompute = 0;
    // A memory-bound op every TP rank runs in full, on gathered tensors (RoPE after
    // torchtitan's unsharded Qwen3 q / k norms: StackConventions::tp_gathers_qk_norm).
    bool full_on_each_tp_rank = false;
    WeightDef weight;
    InlineList<CollectiveDef, 4> collectives;
    InlineList<int, 8> saves;  // indices into StepGraph::tensors
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

// The weights of one site summed by how sharding treats them (the builder fills
// them from the ops, so estimates need not walk the ops for parameters).
struct WeightSums {
    enum Bucket { TensorParallel = 0, Replicated = 1, Expert = 2 };  // divided by t, 1, t x ep (ShardPlan::weight_divisor)
    // The bucket a weight falls in: routed experts, else split by TP or not.
    [[nodiscard]] static Bucket bucket(const WeightDef& w) {
        return w.shard == ShardClass::Expert ? Expert : w.tp_split ? TensorParallel : Replicated;
    }
    double trainable[3] = {0, 0, 0};
    double frozen_linear[3] = {0, 0, 0};  // frozen base linear layers (QLoRA: 4-bit)
    double frozen_other[3] = {0, 0, 0};   // frozen norms, embeddings, router
    double copies[3] = {0, 0, 0};         // trainable copies of frozen modules (PEFT modules_to_save)
    // Of all the above, the weights of modules no pass runs on text batches (an image
    // encoder): never gathered by ZeRO-3 / FSDP, no gradient for a hook to reduce.
    double idle[3] = {0, 0, 0};
    double idle_trainable[3] = {0, 0, 0};
    double tied_copy = 0;                 // tied-embedding copy (TP-split), counted when pp > 1
    bool tied_copy_trainable = false;
};

struct StepGraph {
    std::vector<TensorDef> tensors;
    std::vector<OpDef> ops;               // all sites, in execution order
    ActivationCoeffs stored_none;         // one layer, recompute = none
    ActivationCoeffs stored_selective;    // one layer, recompute = selective
    ActivationCoeffs stored_full;         // one layer, recompute = full: the layer input only
    ActivationCoeffs stored_per_op;       // one layer, recompute = per-op (torchtitan op-level SAC)
    ActivationCoeffs stored_first;        // embedding side, per in-flight micro-batch
    ActivationCoeffs stored_last;         // final norm and LM-head inputs, one micro-batch
    ActivationCoeffs logits;              // the loss's logits copies, one micro-batch
    ActivationCoeffs logits_tp;           // ... where tp > 1 (the stack's vocab-parallel loss)
    // Gradients eager attention's backward holds at once on top of what one layer
    // stores: the gradient of the softmax output (in its dtype) and of the scores
    // (16-bit), s x s per head (zero under FlashAttention, which tiles them).
    ActivationCoeffs attn_backward_working;
    // Gradients one layer's backward holds at once beyond its stored tensors.
    // `replicated`: the gradient of the layer's output (in its dtype, the next layer's
    // input's; the residual add hands it to both branches and it waits for the MLP's
    // input gradient to join it), held throughout. `tensor_parallel`: at the MLP's
    // element-wise backward, the gradient of the product act(gate) x up that the down
    // projection's backward wrote and the two the product's backward writes from it
    // (of act and of up), less the product itself, released with the down
    // projection's backward where it was stored; a non-gated MLP: the gradients of
    // act and of fc1's output, less act. Routed experts run as separate GEMMs
    // (gemm_groups), each expert's backward on its own rows (balanced routing); a
    // grouped GEMM would hold all of them at once. Eager attention's s x s gradients
    // (attn_backward_working) come at a later moment, when these are gone; memory.cpp
    // counts the larger beside the layer's tensors, also after the loss's backward.
    ActivationCoeffs backward_working;
    // Selective recompute repeats these forward FLOPs per layer (per token per key).
    double selective_flops_per_token_sq = 0;
    // Per-op recompute repeats these forward FLOPs per layer (per token).
    double per_op_flops_per_token = 0;
    double per_op_flops_per_token_sq = 0;  // eager attention, recomputed under per-op
    WeightSums weights[3];                // indexed by Site: First, Layer, Last
    // CUDA kernels one forward launches from the host, per site (one layer; the
    // embedding side; head and loss): an eager stack launches one per PyTorch op its
    // code is written in (an eager RMSNorm is eight), a fused stack fewer
    // (forward_launches in opgraph.cpp counts each op per stack).
    double launches[3] = {0, 0, 0};       // indexed by Site: First, Layer, Last
    // Of those, the launches whose op has no backward (auto-gptq's dequantizing
    // ops read only the packed weight, which needs no gradient): the autograd
    // engine issues nothing for them.
    double forward_only_launches[3] = {0, 0, 0};
    // Modules that own weights, per site (each LoRA adapter matrix is a module of its
    // own; a tied LM head shares the embedding's): the units DeepSpeed ZeRO-3's hooks
    // fetch before and release after every forward and backward of them (an image
    // encoder idle on text batches is never run, so never fetched).
    double weighted_modules[3] = {0, 0, 0};
    // Parameter tensors per site (a weight, its bias, a LayerNorm's scale and shift),
    // those of an idle image encoder left out: what a per-tensor gather moves one by one.
    double param_tensors[3] = {0, 0, 0};
    // A layer's largest module that owns weights, in parameters (a tensor-parallel one
    // before its split: largest_layer_module_tp_split): DeepSpeed ZeRO-3 gathers one
    // module at a time.
    double largest_layer_module = 0;
    bool largest_layer_module_tp_split = false;

    // Stored bytes per layer under a recompute policy.
    [[nodiscard]] const ActivationCoeffs& stored(Recompute r) const {
        switch (r) {
            case Recompute::Full: return stored_full;
            case Recompute::Selective: return stored_selective;
            case Recompute::PerOp: return stored_per_op;
            case Recompute::None: break;
        }
        return stored_none;
    }
    // Parameters of the model the ops own (L layers + both ends; tied copies
    // excluded), all or only the trainable ones. Equals count_params (tested).
    [[nodiscard]] double model_params(std::int64_t layers, bool trainable_only = false) const;
};
using LayerGraph = StepGraph;  // the former name (one layer plus the ends)

// LoRA adapters kept in fp32 under torch.autocast, which casts them to 16 bits
// for every matmul region (opgraph.cpp; PEFT also casts the input: [stack.*]
// lora_input_cast).
[[nodiscard]] bool autocast_fp32_adapters(const TrainingSetup& t);

// PEFT's kbit preparation ran on a bitsandbytes base (QLoraConfig::kbit_upcast):
// the tensors between the matmuls are fp32 (opgraph.cpp build_step_graph).
[[nodiscard]] bool fp32_stream(const TrainingSetup& t);

// Full recompute runs as torch.utils.checkpoint's reentrant implementation: the
// scenario's checkpoint_reentrant, else the stack's ([stack.*] checkpoint_reentrant).
[[nodiscard]] bool reentrant_checkpointing(const TrainingSetup& t);

// The logits-sized tensors live at the loss (per logit: copies in the activation
// dtype and in fp32), as the stack and, where the stack runs the model's own loss,
// the model code write it (data/defaults.toml [stack.*] loss_in_model), with the
// words the "assumes:" line prints.
struct LossCopies {
    double activation_dtype = 0;
    double fp32 = 0;
    // The loss in words: a literal or the policy's [stack.*] text (both outlive
    // the call; the graph build asks three times and reads none of it).
    std::string_view description;
};
[[nodiscard]] LossCopies loss_copies(const ModelSpec& m, const TrainingSetup& t);  // for t's own layout
[[nodiscard]] LossCopies loss_copies(const ModelSpec& m, const TrainingSetup& t, bool vocab_parallel);
// Bytes Liger's fused linear cross-entropy holds at the loss for `tokens` tokens of
// one micro-batch (training.hpp fused_linear_ce): one chunk's logits, the input's
// gradient and the fp32 per-token losses.
[[nodiscard]] double fused_linear_ce_bytes(const ModelSpec& m, const TrainingSetup& t, double tokens);
// Whether that loss can run here: a stack whose model code it replaces
// (data/defaults.toml [stack.*] liger_loss) and no tensor parallelism (it is not
// vocabulary-parallel). The rule, the fit move, the advisor and the GUI ask this.
[[nodiscard]] bool fused_linear_ce_runs(const TrainingSetup& t);
// Whether the run uses it: as set, else the stack's default where it can run
// (data/defaults.toml [stack.*] fused_linear_ce_default: Liger's patch turns it on).
[[nodiscard]] bool fused_linear_ce_on(const TrainingSetup& t);

// The gated activation's kernel in this run (data/defaults.toml [stack.*]
// fused_swiglu, swiglu_fuses_packed): eager `act(gate) * up`; fused (keeps gate
// and up, recomputes act(gate)); or packed fused, where the gate and up weights
// share one storage (keeps gate and up, recomputes act(gate) * up too).
enum class SwigluKernel { Eager, Fused, PackedFused };
[[nodiscard]] SwigluKernel swiglu_kernel(const TrainingSetup& t);

// Whether a fused attention kernel (FlashAttention / cuDNN / SDPA) runs: asked
// for (flash_attention) and available in the run's dtype. Under fp32 a stack whose
// fused backends take fp16 / bf16 only runs eager attention (data/defaults.toml
// [stack.*] fp32_attention_unfused).
[[nodiscard]] bool fused_attention_runs(const TrainingSetup& t);
// Model code that repeats K and V to every query head before the attention kernel
// (grouped-query attention only; [stack.*] gqa_repeats_kv): K and V are kept at the
// query width and the repeat is a copy each way.
[[nodiscard]] bool kv_repeated(const ModelSpec& m, const TrainingSetup& t);
// The fused attention's output brought back through a transpose copy that the output
// projection keeps beside the kernel's own ([stack.*] attn_output_copy; eager
// element-wise stacks only).
[[nodiscard]] bool attn_output_copied(const TrainingSetup& t);
// Bytes per hidden element an eager RMSNorm whose weight trains keeps for that
// weight's gradient (the 16-bit normalized input; [stack.*] norm_weight_saved_bytes):
// 0 under LoRA / QLoRA, whose norm weights are frozen, and for fused norms.
[[nodiscard]] double norm_weight_saved(const ModelSpec& m, const TrainingSetup& t);
// Under tensor parallelism the stack's TP plan gathers a QK-norm model's q and k to
// every rank (its tp_gathers_qk_norm): RoPE runs on every head there, and
// model_parallel_terms (time.cpp) counts the gathers where tp > 1. Independent of
// the layout, as the graph is (plan searches reuse one graph across layouts).
[[nodiscard]] bool tp_gathers_qk(const ModelSpec& m, const TrainingSetup& t);

// Builds the step of `m` as trained by `t` (method, dropout, FlashAttention,
// activation dtype and framework change the list). MoE layers use the expected
// tokens per expert under balanced routing.
[[nodiscard]] StepGraph build_step_graph(const ModelSpec& m, const TrainingSetup& t);
[[nodiscard]] inline StepGraph build_layer_graph(const ModelSpec& m, const TrainingSetup& t) { return build_step_graph(m, t); }

// How full recompute treats the layers of one pipeline stage (Megatron-LM
// --recompute-method / --recompute-num-layers; torchtitan's every-k-th block):
// `checkpointed` layers keep only their inputs (`inputs` of them: a uniform
// group of N layers keeps one), the others keep everything; `recomputed`
// layers repeat their forward in backward, `working` layers are rebuilt at once
// (a uniform group). Other policies: every layer keeps stored(policy).
struct RecomputeLayers {
    int checkpointed = 0;  // layers under a checkpoint
    int inputs = 0;        // checkpoint inputs kept (layer inputs)
    int recomputed = 0;    // layers whose forward runs again
    int working = 0;       // layers rebuilt together during backward
};
[[nodiscard]] RecomputeLayers recompute_layers(const TrainingSetup& t, int layers_on_stage);
// Bytes the `layers` layers of a stage keep for one micro-batch under t's recompute
// policy (s = sequence, b = micro-batch, tp, sp as in ActivationCoeffs::bytes).
[[nodiscard]] double stored_layers_bytes(const StepGraph& g, const TrainingSetup& t, int layers, double s, double b, double tp, bool sp);

// Bytes per element of stored activations under a precision policy.
[[nodiscard]] double activation_bytes_per_elem(Precision p);

}  // namespace trainplan
