#include "trainplan/opgraph.hpp"

#include <algorithm>
#include <cmath>
#include "trainplan/memory.hpp"
#include "trainplan/policy.hpp"

namespace trainplan {

double activation_bytes_per_elem(Precision p) {
    // fp8-mixed (Transformer Engine) keeps activations between ops in bf16; only
    // GEMM inputs are cast on the fly.
    return p == Precision::FP32 ? 4.0 : 2.0;
}

double StepGraph::model_params(std::int64_t layers, bool trainable_only) const {
    double p = 0;
    for (int site = 0; site < 3; ++site) {
        const WeightSums& w = weights[site];
        const double n = site == static_cast<int>(Site::Layer) ? static_cast<double>(layers) : 1.0;
        for (int b = 0; b < 3; ++b) p += n * (w.trainable[b] + w.copies[b] + (trainable_only ? 0 : w.frozen_linear[b] + w.frozen_other[b]));
    }
    return p;
}

// LoRA adapters kept in fp32 under torch.autocast: the trainable weights are
// stored fp32 (parameter_storage_bytes) while the step computes in 16 bits, and
// nothing casts them first (an FSDP mixed-precision all-gather, an engine that
// casts the model, QLoRA's recipe, which casts the adapters to the compute dtype).
// Under QLoRA the recipe casts them, except where PEFT's kbit preparation ran
// first (kbit_upcast: the adapters are made fp32 beside a 4-bit base).
bool autocast_fp32_adapters(const TrainingSetup& t) {
    const bool fp32_adapters = t.method == Method::LoRA || fp32_stream(t);
    return fp32_adapters && t.fsdp == FsdpStrategy::None && parameter_storage_bytes(t) > activation_bytes_per_elem(t.precision);
}

bool reentrant_checkpointing(const TrainingSetup& t) {
    return t.checkpoint_reentrant.value_or(policy().stack(t.stack).checkpoint_reentrant);
}

// An engine that casts the model itself undoes the preparation: DeepSpeed's fp16 /
// bf16 engine calls module.half() / .bfloat16() on the whole model (engine.py
// _configure_distributed_model), the norms, embeddings and adapters included.
bool fp32_stream(const TrainingSetup& t) { return t.method == Method::QLoRA && t.qlora.kbit_upcast && !engine_casts_model(t); }

namespace {

class Builder {
public:
    StepGraph g;
    Site site = Site::Layer;
    // Label pieces given to every op and tensor added (static storage; see OpLabel).
    std::string_view scope;
    std::string_view adapted;
    Builder() {
        g.ops.reserve(64);
        g.tensors.reserve(64);
    }

    int tensor(std::string_view name, double per_token, double bytes, Split split, double per_token_sq = 0) {
        TensorDef& t = g.tensors.emplace_back();
        t.name = name;
        t.scope = scope;
        t.adapted = adapted;
        t.elems_per_token = per_token;
        t.elems_per_token_sq = per_token_sq;
        t.bytes_per_elem = bytes;
        t.split = split;
        return static_cast<int>(g.tensors.size()) - 1;
    }
    // A tensor the last op writes (what selective recompute regenerates when
    // that op is marked).
    int output(std::string_view name, double per_token, double bytes, Split split, double per_token_sq = 0) {
        const int i = tensor(name, per_token, bytes, split, per_token_sq);
        g.tensors[static_cast<size_t>(i)].producer = static_cast<int>(g.ops.size()) - 1;
        return i;
    }
    OpDef& op(std::string_view name, OpRole role, OpKind kind, Split split, InlineList<int, 8> saves) {
        OpDef& o = g.ops.emplace_back();
        o.name = name;
        o.scope = scope;
        o.adapted = adapted;
        o.role = role;
        o.kind = kind;
        o.site = site;
        o.split = split;
        o.saves = saves;
        return o;
    }
    // y = x W: k inputs, n outputs per token; saves its input x.
    OpDef& gemm(std::string_view name, OpRole role, double k, double n, Split split, int input, double weight_copies = 1) {
        OpDef& o = op(name, role, OpKind::Gemm, split, {input});
        o.flops_per_token = 2.0 * k * n * weight_copies;
        o.gemm_k = k;
        o.gemm_n = n * weight_copies;
        o.row_parallel = g.tensors[static_cast<size_t>(input)].split == Split::TensorParallel && split == Split::TensorParallel;
        o.input = input;
        return o;
    }
    OpDef& elementwise(std::string_view name, OpRole role, OpKind kind, Split split, double bytes_per_token, InlineList<int, 8> saves) {
        OpDef& o = op(name, role, kind, split, saves);
        o.hbm_bytes_per_token = bytes_per_token;
        return o;
    }
    static void owns(OpDef& o, double params, bool trainable, ShardClass c, bool tp_split) {
        o.weight.params = params;
        o.weight.trainable = trainable;
        o.weight.shard = c;
        o.weight.tp_split = tp_split;
    }
};

// LoRA on one linear with input tensor `in` (dim d_in, split as `split`), on
// `copies` matrices of that shape (experts): dropout keeps a mask and the
// dropped copy for A's weight gradient, A's output (rank r) is kept for B's.
// With no LoRA dropout A reads `in` itself, which is already saved -- unless
// PEFT's input cast ([stack.*] lora_input_cast) makes it an fp32 copy under
// autocast, which autocast casts back to a new 16-bit tensor for A to save. The
// adapter weights are r (d_in + d_out) per matrix (Hu et al. 2021).
void lora_adapter(Builder& b, std::string_view name, const TrainingSetup& t, int in, double d_in, double d_out,
                  Split split, double act_bytes, double copies, ShardClass cls) {
    const double r = t.lora.rank;
    b.adapted = name;  // labels: <scope><name>.lora_*
    int a_in = in;
    // An fp32 input (fp32_stream) reaches lora_A through autocast's cast to 16
    // bits alone: PEFT's x.to(fp32) returns it as it is.
    const bool stream = fp32_stream(t);
    const bool input_cast = (policy().stack(t.stack).lora_input_cast && autocast_fp32_adapters(t)) || stream;
    if (input_cast) {
        // x.to(fp32) (read 2, write 4 B) and autocast's cast back to 16 bits for
        // lora_A (read 4, write 2); backward casts the gradient the other way
        // through both. The fp32 copy is not saved.
        OpDef& cast = b.elementwise("lora_input_cast", OpRole::LoraInputCast, OpKind::Elementwise, split,
                                    (act_bytes + 4.0) * (stream ? 1 : 2) * d_in, {});
        cast.bwd_hbm_factor = 1;
    }
    if (t.lora.dropout > 0) {
        // On the fp32 copy where the input was cast.
        const double drop_bytes = input_cast ? 4.0 : act_bytes;
        const int mask = b.tensor("lora_dropout_mask", d_in, 1.0, split);
        b.elementwise("lora_dropout", OpRole::LoraDropout, OpKind::Dropout, split, d_in * drop_bytes * 2, {mask});
        a_in = b.tensor("lora_dropped_input", d_in, act_bytes, split);
    } else if (input_cast) {
        a_in = b.tensor("lora_cast_input", d_in, act_bytes, split);
    }
    OpDef& A = b.gemm("lora_A", OpRole::LoraA, d_in, r, split, a_in);
    A.kind = OpKind::LoraGemm;
    A.fp8_gemm = false;  // adapters are plain 16-bit linears (NeMo's ParallelLinearAdapter, PEFT), not TE modules
    Builder::owns(A, copies * r * d_in, true, cls, true);
    A.weight.adapter = true;
    const int a_out = b.tensor("lora_A_out", r, act_bytes, Split::Replicated);
    OpDef& B = b.gemm("lora_B", OpRole::LoraB, r, d_out, split, a_out);
    B.kind = OpKind::LoraGemm;
    B.fp8_gemm = false;
    Builder::owns(B, copies * r * d_out, true, cls, true);
    B.weight.adapter = true;
    // PEFT adds the adapter path to the base output as separate kernels:
    // lora_B(...) * scaling (read and write d_out), then result + that (read two,
    // write one d_out). Backward: the scaling multiply again (2 d_out), and the
    // input's gradient summed from the base and adapter paths (read two, write one
    // d_in). Nothing is saved (peft/tuners/lora/layer.py, Linear.forward).
    OpDef& add = b.elementwise("lora_scale_add", OpRole::LoraScaleAdd, OpKind::Elementwise, split, 5 * d_out * act_bytes, {});
    add.bwd_hbm_factor = (2 * d_out + 3 * d_in) / (5 * d_out);
    b.adapted = {};
}

// CUDA kernels one forward of `o` launches, as the stack writes it. Eager code
// launches one kernel per PyTorch op: transformers' LlamaRMSNorm.forward is
// eight (to(float32), pow, mean, + eps, rsqrt, mul, to(dtype), weight mul);
// its rotary embedding fourteen (the cos/sin cache cast and indexed, 2 + 2; per
// q and k: x * cos, rotate_half's neg and cat, * sin, add); eager attention's
// scores three (matmul, / sqrt(d), + mask) and an fp32 softmax two (softmax,
// cast back); PEFT's adapter output two (* scaling, +=); a separate gate and up
// projection two; an upcast cross-entropy five (.float(), the shifted logits
// and labels made contiguous, log_softmax, nll). Fused stacks launch one kernel
// per norm, RoPE (per q and k), SwiGLU and projection pair. A quantized base
// linear dequantizes its weight first (dequant_launches).
//
// Kernels that dequantize one frozen 4-bit linear's weight before its matmul.
// bitsandbytes: one (dequantize_4bit). auto-gptq's QuantLinear (qlinear_cuda_old,
// more rows than kernel_switch_threshold, the path GPTQConfig(disable_exllama=True)
// training takes) writes it in torch ops, nine: for the zero points
// bitwise_right_shift, .to(int8), bitwise_and, + 1; for the weight
// bitwise_right_shift, .to(int8), bitwise_and; then weight - zeros and
// scales * (...) (AutoGPTQ/AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py,
// forward). They read only the packed buffers: no backward.
// Soft-capping in eager code, cap * tanh(x / cap) (Gemma 2): three element-wise
// passes, each reading and writing 16-bit, 6 per element forward; backward the two
// scalar ops' gradients (2 + 2) and tanh's, which reads its kept output and the
// gradient and writes one (3): 7 per 6.
constexpr double kSoftcapPasses = 6.0;
constexpr double kSoftcapBwdFactor = 7.0 / 6.0;

double dequant_launches(const TrainingSetup& t) {
    if (t.method != Method::QLoRA) return 0;
    return t.qlora.quant == QuantType::GPTQ ? 9 : 1;
}

// The GEMMs one op's forward issues (a separate gate and up projection are two;
// an eager MoE loops over its experts).
double gemm_launches(const OpDef& o, const StackConventions& sc) {
    const bool eager = !sc.fused_elementwise;
    double n = o.role == OpRole::GateUpProj && eager ? 2 : 1;
    if (o.gemm_groups > 1 && eager) n *= o.gemm_groups;
    return n;
}

// Forward launches with no backward: the dequantizing ops of a GPTQ base linear
// (bitsandbytes dequantizes again in backward for the input gradient).
double forward_only_launches(const OpDef& o, const StackConventions& sc, const TrainingSetup& t) {
    if (o.kind != OpKind::Gemm || o.role == OpRole::LmHead || t.qlora.quant != QuantType::GPTQ) return 0;
    return gemm_launches(o, sc) * dequant_launches(t);
}

// The stack's RMSNorm is eager model code (transformers' LlamaRMSNorm: x.float(),
// pow, mean, rsqrt, mul, cast, weight mul), which keeps an fp32 copy of its input
// ([stack.*] norm_saved_bytes > 0), not one fused kernel (Apex, flash-attn, TE).
bool eager_rmsnorm(const ModelSpec& m, const StackConventions& sc) { return m.norm == NormKind::RMSNorm && sc.norm_saved_bytes > 0; }

// The rotary embedding runs as one kernel per tensor: with the stack's other fused
// element-wise ops, or on its own ([stack.*] fused_rope).
bool rope_kernel(const StackConventions& sc) { return sc.fused_elementwise || sc.fused_rope; }

// The normalisation ops (each owns its scale, and a shift with a LayerNorm bias).
bool norm_role(OpRole r) {
    switch (r) {
        case OpRole::EmbeddingNorm:
        case OpRole::AttnNorm:
        case OpRole::PostAttnNorm:
        case OpRole::MlpNorm:
        case OpRole::PostMlpNorm:
        case OpRole::QkNorm:
        case OpRole::FinalNorm: return true;
        default: return false;
    }
}

double forward_launches(const OpDef& o, const StackConventions& sc, const ModelSpec& m, const TrainingSetup& t) {
    const bool eager = !sc.fused_elementwise;
    if (norm_role(o.role)) return eager_rmsnorm(m, sc) ? 8 : 1;
    switch (o.role) {
        case OpRole::PositionEmbedding: return 2;  // lookup + add
        case OpRole::VisionEncoder: return 0;      // idle on text batches
        case OpRole::Rope: return rope_kernel(sc) ? 2 : 14;
        case OpRole::AttnLayoutCopies: return kv_repeated(m, t) ? 2 : 4;  // q, k, v into the kernel's layout, the output back
        case OpRole::KvRepeat: return 2;                                  // k and v repeated to every query head
        case OpRole::AttnScores: return 3;
        case OpRole::AttnSoftcap:
        case OpRole::LogitSoftcap: return 3;  // / cap, tanh, * cap
        case OpRole::AttnSoftmax: return sc.attn_softmax_fp32 && t.precision != Precision::FP32 ? 2 : 1;
        case OpRole::ActMul: return swiglu_kernel(t) != SwigluKernel::Eager ? 0 : 1;  // the fused kernel is counted at act_fn
        // In the next norm's kernel (fused_dropout_add_norm) or the GEMM's epilogue.
        case OpRole::EmbeddingDropout:
        case OpRole::AttnOutDropout:
        case OpRole::MlpOutDropout:
        case OpRole::AttnResidualAdd:
        case OpRole::MlpResidualAdd: return sc.fused_dropout_add_norm ? 0 : 1;
        case OpRole::ActFn: return sc.gemm_epilogue_gelu && !m.gated() ? 0 : 1;
        case OpRole::RouterTopK: return 4;                     // softmax, top-k, sum, divide
        case OpRole::MoeCombine: return eager ? 2.0 * m.moe.num_experts : 2;  // eager: index_add per expert
        case OpRole::LoraScaleAdd: return 2;
        case OpRole::LinearInputCast: return o.casts;
        case OpRole::LoraInputCast: return fp32_stream(t) ? 1 : 2;  // x.to(fp32), autocast's cast back
        // autocast casts an fp32 adapter matrix to 16 bits once per autocast region
        // (its weight-cast cache: leaf tensors that require grad), before the matmul.
        case OpRole::LoraA:
        case OpRole::LoraB: return autocast_fp32_adapters(t) ? 2 : 1;
        // Without .float() the model's loss is four: the shifted logits and labels
        // made contiguous, log_softmax, nll.
        case OpRole::Loss: return sc.loss_in_model && !m.logits_upcast ? 4 : sc.loss_fp32_copies >= 1 ? 5 : 2;
        default: break;
    }
    if (o.kind != OpKind::Gemm) return 1;
    // The LM head stays 16-bit under QLoRA.
    return gemm_launches(o, sc) * (1 + (o.role == OpRole::LmHead ? 0 : dequant_launches(t)));
}

// The modules an op's weights form: one per GEMM launch (gate and up separate
// where the stack runs them so), else one.
double weight_modules(const OpDef& o, const StackConventions& sc) { return o.kind == OpKind::Gemm ? gemm_launches(o, sc) : 1.0; }

// Parameter tensors an op owns: each module's weight and its bias (a LayerNorm's
// scale and shift); a tied LM head owns only its bias.
double param_tensors(const OpDef& o, const StackConventions& sc, const ModelSpec& m) {
    if (o.weight.params <= 0 || o.role == OpRole::VisionEncoder) return 0;
    if (o.role == OpRole::LmHead) return (m.tied_embeddings ? 0.0 : 1.0) + (m.lm_head_bias ? 1.0 : 0.0);
    bool bias = false;
    if (norm_role(o.role)) bias = m.norm == NormKind::LayerNorm && m.norm_bias;
    else if (o.role == OpRole::QProj || o.role == OpRole::KProj || o.role == OpRole::VProj || o.role == OpRole::QkvProj) bias = m.qkv_bias;
    else if (o.role == OpRole::OProj) bias = m.out_bias;
    else if (o.role == OpRole::GateUpProj || o.role == OpRole::UpProj || o.role == OpRole::DownProj) bias = m.mlp_bias;
    return weight_modules(o, sc) * (bias ? 2.0 : 1.0);
}

// Stored-activation coefficients of the tensors some op of a site saves (a tensor
// counts once however many ops keep it): per layer (all, and without what
// selective recompute regenerates), the embedding side, the head side and the
// loss's logits. One walk over the ops marks, per tensor, the sites that save it;
// one walk over the tensors then adds each to its sums, in index order.
void saved_coeffs(StepGraph& g) {
    std::vector<unsigned char> mask(g.tensors.size(), 0);  // bit 1 << Site
    for (const OpDef& o : g.ops)
        for (int i : o.saves) mask[static_cast<size_t>(i)] |= static_cast<unsigned char>(1u << static_cast<unsigned>(o.site));
    auto add = [](ActivationCoeffs& c, const TensorDef& td) {
        (td.split == Split::Replicated ? c.replicated : c.tensor_parallel) += td.elems_per_token * td.bytes_per_elem;
        c.squared += td.elems_per_token_sq * td.bytes_per_elem;
    };
    constexpr unsigned first = 1u << static_cast<unsigned>(Site::First);
    constexpr unsigned layer = 1u << static_cast<unsigned>(Site::Layer);
    constexpr unsigned last = 1u << static_cast<unsigned>(Site::Last);
    for (size_t i = 0; i < g.tensors.size(); ++i) {
        const TensorDef& td = g.tensors[i];
        if (mask[i] & last) add(td.logits ? g.logits : g.stored_last, td);
        if (td.logits) continue;
        if (mask[i] & first) add(g.stored_first, td);
        if (mask[i] & layer) {
            add(g.stored_none, td);
            if (!(td.producer >= 0 && g.ops[static_cast<size_t>(td.producer)].selective_recompute)) add(g.stored_selective, td);
        }
    }
}

// torchtitan's per-op selective activation checkpointing (torchtitan
// models/llama3/parallelize.py, _apply_ac_to_transformer_block with
// selective_ac_option = "op"): inside each layer's checkpoint the outputs of
// matmuls and of the fused attention kernel are kept, except every second
// matmul (a counter per layer: the 2nd, 4th, ... recompute); every other op is
// recomputed. Kept per layer: the checkpoint's input, the kept matmul outputs
// and the attention output with its log-sum-exp. A fused gate/up matmul is the
// two matmuls w1, w3 of torchtitan's FeedForward: one kept, one recomputed.
// LoRA matmuls are not counted (torchtitan has none): recomputed.
void per_op_policy(StepGraph& g, double layer_input_bytes, double act_bytes) {
    g.stored_per_op.replicated = layer_input_bytes;
    int count = 0;
    auto keep = [&](const OpDef& o, double elems) {
        (o.split == Split::Replicated ? g.stored_per_op.replicated : g.stored_per_op.tensor_parallel) += elems;
    };
    for (OpDef& o : g.ops) {
        if (o.site != Site::Layer) continue;
        if (o.kind == OpKind::Gemm || o.kind == OpKind::Router) {
            const int mms = o.role == OpRole::GateUpProj ? 2 : 1;
            const double out = o.gemm_n / mms * o.gemm_rows_per_token;  // output elements per token of one matmul
            const double bytes = act_bytes;
            int recomputed = 0;
            for (int i = 0; i < mms; ++i) {
                if (++count % 2 == 0) ++recomputed;
                else keep(o, out * bytes);
            }
            o.per_op_recompute = static_cast<double>(recomputed) / mms;
            g.per_op_flops_per_token += o.per_op_recompute * o.flops_per_token;
        } else if (o.kind == OpKind::FlashAttention) {
            for (int i : o.saves) {
                const TensorDef& td = g.tensors[static_cast<size_t>(i)];
                if (td.name == "attn_context" || td.name == "attn_logsumexp") keep(o, td.elems_per_token * td.bytes_per_elem);
            }
        } else {
            o.per_op_recompute = 1;
            g.per_op_flops_per_token += o.flops_per_token;
            g.per_op_flops_per_token_sq += o.flops_per_token_sq;
        }
    }
}

}  // namespace

RecomputeLayers recompute_layers(const TrainingSetup& t, int layers) {
    RecomputeLayers r;
    if (t.recompute != Recompute::Full || layers <= 0) return r;
    const int n = t.recompute_layers;
    switch (t.recompute_method) {
        case RecomputeMethod::Uniform: {
            // Megatron-LM uniform: groups of N consecutive layers, one checkpoint
            // (its input) per group; all layers recomputed, one group at a time.
            const int group = std::clamp(n <= 0 ? 1 : n, 1, layers);
            r.checkpointed = r.recomputed = layers;
            r.inputs = (layers + group - 1) / group;
            r.working = group;
            break;
        }
        case RecomputeMethod::Block:
            // Megatron-LM block: the first N layers of the stage checkpointed one by one.
            r.checkpointed = r.inputs = r.recomputed = std::clamp(n <= 0 ? layers : n, 0, layers);
            r.working = r.checkpointed > 0 ? 1 : 0;
            break;
        case RecomputeMethod::Every: {
            // torchtitan selective_ac_option = "k": layers whose index is a multiple of k.
            const int k = std::max(1, n);
            r.checkpointed = r.inputs = r.recomputed = (layers + k - 1) / k;
            r.working = 1;
            break;
        }
    }
    return r;
}

double stored_layers_bytes(const StepGraph& g, const TrainingSetup& t, int layers, double s, double b, double tp, bool sp) {
    // Full recompute per --recompute-method: checkpointed layers keep their
    // inputs (one per uniform group), the others everything.
    if (t.recompute != Recompute::Full) return layers * g.stored(t.recompute).bytes(s, b, tp, sp);
    const RecomputeLayers rl = recompute_layers(t, layers);
    return rl.inputs * g.stored_full.bytes(s, b, tp, sp) + (layers - rl.checkpointed) * g.stored_none.bytes(s, b, tp, sp);
}

LossCopies loss_copies(const ModelSpec& m, const TrainingSetup& t) { return loss_copies(m, t, t.layout.tp > 1); }

LossCopies loss_copies(const ModelSpec& m, const TrainingSetup& t, bool vocab_parallel) {
    const StackConventions& sc = policy().stack(t.stack);
    // Liger's fused linear cross-entropy keeps no logits-sized tensor in the graph:
    // its chunk is a working buffer (fused_linear_ce_bytes).
    if (fused_linear_ce_on(t))
        return {0, 0, "Liger fused linear cross-entropy (the head and loss in token chunks of about tokens x hidden logits, none kept)"};
    if (vocab_parallel && !sc.loss_in_model) return {sc.loss_tp_logit_copies, sc.loss_tp_fp32_copies, sc.loss_tp};
    if (!sc.loss_in_model || m.logits_upcast) return {sc.loss_logit_copies, sc.loss_fp32_copies, sc.loss};
    // The model's loss on its 16-bit logits (data/defaults.toml, loss_in_model):
    // the logits and their shifted copy stay 16-bit; torch.autocast runs
    // cross-entropy in fp32 (an fp32 copy and fp32 log-probs); an engine that
    // casts the model itself (engine_casts_model) leaves log_softmax 16-bit.
    if (t.precision == Precision::FP32) return {0, 3, "model code's cross-entropy in fp32 (12 B/logit)"};
    if (!engine_casts_model(t))
        return {2, 2, "16-bit logits (model code has no .float()) + shifted copy, autocast fp32 copy + fp32 log-probs (12 B/logit)"};
    return {3, 0, "16-bit logits (model code has no .float()) + shifted copy + 16-bit log-probs, no autocast under the engine (6 B/logit)"};
}

double fused_linear_ce_bytes(const ModelSpec& m, const TrainingSetup& t, double tokens) {
    // liger-kernel ops/fused_linear_cross_entropy.py, fused_linear_cross_entropy_forward:
    // inc_factor = cdiv(V, H), chunk_size = min(next_power_of_2(cdiv(BT, inc_factor)), BT);
    // each chunk's logits (chunk_size x V, the input's dtype) are overwritten in place
    // by their gradient, which the input-gradient and weight-gradient GEMMs read
    // before the next chunk; grad_input (BT x H) and loss_1d (BT, fp32) live
    // throughout. (The head's weight gradient, when it has one, is its gradient.)
    const double H = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
    const double bt = std::max(1.0, std::ceil(tokens));
    const double inc = std::ceil(V / H);
    const double chunk = std::min(bt, std::exp2(std::ceil(std::log2(std::ceil(bt / inc)))));
    const double a = activation_bytes_per_elem(t.precision);
    return chunk * V * a + bt * H * a + bt * 4.0;
}

bool fused_linear_ce_runs(const TrainingSetup& t) { return policy().stack(t.stack).liger_loss && t.layout.tp <= 1; }

bool fused_linear_ce_on(const TrainingSetup& t) {
    return t.fused_linear_ce.value_or(policy().stack(t.stack).fused_linear_ce_default && fused_linear_ce_runs(t));
}

SwigluKernel swiglu_kernel(const TrainingSetup& t) {
    const StackConventions& sc = policy().stack(t.stack);
    // DeepSpeed ZeRO-1/2 point every trained 16-bit parameter at its slice of one
    // flat buffer (stage_1_and_2.py _update_model_bit16_weights): a layer's gate
    // and up weights become adjacent views of one storage. Frozen (LoRA) weights
    // stay outside the optimizer's groups; ZeRO-3, FSDP and DDP keep each
    // parameter's own storage.
    const bool flat = runs_deepspeed_zero12(t) && t.method == Method::Full;
    if (sc.swiglu_fuses_packed && flat) return SwigluKernel::PackedFused;
    return sc.fused_swiglu ? SwigluKernel::Fused : SwigluKernel::Eager;
}

bool tp_gathers_qk(const ModelSpec& m, const TrainingSetup& t) {
    return m.qk_norm && policy().stack(t.stack).tp_gathers_qk_norm;
}

bool fused_attention_runs(const TrainingSetup& t) {
    return t.flash_attention && !(t.precision == Precision::FP32 && policy().stack(t.stack).fp32_attention_unfused);
}

bool kv_repeated(const ModelSpec& m, const TrainingSetup& t) {
    return policy().stack(t.stack).gqa_repeats_kv && m.num_kv_heads < m.num_heads;
}

bool attn_output_copied(const TrainingSetup& t) {
    const StackConventions& sc = policy().stack(t.stack);
    return fused_attention_runs(t) && sc.attn_output_copy && !sc.fused_elementwise;
}

double norm_weight_saved(const ModelSpec& m, const TrainingSetup& t) {
    return m.norm == NormKind::RMSNorm && t.method == Method::Full ? policy().stack(t.stack).norm_weight_saved_bytes : 0.0;
}

StepGraph build_step_graph(const ModelSpec& m, const TrainingSetup& t) {
    Builder b;
    const double a = activation_bytes_per_elem(t.precision);
    const double h = static_cast<double>(m.hidden);
    const double qd = static_cast<double>(m.q_dim());
    const double kvd = static_cast<double>(m.kv_dim());
    const double nh = static_cast<double>(m.num_heads);
    const double V = static_cast<double>(m.vocab);
    const bool dropout = m.dropout > 0;
    const bool lora = t.method != Method::Full;
    const bool base_trained = !lora;  // LoRA / QLoRA freeze every base weight
    auto adapted = [&](unsigned target) { return lora && (t.lora.targets & target) != 0; };
    const auto R = Split::Replicated;
    const auto TP = Split::TensorParallel;
    // One norm's weights: LayerNorm with bias has scale and shift, RMSNorm a scale.
    const double norm_params = (m.norm == NormKind::LayerNorm && m.norm_bias) ? 2 * h : h;
    auto bias = [](bool on, double n) { return on ? n : 0.0; };

    // HBM traffic of the memory-bound ops. Megatron-LM / Transformer Engine fuse
    // them (one read, one write); eager PyTorch (HF, Lightning, Composer FSDP)
    // runs each as separate kernels: under torch.autocast the residual stream
    // stays fp32 (embedding output and adds promote), layer_norm runs in fp32
    // and is cast back to 16-bit for the next matmul, and an eager RMSNorm
    // (x.float(), pow, mean, rsqrt, mul, cast, weight mul) reads and writes its
    // input about eight times (transformers LlamaRMSNorm).
    // The stack's kernel conventions (data/defaults.toml [stack.*]).
    const StackConventions& sc = policy().stack(t.stack);
    const bool fused = sc.fused_elementwise;
    const bool flce = fused_linear_ce_on(t);
    // PEFT's kbit preparation (fp32_stream) makes the stream between the matmuls
    // fp32: the embedding, norm weights and LM head are fp32, each 4-bit linear
    // returns its output in its input's dtype. `sa` is the bytes of those tensors
    // (the residual, norm outputs, the MLP's element-wise tensors); what a 16-bit
    // kernel emits (flash attention, the adapters' matmuls, the logits under
    // autocast) stays `a`.
    const bool stream32 = fp32_stream(t);
    const double sa = stream32 ? 4.0 : a;
    // flash-attn's dropout_add_layer_norm keeps the residual stream in fp32
    // (residual_in_fp32) and does dropout, residual add and norm in one kernel:
    // 13 B per element forward, 17 backward (data/defaults.toml [stack.*]
    // fused_dropout_add_norm); the dropouts and adds below then cost nothing more.
    const bool dan = sc.fused_dropout_add_norm;
    const double r = (dan || stream32 || (!fused && t.framework == Framework::PyTorchAMP && t.precision != Precision::FP32)) ? 4.0 : a;
    double norm_bytes = 2 * h * a;
    double norm_bwd_factor = 2;  // OpDef::bwd_hbm_factor's default
    if (dan) {
        const double mask = dropout ? 1.0 : 0.0;
        norm_bytes = h * (a + r + a + r + mask);
        norm_bwd_factor = (a + r + r + mask + a + r) / (a + r + a + r + mask);
    } else if (!fused) {
        // A fused RMSNorm kernel reads its input once and writes its output, also
        // beside eager element-wise ops.
        if (m.norm == NormKind::LayerNorm) norm_bytes = t.framework == Framework::PyTorchAMP ? h * (r + 4 + 4 + 2) : h * (r + a);
        else norm_bytes = eager_rmsnorm(m, sc) ? h * (r + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 2 + 2 + 2) : h * (r + a);
    }
    const double residual_bytes = dan ? 0.0 : 3 * h * r;
    const double dropout_bytes = dan ? 0.0 : 3 * h * a;
    // What a norm keeps of its input for backward: eager RMSNorms keep an fp32
    // copy (x.float() feeds pow and mul), fused kernels the 16-bit input.
    const double norm_in_bytes = stream32 || dan ? 4.0 : eager_rmsnorm(m, sc) ? sc.norm_saved_bytes : a;

    // ===== first stage: token (and learned position) embedding
    b.site = Site::First;
    {
        // A row gather of s*b x h: no FLOPs, traffic negligible next to a layer.
        OpDef& emb = b.op("embedding", OpRole::Embedding, OpKind::Lookup, TP, {});
        Builder::owns(emb, V * h, base_trained, ShardClass::Embedding, true);  // vocabulary-parallel (Megatron)
        emb.weight.module_copy = lora && t.lora.train_embeddings;
        if (m.position == PositionKind::Learned) {
            OpDef& pos = b.op("position_embedding", OpRole::PositionEmbedding, OpKind::Lookup, R, {});
            Builder::owns(pos, static_cast<double>(m.max_seq_len) * h, base_trained, ShardClass::Embedding, false);
        }
        if (m.embedding_norm) {
            // BLOOM's word_embeddings_layernorm keeps its input (scale and shift: 2h).
            const int in = b.tensor("embedding_norm_in", h, norm_in_bytes, R);
            OpDef& n = b.elementwise("embedding_norm", OpRole::EmbeddingNorm, OpKind::Norm, R, norm_bytes, {in});
            Builder::owns(n, 2 * h, base_trained, ShardClass::Norm, false);
        }
        if (m.has_vision()) {
            // The image encoder and projector (VisionSpec): held with the embedding,
            // idle on text batches -- no FLOPs, no stored tensors, no gradient
            // (autograd never reaches it). A torch optimizer creates state only for a
            // parameter that has a gradient (torch.optim.AdamW initialises its state
            // at the first step that sees one): weights only. An engine that casts
            // the model itself (DeepSpeed ZeRO, Megatron) builds its fp32 master,
            // gradient and optimizer partitions for every parameter that requires
            // grad when it wraps the model: a full fine-tune pays those too. Under
            // LoRA / QLoRA it is frozen (16-bit; the quantized base is the decoder's
            // linear layers).
            OpDef& vis = b.op("vision_encoder", OpRole::VisionEncoder, OpKind::Lookup, R, {});
            Builder::owns(vis, static_cast<double>(vision_params(m.vision, m.hidden)), base_trained && engine_casts_model(t),
                          ShardClass::Dense, false);
        }
        if (dropout) {
            // Korthikanti's "p sbh/t" term: the embedding dropout mask, 1 B per element.
            const int mask = b.tensor("embedding_dropout_mask", h, 1.0, R);
            b.elementwise("embedding_dropout", OpRole::EmbeddingDropout, OpKind::Dropout, R, dropout_bytes, {mask});
        }
    }

    // An eager RMSNorm whose weight trains keeps its normalized input for the weight's
    // gradient as well (StackConventions::norm_weight_saved_bytes; 0 for fused norms):
    // the norms' saves.
    const double normed_bytes = norm_weight_saved(m, t);
    auto norm_saves = [&](int in, std::string_view normed) {
        InlineList<int, 8> s{in};
        if (normed_bytes > 0) s.push_back(b.tensor(normed, h, normed_bytes, R));
        return s;
    };

    // ===== one transformer layer
    b.site = Site::Layer;
    // --- attention block (Korthikanti et al. 2022, Sec. 4.1: 11sbh + 5as^2b with dropout)
    const int x_in = b.tensor("layer_input", h, norm_in_bytes, R);
    Builder::owns(b.elementwise("attn_norm", OpRole::AttnNorm, OpKind::Norm, R, norm_bytes, norm_saves(x_in, "attn_norm_normed")), norm_params, base_trained,
                  ShardClass::Norm, false);
    const int n1 = b.tensor("attn_norm_out", h, sa, R);
    if (m.packed_qkv || sc.packed_qkv) {
        // One module computes q, k and v (GPT-2's c_attn, query_key_value, Wqkv):
        // one GEMM, and LoRA on any of them adapts that one module.
        const double n = qd + 2 * kvd;
        Builder::owns(b.gemm("qkv_proj", OpRole::QkvProj, h, n, TP, n1), h * n + bias(m.qkv_bias, n), base_trained, ShardClass::Dense, true);
        if (adapted(kLoraQ) || adapted(kLoraK) || adapted(kLoraV)) lora_adapter(b, "qkv_proj", t, n1, h, n, R, a, 1, ShardClass::Dense);
    } else {
        Builder::owns(b.gemm("q_proj", OpRole::QProj, h, qd, TP, n1), h * qd + bias(m.qkv_bias, qd), base_trained, ShardClass::Dense, true);
        Builder::owns(b.gemm("k_proj", OpRole::KProj, h, kvd, TP, n1), h * kvd + bias(m.qkv_bias, kvd), base_trained, ShardClass::Dense, true);
        Builder::owns(b.gemm("v_proj", OpRole::VProj, h, kvd, TP, n1), h * kvd + bias(m.qkv_bias, kvd), base_trained, ShardClass::Dense, true);
        if (adapted(kLoraQ)) lora_adapter(b, "q_proj", t, n1, h, qd, R, a, 1, ShardClass::Dense);
        if (adapted(kLoraK)) lora_adapter(b, "k_proj", t, n1, h, kvd, R, a, 1, ShardClass::Dense);
        if (adapted(kLoraV)) lora_adapter(b, "v_proj", t, n1, h, kvd, R, a, 1, ShardClass::Dense);
    }
    if (m.qk_norm) {
        // QK-norm (ModelSpec::qk_norm): the stack's RMSNorm over every head of q
        // and of k, between the projections and RoPE, with the main norms'
        // conventions per element (an eager norm keeps an fp32 copy of its
        // input; its traffic and launches are those of a norm over h, on qd and
        // kvd elements). Its output feeds RoPE, which keeps only its tables.
        const double per_elem = norm_bytes / h;
        const int qn = b.tensor("q_norm_in", qd, norm_in_bytes, TP);
        Builder::owns(b.elementwise("q_norm", OpRole::QkNorm, OpKind::Norm, TP, per_elem * qd, {qn}), static_cast<double>(m.head_dim),
                      base_trained, ShardClass::Norm, false);
        const int kn = b.tensor("k_norm_in", kvd, norm_in_bytes, TP);
        Builder::owns(b.elementwise("k_norm", OpRole::QkNorm, OpKind::Norm, TP, per_elem * kvd, {kn}), static_cast<double>(m.head_dim),
                      base_trained, ShardClass::Norm, false);
    }
    // Attention's tensors: a fused kernel takes 16-bit q, k, v (transformers'
    // flash-attention path casts an fp32 input back to the compute dtype); eager
    // attention runs in the dtype the projections return.
    const double at = fused_attention_runs(t) ? a : sa;
    // Model code that repeats K and V to every query head (StackConventions::
    // gqa_repeats_kv) hands the attention K and V at the query width: it keeps them
    // so, and the repeat is a copy each way (forward: read the K / V heads, write the
    // repeated ones; backward: the repeated gradients summed back into the heads).
    const bool repeats_kv = kv_repeated(m, t);
    const double kv_att = repeats_kv ? qd : kvd;
    const int q = b.tensor("q", qd, at, TP);
    const int k = b.tensor("k", kv_att, at, TP);
    const int v = b.tensor("v", kv_att, at, TP);
    if (m.position == PositionKind::RoPE) {
        // A fused rotary kernel (Transformer Engine, flash-attn's rotary, Triton:
        // [stack.*] fused_rope) reads q and k once and writes them once. Eager model code runs
        // transformers' apply_rotary_pos_emb as separate kernels, per element of
        // q and k: x * cos (read and write a), rotate_half's neg on one half (a/2
        // each way) and cat (a each way), * sin (a each way), the sum (read 2a,
        // write a): 10a forward, the five launches forward_launches counts per
        // tensor. Autograd's backward: grad * cos and grad * sin (2a each), the
        // neg (a), the two half-slices' gradients scattered into zeros of the full
        // size (slice_backward: write a, copy a/2 each way, twice: 4a) and the
        // three gradients of x summed (two adds of 3a): 15a, 1.5 x the forward.
        // Saves only the cos / sin tables.
        const bool kernel = rope_kernel(sc);
        OpDef& rope = b.elementwise("rope", OpRole::Rope, OpKind::Elementwise, TP, (kernel ? 2 : 10) * (qd + kvd) * sa, {});
        if (!kernel) rope.bwd_hbm_factor = 1.5;
        rope.full_on_each_tp_rank = tp_gathers_qk(m, t);
    }
    if (repeats_kv) {
        OpDef& rep = b.elementwise("kv_repeat", OpRole::KvRepeat, OpKind::Elementwise, TP, 2 * (kvd + qd) * at, {});
        rep.bwd_hbm_factor = 1.0;
    }
    int ctx = -1;
    if (fused_attention_runs(t)) {
        // FlashAttention keeps Q, K, V, the output and one fp32 log-sum-exp per
        // row and head; no s x s matrix (Dao et al. 2022). It recomputes the
        // scores inside its own backward: nothing for selective recompute to add.
        OpDef& fa = b.op("flash_attention", OpRole::FlashAttention, OpKind::FlashAttention, TP, {q, k, v});
        fa.flops_per_token_sq = 4.0 * qd;  // QK^T and PV, 2 FLOPs per MAC each
        fa.hbm_bytes_per_token = (2 * qd + 2 * kv_att) * a;
        // Megatron's selective recompute (--recompute-granularity selective)
        // checkpoints the core attention also when it is fused: the kernel's
        // forward runs again in backward and its log-sum-exp is not kept (the
        // context is, as the output projection's input). Megatron-LM's legacy
        // flash path does not ([stack.*] selective_recomputes_flash).
        fa.selective_recompute = sc.selective_recomputes_flash;
        ctx = b.tensor("attn_context", qd, a, TP);
        const int lse = b.output("attn_logsumexp", nh, 4.0, TP);
        b.g.ops.back().saves.insert(b.g.ops.back().saves.end(), {ctx, lse});
        // Eager code moves Q, K, V into the kernel's layout and the output back
        // (transpose + contiguous copies: read and write each).
        if (!fused)
            b.elementwise("attn_layout_copies", OpRole::AttnLayoutCopies, OpKind::Elementwise, TP,
                          2 * (2 * qd + (repeats_kv ? 0 : 2 * kvd)) * a, {});  // (repeated K / V: kv_repeat is their copy)
    } else {
        // Eager attention: QK^T keeps Q and K; softmax keeps its output (2as^2b);
        // attention dropout keeps a mask (as^2b) and its output (2as^2b) for PV.
        // Selective recompute repeats exactly these four ops (Korthikanti Sec. 5).
        OpDef& qk = b.op("attn_scores", OpRole::AttnScores, OpKind::AttentionScores, TP, {q, k});
        qk.flops_per_token_sq = 2.0 * qd;
        qk.selective_recompute = true;
        if (m.attn_logit_softcap > 0) {
            // Soft-capped scores in eager code (transformers Gemma2Attention: scores
            // / cap, tanh, * cap, then the mask and softmax), per s x s element and
            // head; tanh keeps its output for its backward (1 - y^2). (Fused kernels
            // cap inside: flash-attn 2.6's softcap argument.)
            OpDef& cap = b.elementwise("attn_softcap", OpRole::AttnSoftcap, OpKind::Elementwise, TP, 0, {});
            cap.hbm_bytes_per_token_sq = nh * kSoftcapPasses * at;
            cap.bwd_hbm_factor = kSoftcapBwdFactor;
            cap.selective_recompute = true;
            const int tanh_out = b.output("attn_softcap_tanh", 0, at, TP, nh);
            b.g.ops.back().saves.push_back(tanh_out);
        }
        OpDef& sm = b.elementwise("attn_softmax", OpRole::AttnSoftmax, OpKind::Elementwise, TP, 0, {});
        sm.hbm_bytes_per_token_sq = nh * 2 * at;  // read the scores, write the probabilities
        sm.selective_recompute = true;
        const int probs = b.output("attn_probs", 0, at, TP, nh);
        b.g.ops.back().saves.push_back(probs);
        if (sc.attn_softmax_fp32 && at < 4.0) {
            // softmax(..., dtype=float32).to(dtype) (data/defaults.toml [stack.*]
            // attn_softmax_fp32): softmax's backward keeps its fp32 output as well
            // as the 16-bit cast P x V keeps. (In fp32 training the cast returns the
            // same tensor: one copy.)
            const int probs32 = b.output("attn_probs_fp32", 0, 4.0, TP, nh);
            b.g.ops.back().saves.push_back(probs32);
        }
        // Backward of P x V writes the gradient of the probabilities (16-bit; cast
        // to fp32 for an fp32 softmax), softmax backward the gradient of the scores
        // (16-bit, `_softmax_backward_data(grad, out, dim, input_dtype)`); both
        // exist at once next to the saved probabilities.
        b.g.attn_backward_working.squared = nh * ((sc.attn_softmax_fp32 ? 4.0 : at) + at);
        int pv_in = probs;
        if (dropout) {
            OpDef& dr = b.elementwise("attn_dropout", OpRole::AttnDropout, OpKind::Dropout, TP, 0, {});
            dr.hbm_bytes_per_token_sq = nh * (2 * at + 1);  // read, write, mask
            dr.selective_recompute = true;
            const int mask = b.output("attn_dropout_mask", 0, 1.0, TP, nh);
            pv_in = b.output("attn_dropout_out", 0, at, TP, nh);
            b.g.ops.back().saves.push_back(mask);
        }
        OpDef& pv = b.op("attn_values", OpRole::AttnValues, OpKind::AttentionValues, TP, {pv_in, v});
        pv.flops_per_token_sq = 2.0 * qd;
        pv.selective_recompute = true;
        ctx = b.tensor("attn_context", qd, at, TP);
    }
    // The output's transpose copy, which the output projection keeps beside the kernel's
    // own (StackConventions::attn_output_copy; its traffic is in attn_layout_copies).
    if (attn_output_copied(t)) ctx = b.tensor("attn_out", qd, a, TP);
    {
        OpDef& o = b.gemm("o_proj", OpRole::OProj, qd, h, TP, ctx);
        Builder::owns(o, qd * h + bias(m.out_bias, h), base_trained, ShardClass::Dense, true);
        // Row-parallel output: all-reduce (or reduce-scatter with SP) of s b h
        // (Megatron-LM; Korthikanti Sec. 4.2.2).
        o.collectives.push_back({CollectiveKind::TensorParallel, h * a});
    }
    if (adapted(kLoraO)) lora_adapter(b, "o_proj", t, ctx, qd, h, TP, a, 1, ShardClass::Dense);
    if (m.norms_per_layer >= 4) {
        const int post = b.tensor("post_attn_norm_in", h, norm_in_bytes, R);
        Builder::owns(b.elementwise("post_attn_norm", OpRole::PostAttnNorm, OpKind::Norm, R, norm_bytes, {post}), norm_params,
                      base_trained, ShardClass::Norm, false);
    }
    if (dropout) {
        const int mask = b.tensor("attn_out_dropout_mask", h, 1.0, R);
        b.elementwise("attn_out_dropout", OpRole::AttnOutDropout, OpKind::Dropout, R, dropout_bytes, {mask});
    }

    // --- MLP block (Korthikanti: 19sbh with a 4h GELU MLP and dropout)
    int mlp_in = n1;  // parallel blocks with one norm feed attention and MLP the same input
    if (!m.parallel_block || m.norms_per_layer >= 2) {
        int norm_in = x_in;
        if (!m.parallel_block) {
            b.elementwise("attn_residual_add", OpRole::AttnResidualAdd, OpKind::Elementwise, R, residual_bytes, {});
            norm_in = b.tensor("attn_residual_out", h, norm_in_bytes, R);
        }
        Builder::owns(b.elementwise("mlp_norm", OpRole::MlpNorm, OpKind::Norm, R, norm_bytes, norm_saves(norm_in, "mlp_norm_normed")), norm_params, base_trained,
                      ShardClass::Norm, false);
        mlp_in = b.tensor("mlp_norm_out", h, sa, R);
    }

    double working_f = 0;  // the MLP's backward working set, bytes per token (TP-split)
    // One MLP of `ffn` columns per copy, `copies` of them side by side (shared
    // experts) or `copies` experts of which each token visits `rows` (routed).
    auto mlp = [&](std::string_view prefix, double ffn, double copies, double rows, int groups, ShardClass cls) {
        // rows: expected passes per token through this MLP (1 for dense and
        // shared experts; top_k for the routed experts under balanced routing).
        const double width = groups > 1 ? ffn : ffn * copies;  // GEMM columns one token sees per pass
        const double f = width * rows;                            // activation columns per token
        auto expertise = [&](OpDef& o) {
            o.flops_per_token *= rows;
            o.gemm_rows_per_token = rows;
            o.gemm_groups = groups;
        };
        const double lora_copies = copies;
        b.scope = prefix;  // labels: <prefix><op>
        if (m.gated()) {
            OpDef& gu = b.gemm("gate_up_proj", OpRole::GateUpProj, h, width, TP, mlp_in, 2);
            expertise(gu);
            Builder::owns(gu, copies * (2 * h * ffn + bias(m.mlp_bias, 2 * ffn)), base_trained, cls, true);
            if (adapted(kLoraGate)) lora_adapter(b, "gate_proj", t, mlp_in, h, ffn, R, a, lora_copies, cls);
            if (adapted(kLoraUp)) lora_adapter(b, "up_proj", t, mlp_in, h, ffn, R, a, lora_copies, cls);
            const int gate = b.tensor("gate", f, sa, TP);
            const int up = b.tensor("up", f, sa, TP);
            // HBM traffic per token, in units of f x sa. Eager: silu reads gate and
            // writes act (2), the product reads act and up and writes it (3);
            // backward, autograd's MulBackward0 runs two products, d(product) x up
            // and d(product) x act, each reading two and writing one (6), and
            // silu_backward reads d(act) and gate and writes d(gate) (3). A fused
            // SwiGLU kernel (Megatron-Core's swiglu under its jit_fuser, Liger's,
            // Unsloth's) reads gate and up and writes the product (3), and in
            // backward reads d(product), gate and up and writes d(gate) and d(up)
            // (5), recomputing silu in registers; its traffic is counted at act_fn.
            // xformers' packed op (swiglu_op.py _SwiGLUFusedFunc) makes the
            // product in the dual GEMM's epilogue, gate and up still in registers
            // (1: the write), and its backward silu_bw_fused reads gate, up and
            // d(product) and writes d(gate), d(up) and the product again for the
            // down projection's weight gradient (6).
            const SwigluKernel sk = swiglu_kernel(t);
            const bool fused_glu = sk != SwigluKernel::Eager;
            const double glu_fwd = sk == SwigluKernel::PackedFused ? 1 : fused_glu ? 3 : 2;
            const double glu_bwd = sk == SwigluKernel::PackedFused ? 6 : fused_glu ? 5 : 3;
            OpDef& act_fn = b.elementwise("act_fn", OpRole::ActFn, OpKind::Elementwise, TP, glu_fwd * f * sa, {gate});
            act_fn.bwd_hbm_factor = glu_bwd / glu_fwd;
            const int act = b.tensor("act", f, sa, TP);
            // A fused SwiGLU recomputes act(gate) in backward: keeps gate and up only.
            OpDef& act_mul = b.elementwise("act_mul", OpRole::ActMul, OpKind::Elementwise, TP, fused_glu ? 0.0 : 3 * f * sa,
                                           fused_glu ? InlineList<int, 8>{up} : InlineList<int, 8>{act, up});
            act_mul.bwd_hbm_factor = 2.0;
            const int prod = b.tensor("act_x_up", f, sa, TP);
            OpDef& down = b.gemm("down_proj", OpRole::DownProj, width, h, TP, prod);
            // The packed kernel runs the down projection inside its own autograd
            // function and regenerates its input in backward.
            if (sk == SwigluKernel::PackedFused) down.saves.clear();
            expertise(down);
            Builder::owns(down, copies * (ffn * h + bias(m.mlp_bias, h)), base_trained, cls, true);
            if (adapted(kLoraDown)) lora_adapter(b, "down_proj", t, prod, ffn, h, TP, a, lora_copies, cls);
            // Backward working set (StepGraph::backward_working): d(product), d(act),
            // d(up), less the stored product; each expert's rows on their own.
            const double rows_at_once = f / groups;
            working_f = std::max(working_f, (down.saves.empty() ? 3.0 : 2.0) * rows_at_once * sa);
        } else {
            OpDef& up = b.gemm("fc1", OpRole::UpProj, h, width, TP, mlp_in);
            expertise(up);
            Builder::owns(up, copies * (h * ffn + bias(m.mlp_bias, ffn)), base_trained, cls, true);
            if (adapted(kLoraUp)) lora_adapter(b, "fc1", t, mlp_in, h, ffn, R, a, lora_copies, cls);
            const int fc1 = b.tensor("fc1_out", f, sa, TP);
            // In a cuBLASLt GELU epilogue (gemm_epilogue_gelu) the activation costs
            // the aux write of the pre-activation, and its backward the aux read in
            // the next GEMM's dGELU epilogue; eager GELU reads and writes.
            OpDef& act_fn = b.elementwise("act_fn", OpRole::ActFn, OpKind::Elementwise, TP, (sc.gemm_epilogue_gelu ? 1 : 2) * f * sa, {fc1});
            if (sc.gemm_epilogue_gelu) act_fn.bwd_hbm_factor = 1;
            const int act = b.tensor("act_out", f, sa, TP);
            OpDef& down = b.gemm("fc2", OpRole::DownProj, width, h, TP, act);
            expertise(down);
            Builder::owns(down, copies * (ffn * h + bias(m.mlp_bias, h)), base_trained, cls, true);
            if (adapted(kLoraDown)) lora_adapter(b, "fc2", t, act, ffn, h, TP, a, lora_copies, cls);
            // Backward working set: d(act), d(fc1 output), less the stored act.
            working_f = std::max(working_f, f / groups * sa);
        }
        b.scope = {};
    };

    if (m.is_moe()) {
        const double E = m.moe.num_experts;
        const double k_top = m.moe.top_k;
        OpDef& router = b.gemm("router", OpRole::Router, h, E, R, mlp_in);
        router.kind = OpKind::Router;
        router.fp8_gemm = false;  // a plain torch linear (Megatron-Core TopKRouter), not a TE module
        Builder::owns(router, h * E, base_trained, ShardClass::Dense, false);  // replicated on every TP rank
        OpDef& topk = b.elementwise("router_softmax_topk", OpRole::RouterTopK, OpKind::Elementwise, R, E * 8, {});
        // Dispatch: each token goes to its top-k experts over the EP group.
        topk.collectives.push_back({CollectiveKind::ExpertAllToAll, h * a * k_top});
        const int logits = b.tensor("router_probs", E, 4.0, R);
        topk.saves.push_back(logits);
        // Each token is copied to its top-k experts (the dispatched copy is kept
        // for the experts' weight gradients, the expert outputs for the combine).
        const int dispatched = b.tensor("moe_dispatched", h * k_top, sa, R);
        const int saved_in = mlp_in;
        mlp_in = dispatched;
        // E experts, each token through top_k of them (balanced routing: each
        // expert sees tokens x top_k / E rows).
        mlp("experts.", static_cast<double>(m.moe.expert_ffn), E, k_top, static_cast<int>(E), ShardClass::Expert);
        if (m.moe.shared_experts > 0) {
            mlp_in = saved_in;
            mlp("shared_experts.", static_cast<double>(m.moe.shared_expert_ffn), m.moe.shared_experts, 1.0, 1, ShardClass::Dense);
        }
        const int combined = b.tensor("moe_expert_out", h * k_top, sa, R);
        OpDef& comb = b.elementwise("moe_combine", OpRole::MoeCombine, OpKind::Elementwise, R, 2 * h * k_top * a, {combined});
        comb.collectives.push_back({CollectiveKind::ExpertAllToAll, h * a * k_top});
        comb.collectives.push_back({CollectiveKind::TensorParallel, h * a});  // the MLP block's TP all-reduce
    } else {
        mlp("", static_cast<double>(m.ffn), 1, 1.0, 1, ShardClass::Dense);
        for (auto it = b.g.ops.rbegin(); it != b.g.ops.rend(); ++it)
            if (it->role == OpRole::DownProj) {
                it->collectives.push_back({CollectiveKind::TensorParallel, h * a});
                break;
            }
    }
    if (m.norms_per_layer >= 4) {
        const int post = b.tensor("post_mlp_norm_in", h, norm_in_bytes, R);
        Builder::owns(b.elementwise("post_mlp_norm", OpRole::PostMlpNorm, OpKind::Norm, R, norm_bytes, {post}), norm_params,
                      base_trained, ShardClass::Norm, false);
    }
    if (dropout) {
        const int mask = b.tensor("mlp_out_dropout_mask", h, 1.0, R);
        b.elementwise("mlp_out_dropout", OpRole::MlpOutDropout, OpKind::Dropout, R, dropout_bytes, {mask});
    }
    b.elementwise("mlp_residual_add", OpRole::MlpResidualAdd, OpKind::Elementwise, R, residual_bytes, {});
    // The layer output's gradient has the layer output's dtype, the next layer's
    // input's (what full recompute stores: stored_full).
    b.g.backward_working.replicated = h * sa;
    b.g.backward_working.tensor_parallel = working_f;

    if (stream32) {
        // A 4-bit linear given an fp32 input casts it to the compute dtype before
        // its matmul, x.to(compute_dtype) (bitsandbytes nn.Linear4bit.forward): one
        // kernel per module -- a separate gate and up projection two, an eager MoE
        // one per expert on its rows -- reading 4 and writing 2 B per input element;
        // backward casts the input's gradient back (2 + 4). Nothing is saved.
        // (A 16-bit input, attention's output, is not cast.)
        const size_t n = b.g.ops.size();
        for (size_t i = 0; i < n; ++i) {
            const OpDef o = b.g.ops[i];
            if (o.site != Site::Layer || o.kind != OpKind::Gemm) continue;
            const TensorDef& in = b.g.tensors[static_cast<size_t>(o.input)];
            if (in.bytes_per_elem <= a) continue;
            const double modules = o.role == OpRole::GateUpProj && !fused ? 2 : 1;
            OpDef& cast = b.elementwise("linear_input_cast", OpRole::LinearInputCast, OpKind::Elementwise, in.split,
                                        modules * in.elems_per_token * (in.bytes_per_elem + a), {});
            cast.scope = o.scope;
            cast.adapted = o.name;
            cast.bwd_hbm_factor = 1;
            cast.casts = modules * (fused ? 1 : o.gemm_groups);
        }
    }

    // ===== last stage: final norm, LM head, loss
    b.site = Site::Last;
    int head_in = b.tensor("final_norm_in", h, m.final_norm ? norm_in_bytes : sa, R);
    if (m.final_norm) {
        Builder::owns(b.elementwise("final_norm", OpRole::FinalNorm, OpKind::Norm, R, norm_bytes, {head_in}), norm_params, base_trained,
                      ShardClass::Norm, false);
        head_in = b.tensor("lm_head_in", h, sa, R);
    }
    {
        // A matmul of h x V/t (vocabulary-parallel), also when tied to the
        // embedding; Transformer Engine keeps it in 16-bit under fp8.
        OpDef& head = b.gemm("lm_head", OpRole::LmHead, h, V, TP, head_in);
        head.fp8_gemm = false;
        Builder::owns(head, (m.tied_embeddings ? 0.0 : V * h) + bias(m.lm_head_bias, V), base_trained, ShardClass::Embedding, true);
        head.weight.module_copy = lora && t.lora.train_embeddings;
        if (m.tied_embeddings) head.weight.tied_copy = true;  // the shared matrix: copied here when pp > 1
        // Liger's fused linear cross-entropy makes the input's gradient in forward
        // and saves that instead (counted with its chunk: fused_linear_ce_bytes).
        if (flce) head.saves = {};
    }
    if (m.final_logit_softcap > 0 && !sc.loss_fuses_softcap && !flce) {
        // Final logit soft-capping in model code (transformers Gemma2ForCausalLM,
        // LitGPT's do_softcapping: logits / cap, tanh, * cap, in 16-bit before any
        // upcast): three logits-sized passes, and tanh's output kept for its
        // backward until the loss's backward reaches it, so one more 16-bit
        // logits copy beside the loss's. A loss kernel that caps inside
        // ([stack.*] loss_fuses_softcap: Unsloth) keeps none.
        const int tanh_out = b.tensor("logits_softcap_tanh", V, a, TP);
        b.g.tensors.back().logits = true;
        OpDef& cap = b.elementwise("logit_softcap", OpRole::LogitSoftcap, OpKind::Elementwise, TP, kSoftcapPasses * V * a, {tanh_out});
        cap.bwd_hbm_factor = kSoftcapBwdFactor;
    }
    {
        // The logits-sized tensors the stack's loss keeps live at its peak:
        // copies in the activation dtype and in fp32 (data/defaults.toml
        // [stack.*] loss_*_copies, derived there from each stack's loss code; a
        // real peak for 128K vocabularies).
        const LossCopies lc = loss_copies(m, t, false);
        const int logits = b.tensor("logits", V * lc.activation_dtype, a, TP);
        b.g.tensors.back().logits = true;
        OpDef& loss = b.elementwise("loss", OpRole::Loss, OpKind::Elementwise, TP, 0, {logits});
        const int fp32 = b.tensor("logits_fp32", V * lc.fp32, 4.0, TP);
        b.g.tensors.back().logits = true;
        loss.saves.push_back(fp32);
        // HBM traffic: the stack's passes over logits-sized tensors, each kernel
        // of its loss code counted (data/defaults.toml [stack.*] loss_passes).
        // Fused linear cross-entropy: the gradients are made in forward (the
        // chunk's logits written, read and rewritten in place; grad_input
        // written); backward scales grad_input only.
        const double fwd = V * (sc.loss_fwd_passes16 * a + sc.loss_fwd_passes32 * 4.0);
        const double bwd = V * (sc.loss_bwd_passes16 * a + sc.loss_bwd_passes32 * 4.0);
        loss.hbm_bytes_per_token = flce ? 3 * V * a + h * a : fwd;
        loss.bwd_hbm_factor = flce ? 2 * h * a / loss.hbm_bytes_per_token : fwd > 0 ? bwd / fwd : 0.0;
    }

    // Every norm of a stack with flash-attn's dropout-add-LayerNorm kernel moves
    // 17 B backward to its 13 forward (the factor above).
    if (dan)
        for (OpDef& o : b.g.ops)
            if (norm_role(o.role)) o.bwd_hbm_factor = norm_bwd_factor;

    // --- stored bytes per recompute policy
    StepGraph& g = b.g;
    saved_coeffs(g);  // stored_none, stored_selective, stored_first, stored_last, logits
    {
        // The same loss over tensor-parallel ranks (vocab-sharded logits), where
        // the stack runs it differently (the graph serves every layout).
        const LossCopies plain = loss_copies(m, t, false);
        const LossCopies tp = loss_copies(m, t, true);
        g.logits_tp = g.logits;
        g.logits_tp.tensor_parallel += V * ((tp.activation_dtype - plain.activation_dtype) * a + (tp.fp32 - plain.fp32) * 4.0);
    }
    // Full recompute keeps only each layer's input (2sbh; Korthikanti Sec. 4.2).
    g.stored_full.replicated = h * sa;
    per_op_policy(g, h * sa, a);
    for (const OpDef& o : g.ops)
        if (o.site == Site::Layer && o.selective_recompute) g.selective_flops_per_token_sq += o.flops_per_token_sq;
    for (const OpDef& o : g.ops) {
        const WeightDef& w = o.weight;
        WeightSums& ws = g.weights[static_cast<int>(o.site)];
        if (w.tied_copy) {
            ws.tied_copy += o.gemm_k * o.gemm_n;
            ws.tied_copy_trainable = base_trained;
        }
        if (w.params == 0) continue;
        const int bucket = WeightSums::bucket(w);
        (w.trainable ? ws.trainable : w.quantizable() ? ws.frozen_linear : ws.frozen_other)[bucket] += w.params;
        if (w.module_copy) ws.copies[bucket] += w.params;
        if (o.role == OpRole::VisionEncoder) (w.trainable ? ws.idle_trainable : ws.idle)[bucket] += w.params;
    }
    // Frozen base weights (LoRA / QLoRA) have no weight gradient.
    for (OpDef& o : g.ops)
        if (o.kind == OpKind::Gemm || o.kind == OpKind::Router) o.trainable_weight = !lora || o.weight.module_copy;
    for (const OpDef& o : g.ops) {
        g.launches[static_cast<int>(o.site)] += forward_launches(o, sc, m, t);
        g.forward_only_launches[static_cast<int>(o.site)] += forward_only_launches(o, sc, t);
        g.param_tensors[static_cast<int>(o.site)] += param_tensors(o, sc, m);
        if ((o.weight.params > 0 || o.weight.tied_copy) && o.role != OpRole::VisionEncoder) g.weighted_modules[static_cast<int>(o.site)] += weight_modules(o, sc);
        if (o.site == Site::Layer && o.weight.params > 0) {
            const double module = o.weight.params / weight_modules(o, sc);
            if (module > g.largest_layer_module) {
                g.largest_layer_module = module;
                g.largest_layer_module_tp_split = o.weight.tp_split;
            }
        }
    }
    return std::move(b.g);
}

}  // namespace trainplan
