#include "trainplan/opgraph.hpp"

namespace trainplan {

double activation_bytes_per_elem(Precision p) {
    // fp8-mixed (Transformer Engine) keeps activations between ops in bf16; only
    // GEMM inputs are cast on the fly.
    return p == Precision::FP32 ? 4.0 : 2.0;
}

namespace {

class Builder {
public:
    LayerGraph g;

    int tensor(std::string name, double per_token, double bytes, Split split, double per_token_sq = 0,
               bool core = false) {
        g.tensors.push_back({std::move(name), per_token, per_token_sq, bytes, split, core});
        return static_cast<int>(g.tensors.size()) - 1;
    }
    OpDef& op(std::string name, OpKind kind, Split split, std::vector<int> saves) {
        OpDef o;
        o.name = std::move(name);
        o.kind = kind;
        o.split = split;
        o.saves = std::move(saves);
        g.ops.push_back(std::move(o));
        return g.ops.back();
    }
    // y = x W: k inputs, n outputs per token; saves its input x.
    OpDef& gemm(std::string name, double k, double n, Split split, int input, double weight_copies = 1) {
        OpDef& o = op(std::move(name), OpKind::Gemm, split, {input});
        o.flops_per_token = 2.0 * k * n * weight_copies;
        o.gemm_k = k;
        o.gemm_n = n * weight_copies;
        o.row_parallel = g.tensors[static_cast<size_t>(input)].split == Split::TensorParallel && split == Split::TensorParallel;
        return o;
    }
    OpDef& elementwise(std::string name, OpKind kind, Split split, double bytes_per_token, std::vector<int> saves) {
        OpDef& o = op(std::move(name), kind, split, std::move(saves));
        o.hbm_bytes_per_token = bytes_per_token;
        o.flops_per_token = 0;
        return o;
    }
};

// LoRA on one linear with input tensor `in` (dim d_in, split as `split`): dropout
// keeps a mask and the dropped copy for A's weight gradient, A's output (rank r)
// is kept for B's. With no LoRA dropout A reads `in` itself, which is already saved.
void lora_adapter(Builder& b, const std::string& name, const TrainingSetup& t, int in, double d_in, double d_out,
                  Split split, double act_bytes) {
    const double r = t.lora.rank;
    int a_in = in;
    if (t.lora.dropout > 0) {
        const int mask = b.tensor(name + ".lora_dropout_mask", d_in, 1.0, split);
        a_in = b.tensor(name + ".lora_dropped_input", d_in, act_bytes, split);
        b.elementwise(name + ".lora_dropout", OpKind::Dropout, split, d_in * act_bytes * 2, {mask});
    }
    b.gemm(name + ".lora_A", d_in, r, split, a_in).kind = OpKind::LoraGemm;
    const int a_out = b.tensor(name + ".lora_A_out", r, act_bytes, Split::Replicated);
    b.gemm(name + ".lora_B", r, d_out, split, a_out).kind = OpKind::LoraGemm;
}

}  // namespace

LayerGraph build_layer_graph(const ModelSpec& m, const TrainingSetup& t) {
    Builder b;
    const double a = activation_bytes_per_elem(t.precision);
    const double h = static_cast<double>(m.hidden);
    const double qd = static_cast<double>(m.q_dim());
    const double kvd = static_cast<double>(m.kv_dim());
    const double nh = static_cast<double>(m.num_heads);
    const bool dropout = m.dropout > 0;
    const bool lora = t.method != Method::Full;
    auto adapted = [&](unsigned target) { return lora && (t.lora.targets & target) != 0; };
    const auto R = Split::Replicated;
    const auto TP = Split::TensorParallel;

    // HBM traffic of the memory-bound ops. Megatron-LM / Transformer Engine fuse
    // them (one read, one write); eager PyTorch (HF, Lightning, Composer FSDP)
    // runs each as separate kernels: under torch.autocast the residual stream
    // stays fp32 (embedding output and adds promote), layer_norm runs in fp32
    // and is cast back to 16-bit for the next matmul, and an eager RMSNorm
    // (x.float(), pow, mean, rsqrt, mul, cast, weight mul) reads and writes its
    // input about eight times (transformers LlamaRMSNorm).
    const bool fused = t.framework == Framework::Megatron;
    const double r = (!fused && t.framework == Framework::PyTorchAMP && t.precision != Precision::FP32) ? 4.0 : a;
    double norm_bytes = 2 * h * a;
    if (!fused) {
        if (m.norm == NormKind::LayerNorm) norm_bytes = t.framework == Framework::PyTorchAMP ? h * (r + 4 + 4 + 2) : h * (r + a);
        else norm_bytes = h * (r + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 2 + 2 + 2);
    }
    const double residual_bytes = 3 * h * r;

    // --- attention block (Korthikanti et al. 2022, Sec. 4.1: 11sbh + 5as^2b with dropout)
    const int x_in = b.tensor("layer_input", h, a, R);
    b.elementwise("attn_norm", OpKind::Norm, R, norm_bytes, {x_in});
    const int n1 = b.tensor("attn_norm_out", h, a, R);
    b.gemm("q_proj", h, qd, TP, n1);
    b.gemm("k_proj", h, kvd, TP, n1);
    b.gemm("v_proj", h, kvd, TP, n1);
    if (adapted(kLoraQ)) lora_adapter(b, "q_proj", t, n1, h, qd, R, a);
    if (adapted(kLoraK)) lora_adapter(b, "k_proj", t, n1, h, kvd, R, a);
    if (adapted(kLoraV)) lora_adapter(b, "v_proj", t, n1, h, kvd, R, a);
    const int q = b.tensor("q", qd, a, TP);
    const int k = b.tensor("k", kvd, a, TP);
    const int v = b.tensor("v", kvd, a, TP);
    if (m.position == PositionKind::RoPE)
        b.elementwise("rope", OpKind::Elementwise, TP, 2 * (qd + kvd) * a, {});  // saves only cos/sin tables
    const int ctx = b.tensor("attn_context", qd, a, TP);
    if (t.flash_attention) {
        // FlashAttention keeps Q, K, V, the output and one fp32 log-sum-exp per
        // row and head; no s x s matrix (Dao et al. 2022).
        const int lse = b.tensor("attn_logsumexp", nh, 4.0, TP);
        OpDef& fa = b.op("flash_attention", OpKind::FlashAttention, TP, {q, k, v, ctx, lse});
        fa.flops_per_token_sq = 4.0 * qd;  // QK^T and PV, 2 FLOPs per MAC each
        fa.hbm_bytes_per_token = (2 * qd + 2 * kvd) * a;
        // Eager code moves Q, K, V into the kernel's layout and the output back
        // (transpose + contiguous copies: read and write each).
        if (!fused) b.elementwise("attn_layout_copies", OpKind::Elementwise, TP, 2 * (2 * qd + 2 * kvd) * a, {});
    } else {
        // Eager attention: QK^T keeps Q and K; softmax keeps its output (2as^2b);
        // attention dropout keeps a mask (as^2b) and its output (2as^2b) for PV.
        OpDef& qk = b.op("attn_scores", OpKind::AttentionScores, TP, {q, k});
        qk.flops_per_token_sq = 2.0 * qd;
        const int probs = b.tensor("attn_probs", 0, a, TP, nh, true);
        OpDef& sm = b.elementwise("attn_softmax", OpKind::Elementwise, TP, 0, {probs});
        sm.hbm_bytes_per_token = 0;
        int pv_in = probs;
        if (dropout) {
            const int mask = b.tensor("attn_dropout_mask", 0, 1.0, TP, nh, true);
            pv_in = b.tensor("attn_dropout_out", 0, a, TP, nh, true);
            b.elementwise("attn_dropout", OpKind::Dropout, TP, 0, {mask});
        }
        OpDef& pv = b.op("attn_values", OpKind::AttentionValues, TP, {pv_in, v});
        pv.flops_per_token_sq = 2.0 * qd;
    }
    b.gemm("o_proj", qd, h, TP, ctx);
    if (adapted(kLoraO)) lora_adapter(b, "o_proj", t, ctx, qd, h, TP, a);
    if (m.norms_per_layer >= 4) {
        const int post = b.tensor("post_attn_norm_in", h, a, R);
        b.elementwise("post_attn_norm", OpKind::Norm, R, norm_bytes, {post});
    }
    if (dropout) {
        const int mask = b.tensor("attn_out_dropout_mask", h, 1.0, R);
        b.elementwise("attn_out_dropout", OpKind::Dropout, R, 3 * h * a, {mask});
    }

    // --- MLP block (Korthikanti: 19sbh with a 4h GELU MLP and dropout)
    int mlp_in = n1;  // parallel blocks with one norm feed attention and MLP the same input
    if (!m.parallel_block || m.norms_per_layer >= 2) {
        int norm_in = x_in;
        if (!m.parallel_block) {
            norm_in = b.tensor("attn_residual_out", h, a, R);
            b.elementwise("attn_residual_add", OpKind::Elementwise, R, residual_bytes, {});
        }
        b.elementwise("mlp_norm", OpKind::Norm, R, norm_bytes, {norm_in});
        mlp_in = b.tensor("mlp_norm_out", h, a, R);
    }

    auto mlp = [&](const std::string& prefix, double ffn, double tokens_share) {
        // tokens_share: expected fraction of this rank's tokens that pass through
        // this MLP per token (1 for dense; top_k/E per expert under balanced routing).
        const double f = ffn * tokens_share;
        const double fscale = tokens_share;
        if (m.gated()) {
            OpDef& gu = b.gemm(prefix + "gate_up_proj", h, ffn, TP, mlp_in, 2);
            gu.flops_per_token *= fscale;
            if (adapted(kLoraGate)) lora_adapter(b, prefix + "gate_proj", t, mlp_in, h, ffn, R, a);
            if (adapted(kLoraUp)) lora_adapter(b, prefix + "up_proj", t, mlp_in, h, ffn, R, a);
            const int gate = b.tensor(prefix + "gate", f, a, TP);
            const int up = b.tensor(prefix + "up", f, a, TP);
            const int act = b.tensor(prefix + "act", f, a, TP);
            b.elementwise(prefix + "act_fn", OpKind::Elementwise, TP, 2 * f * a, {gate});
            b.elementwise(prefix + "act_mul", OpKind::Elementwise, TP, 3 * f * a, {act, up});
            const int prod = b.tensor(prefix + "act_x_up", f, a, TP);
            OpDef& down = b.gemm(prefix + "down_proj", ffn, h, TP, prod);
            down.flops_per_token *= fscale;
            if (adapted(kLoraDown)) lora_adapter(b, prefix + "down_proj", t, prod, ffn, h, TP, a);
        } else {
            OpDef& up = b.gemm(prefix + "fc1", h, ffn, TP, mlp_in);
            up.flops_per_token *= fscale;
            if (adapted(kLoraUp)) lora_adapter(b, prefix + "fc1", t, mlp_in, h, ffn, R, a);
            const int fc1 = b.tensor(prefix + "fc1_out", f, a, TP);
            b.elementwise(prefix + "act_fn", OpKind::Elementwise, TP, 2 * f * a, {fc1});
            const int act = b.tensor(prefix + "act_out", f, a, TP);
            OpDef& down = b.gemm(prefix + "fc2", ffn, h, TP, act);
            down.flops_per_token *= fscale;
            if (adapted(kLoraDown)) lora_adapter(b, prefix + "fc2", t, act, ffn, h, TP, a);
        }
    };

    if (m.is_moe()) {
        const double E = m.moe.num_experts;
        const double k_top = m.moe.top_k;
        OpDef& router = b.gemm("router", h, E, R, mlp_in);
        router.kind = OpKind::Router;
        const int logits = b.tensor("router_probs", E, 4.0, R);
        b.elementwise("router_softmax_topk", OpKind::Router, R, E * 8, {logits});
        // Each token is copied to its top-k experts (the dispatched copy is kept
        // for the experts' weight gradients, the expert outputs for the combine).
        const int dispatched = b.tensor("moe_dispatched", h * k_top, a, R);
        (void)dispatched;
        // Expected share of tokens per expert is top_k / E; E experts => top_k
        // MLP passes per token in total.
        const int saved_in = mlp_in;
        mlp_in = dispatched;
        for (int e = 0; e < 1; ++e) mlp("experts.", static_cast<double>(m.moe.expert_ffn), k_top);
        if (m.moe.shared_experts > 0) {
            mlp_in = saved_in;
            mlp("shared_experts.", static_cast<double>(m.moe.shared_expert_ffn) * m.moe.shared_experts, 1.0);
        }
        const int combined = b.tensor("moe_expert_out", h * k_top, a, R);
        b.elementwise("moe_combine", OpKind::Elementwise, R, 2 * h * k_top * a, {combined});
    } else {
        mlp("", static_cast<double>(m.ffn), 1.0);
    }
    if (m.norms_per_layer >= 4) {
        const int post = b.tensor("post_mlp_norm_in", h, a, R);
        b.elementwise("post_mlp_norm", OpKind::Norm, R, norm_bytes, {post});
    }
    if (dropout) {
        const int mask = b.tensor("mlp_out_dropout_mask", h, 1.0, R);
        b.elementwise("mlp_out_dropout", OpKind::Dropout, R, 3 * h * a, {mask});
    }
    b.elementwise("mlp_residual_add", OpKind::Elementwise, R, residual_bytes, {});

    // Frozen base weights (LoRA / QLoRA) have no weight gradient.
    if (lora)
        for (OpDef& o : b.g.ops)
            if (o.kind == OpKind::Gemm || o.kind == OpKind::Router) o.trainable_weight = false;

    // --- stored bytes per recompute policy: a tensor counts once however many
    // ops keep it.
    std::vector<char> saved(b.g.tensors.size(), 0);
    for (const OpDef& o : b.g.ops)
        for (int i : o.saves) saved[static_cast<size_t>(i)] = 1;
    for (size_t i = 0; i < b.g.tensors.size(); ++i) {
        if (!saved[i]) continue;
        const TensorDef& td = b.g.tensors[i];
        for (ActivationCoeffs* c : {&b.g.stored_none, &b.g.stored_selective}) {
            if (c == &b.g.stored_selective && td.attention_core) continue;
            const double per_tok = td.elems_per_token * td.bytes_per_elem;
            (td.split == Split::Replicated ? c->replicated : c->tensor_parallel) += per_tok;
            c->squared += td.elems_per_token_sq * td.bytes_per_elem;
        }
    }
    // Full recompute keeps only each layer's input (2sbh; Korthikanti Sec. 4.2).
    b.g.stored_full.replicated = h * a;
    return std::move(b.g);
}

}  // namespace trainplan
