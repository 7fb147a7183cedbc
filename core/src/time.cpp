#include "trainplan/time.hpp"

#include <algorithm>
#include <cmath>

#include "trainplan/units.hpp"

namespace trainplan {

namespace {

bool is_hopper_or_later(const GpuSpec& g) {
    return g.architecture == "hopper" || g.architecture == "blackwell";
}

}  // namespace

Efficiencies efficiencies(const GpuSpec& g, AttentionKernel k) {
    Efficiencies e;
    // Large-GEMM fraction of dense peak: the GPU's "Maximum Achievable Matmul
    // FLOPS" (stas00/ml-engineering, hardware-facts.toml [[efficiency]]
    // mamf_*) where measured; else 0.78, the median of those measured fractions.
    e.gemm = g.matmul_efficiency > 0 ? g.matmul_efficiency : 0.78;
    // HBM: measured fraction where known; else 0.85 (hardware-facts.toml
    // hbm_h100_blog note: "use 0.85-0.90 as modelling default for HBM").
    e.hbm = g.memory_bandwidth_efficiency > 0 ? g.memory_bandwidth_efficiency : 0.85;
    // Fused attention, fraction of peak on the FLOPs it executes:
    //  - FlashAttention-2: "50-73 %" on A100 (Dao 2023, abstract) -> 0.60, but
    //    ~35 % on H100, where it does not use the Hopper instructions (Shah et
    //    al. 2024, FlashAttention-3, Sec. 1);
    //  - FlashAttention (v1): FlashAttention-2 is "around 2x faster" (Dao 2023,
    //    abstract; v1 reaches "only 25-40 %" on A100) -> half of FA2 per arch;
    //  - FlashAttention-3 / cuDNN fused attention on Hopper: "75 % utilization"
    //    forward (Shah et al. 2024, abstract); backward lower -> 0.60.
    const bool hopper = is_hopper_or_later(g);
    switch (k) {
        case AttentionKernel::Flash1: e.attention_fwd = e.attention_bwd = hopper ? 0.175 : 0.30; break;
        case AttentionKernel::Flash2: e.attention_fwd = e.attention_bwd = hopper ? 0.35 : 0.60; break;
        case AttentionKernel::Flash3: e.attention_fwd = e.attention_bwd = hopper ? 0.60 : 0.60; break;
    }
    // Gap between dependent kernels launched back to back (launch latency ~3-5 us,
    // NVIDIA CUDA best-practices guide); eager frameworks pay it per op.
    e.kernel_overhead_s = 3e-6;
    return e;
}

double model_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
    const ParamCounts pc = count_params(m);
    // Matmul parameters touched per token: the layers' active weights (norms
    // excluded) and the LM head (a matmul even when tied to the embedding).
    const double layer_active = static_cast<double>(pc.attention + pc.mlp + pc.shared_experts + pc.router) +
                                (m.is_moe() ? static_cast<double>(m.moe.top_k) * static_cast<double>(mlp_params(m, m.moe.expert_ffn)) : 0.0);
    const double matmul = static_cast<double>(m.num_layers) * layer_active + static_cast<double>(m.vocab * m.hidden);
    // 6 FLOPs per parameter per token (forward 2, backward 4; Kaplan et al. 2020)
    // + attention 12 L (n_heads d_head) s, without causal savings (Chowdhery et
    // al. 2022, PaLM, Appendix B).
    return 6.0 * matmul + 12.0 * static_cast<double>(m.num_layers) * static_cast<double>(m.q_dim()) * static_cast<double>(seq_len);
}

namespace {

struct LinkCost {
    double bus_Bps = 0;
    double latency_s = 0;
};

LinkCost link_cost(const LinkSpec& l) {
    double eff = l.efficiency;
    if (eff <= 0) {
        // Defaults per kind where a preset has no measured figure (hardware-facts.toml):
        switch (l.kind) {
            case LinkKind::NVLink:
            case LinkKind::NVSwitch: eff = 0.78; break;        // nccl_a100_8gpu_intranode busbw / link
            case LinkKind::PCIe: eff = l.p2p ? 0.80 : 0.65; break;  // pcie_fraction notes
            case LinkKind::InfiniBand: eff = 0.94; break;      // ib_nic_fraction
            case LinkKind::RoCE: eff = 0.75; break;            // nccl_a100_2node_roce (600 of 800 Gb/s)
            case LinkKind::Ethernet: eff = 0.5; break;         // TCP sockets without RDMA: estimate
            case LinkKind::InfinityFabric: eff = 0.70; break;  // nccl_mi300x_8gpu (313 of 448 GB/s)
        }
    }
    double lat = l.latency_s;
    if (lat <= 0) {
        // NCCL tuning.cc: base ring latency 8.4 us (simple protocol); network hops add 14 us.
        const bool net = l.kind == LinkKind::InfiniBand || l.kind == LinkKind::RoCE || l.kind == LinkKind::Ethernet;
        lat = (net ? 22.4 : 8.4) * units::us;
        if (l.kind == LinkKind::Ethernet) lat = 50 * units::us;  // kernel TCP stack: estimate
    }
    return {l.bandwidth_Bps * eff, lat};
}

// Ring collectives (NCCL): all-reduce moves 2(n-1)/n S per rank, all-gather and
// reduce-scatter (n-1)/n S; latency grows with the ring's steps (log-scaled for
// NCCL's trees on large groups).
double allreduce_s(double bytes, int n, const LinkCost& c) {
    if (n <= 1 || bytes <= 0) return 0;
    const double steps = std::min(2.0 * (n - 1), 2.0 * std::ceil(std::log2(static_cast<double>(n))) + 2);
    return steps * c.latency_s + 2.0 * (n - 1) / n * bytes / c.bus_Bps;
}
double allgather_s(double bytes, int n, const LinkCost& c) {
    if (n <= 1 || bytes <= 0) return 0;
    const double steps = std::min(1.0 * (n - 1), std::ceil(std::log2(static_cast<double>(n))) + 1);
    return steps * c.latency_s + 1.0 * (n - 1) / n * bytes / c.bus_Bps;
}

struct Hw {
    double peak = 0;       // dense peak for the compute format
    double attn_peak = 0;  // attention runs in 16-bit even under fp8
    double bw = 0;         // effective HBM bytes/s
    Efficiencies eff;
    int sms = 108;
};

// One GEMM of m x k times k x n: roofline with shape-dependent efficiency --
// wave quantization of 128 x 128 output tiles over the SMs, and the per-tile
// prologue/epilogue amortized over the reduction depth k.
double gemm_s(double m, double n, double k, double act_bytes, const Hw& hw) {
    if (m <= 0 || n <= 0 || k <= 0) return 0;
    const double flops = 2.0 * m * n * k;
    const double tiles = std::ceil(m / 128.0) * std::ceil(n / 128.0);
    const double waves = std::ceil(tiles / hw.sms);
    const double wave_eff = tiles / (waves * hw.sms);
    const double depth_eff = k / (k + 64.0);
    const double eff = hw.eff.gemm * wave_eff * depth_eff;
    const double t_compute = flops / (hw.peak * eff);
    const double t_memory = act_bytes * (m * k + k * n + m * n) / hw.bw;
    return std::max(t_compute, t_memory) + hw.eff.kernel_overhead_s;
}

struct PassTimes {
    double fwd = 0, bwd = 0, recompute = 0;  // one layer, one micro-batch
    double memory_bound = 0;                 // the part of fwd + bwd limited by HBM bandwidth
    double attention_core_fwd = 0;           // what selective recompute repeats
};

PassTimes layer_times(const Scenario& s, const LayerGraph& g, const Hw& hw) {
    const TrainingSetup& t = s.setup;
    const ModelSpec& m = s.model;
    const double tp = t.layout.tp;
    const bool sp = t.layout.sequence_parallel && t.layout.tp > 1;
    const double tokens = static_cast<double>(t.seq_len * t.micro_batch);
    const double sq = static_cast<double>(t.seq_len);
    const double a = activation_bytes_per_elem(t.precision);
    const double gemm_bytes = t.precision == Precision::FP8Mixed ? 1.0 : a;
    PassTimes p;
    for (const OpDef& o : g.ops) {
        double fwd = 0, bwd = 0;
        switch (o.kind) {
            case OpKind::Gemm:
            case OpKind::LoraGemm:
            case OpKind::Router: {
                // flops_per_token already scales experts by top_k; its ratio to
                // 2kn is the number of expert passes per token.
                const double passes = o.flops_per_token / (2.0 * o.gemm_k * o.gemm_n);
                double mm = tokens * passes;
                double n = o.gemm_n, k = o.gemm_k;
                if (o.split == Split::TensorParallel) {
                    if (o.row_parallel) k /= tp; else n /= tp;
                }
                if (m.is_moe() && passes != 1.0 && o.name.rfind("experts.", 0) == 0) {
                    // Balanced routing: each of E experts sees tokens x top_k / E rows.
                    const double experts = m.moe.num_experts;
                    const double per_expert = mm / experts;
                    fwd = experts * gemm_s(per_expert, n, k, gemm_bytes, hw);
                    bwd = experts * (gemm_s(per_expert, k, n, gemm_bytes, hw) +
                                     (o.trainable_weight ? gemm_s(k, n, per_expert, gemm_bytes, hw) : 0));
                    break;
                }
                if (o.split == Split::Replicated && sp && o.kind != OpKind::LoraGemm) mm /= tp;
                fwd = gemm_s(mm, n, k, gemm_bytes, hw);
                // Backward: the input gradient, and the weight gradient when trained.
                bwd = gemm_s(mm, k, n, gemm_bytes, hw) + (o.trainable_weight ? gemm_s(k, n, mm, gemm_bytes, hw) : 0);
                break;
            }
            case OpKind::FlashAttention: {
                // Causal masking: FlashAttention skips the masked half of the blocks.
                const double flops = o.flops_per_token_sq * sq * tokens / tp * 0.5;
                fwd = flops / (hw.attn_peak * hw.eff.attention_fwd) + hw.eff.kernel_overhead_s;
                // Backward does 2.5x the forward matmul work (5 GEMMs vs 2; Dao 2023).
                bwd = 2.5 * flops / (hw.attn_peak * hw.eff.attention_bwd) + hw.eff.kernel_overhead_s;
                // (the kernel recomputes attention inside its own backward: nothing for selective recompute to add)
                break;
            }
            case OpKind::AttentionScores:
            case OpKind::AttentionValues: {
                // Batched GEMMs per head: s x s x d_head, full (no causal skipping).
                const double heads = static_cast<double>(m.num_heads) / tp * static_cast<double>(t.micro_batch);
                const double d = static_cast<double>(m.head_dim);
                fwd = heads * (gemm_s(sq, sq, d, a, hw) - hw.eff.kernel_overhead_s) + hw.eff.kernel_overhead_s;
                bwd = 2 * fwd;
                p.attention_core_fwd += fwd;
                break;
            }
            default: {
                // Memory-bound ops: bytes through HBM; backward reads and writes ~2x.
                double bytes = o.hbm_bytes_per_token * tokens;
                if (o.split == Split::TensorParallel) bytes /= tp;
                else if (sp) bytes /= tp;
                // Softmax / dropout over the s x s score matrices (eager attention).
                if (o.name == "attn_softmax" || o.name == "attn_dropout") {
                    const double elems = static_cast<double>(m.num_heads) / tp * sq * tokens;
                    bytes = elems * (o.name == "attn_dropout" ? 2 * a + 1 : 2 * a);
                    p.attention_core_fwd += bytes / hw.bw + hw.eff.kernel_overhead_s;
                }
                fwd = bytes / hw.bw + hw.eff.kernel_overhead_s;
                bwd = 2 * bytes / hw.bw + hw.eff.kernel_overhead_s;
                p.memory_bound += fwd + bwd;
                break;
            }
        }
        p.fwd += fwd;
        p.bwd += bwd;
    }
    if (t.recompute == Recompute::Full) p.recompute = p.fwd;
    else if (t.recompute == Recompute::Selective) p.recompute = p.attention_core_fwd;
    return p;
}

}  // namespace

TimeEstimate estimate_time(const Scenario& s) { return estimate_time(s, build_layer_graph(s.model, s.setup)); }

TimeEstimate estimate_time(const Scenario& s, const LayerGraph& g) {
    TimeEstimate est;
    const ModelSpec& m = s.model;
    const TrainingSetup& t = s.setup;
    const ParallelLayout& lay = t.layout;
    const ClusterSpec& c = s.cluster;
    const RunOptions& run = s.run;

    Hw hw;
    // FlashAttention kernels exist for fp16/bf16 only; in fp32 PyTorch's SDPA
    // runs the memory-efficient kernel, which performs like FlashAttention v1.
    hw.eff = efficiencies(c.gpu, t.precision == Precision::FP32 ? AttentionKernel::Flash1 : t.attention_kernel);
    NumericFormat fmt = NumericFormat::BF16;
    switch (t.precision) {
        // PyTorch runs fp32 matmuls on CUDA cores unless TF32 is enabled
        // (torch.backends.cuda.matmul.allow_tf32 = False since 1.12).
        case Precision::FP32: fmt = NumericFormat::FP32; break;
        case Precision::FP16Mixed: fmt = NumericFormat::FP16; break;
        case Precision::FP8Mixed: fmt = NumericFormat::FP8; break;
        default: fmt = NumericFormat::BF16; break;
    }
    hw.peak = c.gpu.peak_flops(fmt);
    hw.attn_peak = c.gpu.peak_flops(fmt == NumericFormat::FP8 ? NumericFormat::BF16 : fmt);
    hw.bw = c.gpu.memory_bandwidth_Bps * hw.eff.hbm;
    hw.sms = c.gpu.sm_count > 0 ? c.gpu.sm_count : 108;
    if (fmt == NumericFormat::FP32) {
        // CUDA-core SGEMM: no tensor-core tiling limits, but the same large-GEMM fraction.
        hw.attn_peak = hw.peak;
    }

    const double a = activation_bytes_per_elem(t.precision);
    const double tokens_mb = static_cast<double>(t.seq_len * t.micro_batch);
    const double h = static_cast<double>(m.hidden);
    const double micro_batches = static_cast<double>(t.grad_accum);
    const bool full = t.method == Method::Full;

    // ---- compute per micro-batch on the critical (most-loaded) stage
    const PassTimes lt = layer_times(s, g, hw);
    const int max_layers = layers_on_stage(m.num_layers, lay.pp, lay.pp - 1);
    double stage_fwd = max_layers * lt.fwd, stage_bwd = max_layers * lt.bwd, stage_rec = max_layers * lt.recompute;
    // LM head + loss on the last stage (a matmul of h x V/t, softmax over V/t).
    {
        const double vt = static_cast<double>(m.vocab) / lay.tp;
        const bool head_trained = full;
        const double head_f = gemm_s(tokens_mb, vt, h, a, hw);
        const double head_b = gemm_s(tokens_mb, h, vt, a, hw) + (head_trained ? gemm_s(h, vt, tokens_mb, a, hw) : 0);
        const double loss_bytes = tokens_mb * vt * (a + 4 + 4);  // logits, fp32 softmax, gradient
        stage_fwd += head_f + loss_bytes / hw.bw;
        stage_bwd += head_b + loss_bytes / hw.bw;
    }
    // QLoRA: bitsandbytes dequantizes every 4-bit weight to 16-bit for each
    // matmul that uses it (forward, and the input-gradient GEMM in backward):
    // read ~0.52 B, write 2 B, and the GEMM reads the 2 B back.
    if (t.method == Method::QLoRA) {
        const ParamCounts q = count_params(m);
        const double linear = static_cast<double>(q.attention + q.mlp + q.shared_experts + q.experts) / (lay.tp * lay.ep);
        const double per_pass = linear * (0.52 + 2.0 + 2.0) / hw.bw;
        stage_fwd += max_layers * per_pass;
        stage_bwd += max_layers * per_pass;
        if (t.recompute == Recompute::Full) stage_rec += max_layers * per_pass;
    }
    const double clock = std::clamp(run.sustained_clock, 0.05, 1.0);
    const double per_mb = (stage_fwd + stage_bwd + stage_rec) / clock;
    TimeBreakdown& tb = est.time;
    tb.compute_s = micro_batches * per_mb;
    tb.memory_bound_s = micro_batches * max_layers * lt.memory_bound * (1.0 + (t.recompute == Recompute::Full ? 0.5 : 0.0)) / clock;
    tb.recompute_s = micro_batches * stage_rec / clock;
    tb.thermal_s = micro_batches * (stage_fwd + stage_bwd + stage_rec) * (1.0 / clock - 1.0);

    // ---- placement: TP inside a node first, then PP, then DP (Megatron order).
    const LinkCost intra = link_cost(c.intra_node);
    LinkCost inter = link_cost(c.inter_node);
    const int nics = c.nics_per_node > 0 ? c.nics_per_node : c.gpus_per_node;
    if (c.inter_node.bandwidth_Bps > 0)
        inter.bus_Bps = c.inter_node.bandwidth_Bps * (inter.bus_Bps / c.inter_node.bandwidth_Bps) * nics / c.gpus_per_node;
    const int gpn = c.gpus_per_node;
    const bool tp_in_node = lay.tp <= gpn;
    const LinkCost tp_link = tp_in_node ? intra : inter;
    const bool pp_crosses = lay.tp * lay.pp > gpn;
    const LinkCost pp_link = pp_crosses ? inter : intra;
    const int mp = lay.tp * lay.pp;
    const bool dp_crosses = mp * lay.dp > gpn && c.num_nodes() > 1;
    // DP ranks sharing a node reduce inside it first; across nodes each of them
    // drives its own NIC share (NCCL hierarchical rings / trees).
    const int dp_per_node = std::max(1, std::min(lay.dp, gpn / std::max(1, mp)));
    const int dp_nodes = std::max(1, lay.dp / dp_per_node);
    est.placement.tp_link = lay.tp > 1 ? (tp_in_node ? c.intra_node.id : c.inter_node.id) : "";
    est.placement.pp_link = lay.pp > 1 ? (pp_crosses ? c.inter_node.id : c.intra_node.id) : "";
    est.placement.dp_link = lay.dp > 1 ? (dp_crosses ? c.inter_node.id : c.intra_node.id) : "";
    est.placement.tp_bus_Bps = lay.tp > 1 ? tp_link.bus_Bps : 0;
    est.placement.pp_Bps = lay.pp > 1 ? pp_link.bus_Bps : 0;
    est.placement.dp_bus_Bps = lay.dp > 1 ? (dp_crosses ? inter.bus_Bps : intra.bus_Bps) : 0;

    // ---- tensor parallel: 2 all-reduces (or all-gather + reduce-scatter pairs
    // with SP, same volume) forward, 2 backward, 2 more when recomputing the
    // forward (Megatron-LM; Korthikanti et al. Sec. 4.2.2). Not overlapped.
    if (lay.tp > 1) {
        const double msg = tokens_mb * h * a;
        const double per_collective = allreduce_s(msg, lay.tp, tp_link);
        const double count = 4.0 + (t.recompute == Recompute::Full ? 2.0 : 0.0);
        tb.tp_comm_s = micro_batches * max_layers * count * per_collective;
        // Megatron-Core --tp-comm-overlap (Transformer Engine userbuffers) splits
        // the GEMMs and pipelines them with the collectives; what remains exposed
        // is the first chunk of each, ~1/4 with TE's default 4 splits (estimate).
        if (t.tp_comm_overlap) tb.tp_comm_s *= 0.25;
    }
    // ---- expert parallel: all-to-all dispatch + combine, forward and backward.
    if (m.is_moe() && lay.ep > 1) {
        const double msg = tokens_mb * h * a * m.moe.top_k / (lay.sequence_parallel ? lay.tp : 1);
        const bool ep_crosses = lay.ep * lay.tp > gpn;
        const LinkCost l = ep_crosses ? inter : intra;
        const double one = l.latency_s * (lay.ep - 1) + msg * (lay.ep - 1) / lay.ep / l.bus_Bps;
        tb.ep_comm_s = micro_batches * max_layers * 4.0 * one;
        est.placement.ep_link = ep_crosses ? c.inter_node.id : c.intra_node.id;
        est.placement.ep_bus_Bps = l.bus_Bps;
    }
    // ---- pipeline: point-to-point activations each micro-batch each way, and
    // the bubble (p - 1)/v micro-batch slots (Narayanan et al. 2021, Sec. 2.2).
    if (lay.pp > 1) {
        const double msg = tokens_mb * h * a / lay.tp;  // scatter/gather optimization
        const double one = pp_link.latency_s + msg / pp_link.bus_Bps;
        tb.pp_comm_s = micro_batches * 2.0 * lay.vp * one;
        tb.bubble_s = (lay.pp - 1.0) / lay.vp * (per_mb + 2.0 * one);
        if (lay.schedule == Schedule::GPipe) tb.bubble_s = (lay.pp - 1.0) * (per_mb + 2.0 * one);
    }

    // ---- data parallel / ZeRO
    ParamCounts pc = count_params(m);
    const double layer_local = static_cast<double>(pc.attention + pc.mlp + pc.shared_experts) / lay.tp +
                               static_cast<double>(pc.experts) / (lay.tp * lay.ep) + static_cast<double>(pc.layer_norms + pc.router);
    // The critical stage's parameters: its layers plus the embedding (first stage)
    // or the LM head (last stage; on a single stage both).
    const double first_extra = static_cast<double>(pc.embedding) / lay.tp + static_cast<double>(pc.positions);
    const double last_extra = static_cast<double>(pc.lm_head) / lay.tp + static_cast<double>(pc.final_norm);
    const double stage_params = max_layers * layer_local + (lay.pp > 1 ? std::max(first_extra, last_extra) : first_extra + last_extra);
    const double trainable_local =
        full ? stage_params : max_layers * static_cast<double>(lora_params_per_layer(m, t.lora)) / lay.tp;
    const BytesPerParam bpp = bytes_per_trainable_param(t);
    const double grad_bytes = trainable_local * (t.method == Method::QLoRA ? 2.0 : bpp.gradients);
    if (lay.dp > 1) {
        // Hierarchical: reduce inside the node, then across nodes on each GPU's
        // NIC share with 1/dp_per_node of the data.
        auto dp_allreduce = [&](double bytes) {
            double tt = allreduce_s(bytes, dp_per_node, intra);
            if (dp_nodes > 1 && c.inter_node.bandwidth_Bps > 0) tt += allreduce_s(bytes / dp_per_node, dp_nodes, inter);
            return tt;
        };
        auto dp_allgather = [&](double bytes) {
            double tt = allgather_s(bytes, dp_per_node, intra);
            if (dp_nodes > 1 && c.inter_node.bandwidth_Bps > 0) tt += allgather_s(bytes / dp_per_node, dp_nodes, inter);
            return tt;
        };
        if (t.zero_stage >= 3) {
            // ZeRO-3 / FSDP: all-gather 16-bit weights for forward and again for
            // backward (one collective per wrapped layer), reduce-scatter
            // gradients, every micro-batch. Counted as exposed: the published
            // step times of PyTorch FSDP (llm-foundry MPT benchmarks, forward
            // prefetch off by default) match no effective overlap -- e.g. MPT-13B
            // on 8 x A100 at micro-batch 2 without recompute: 59.6 % MFU
            // measured, 59 % with the collectives exposed, 77 % if hidden.
            const double w16 = stage_params * 2.0;
            const double per_layer_latency = 3.0 * max_layers * (dp_nodes > 1 ? inter.latency_s : intra.latency_s);
            const double per_mb_comm = 2.0 * dp_allgather(w16) + (full || trainable_local > 0 ? dp_allgather(grad_bytes) : 0) + per_layer_latency;
            tb.dp_comm_s = micro_batches * per_mb_comm;
            tb.dp_exposed_s = tb.dp_comm_s;
        } else {
            // Gradients reduced once per step, bucketed and overlapped with the
            // last micro-batch's backward (DDP, Megatron --overlap-grad-reduce).
            // ZeRO-1/2 and Megatron's distributed optimizer reduce-scatter the
            // gradients and all-gather the updated 16-bit weights after the step;
            // that gather hides behind the next forward only with
            // --overlap-param-gather (comm_overlap).
            const double overlap = stage_bwd / clock;
            const double last_bucket = 25e6 / std::max(1.0, dp_crosses ? inter.bus_Bps : intra.bus_Bps);
            if (t.zero_stage >= 1) {
                auto dp_reducescatter = [&](double bytes) { return dp_allgather(bytes); };  // same volume
                const double rs = dp_reducescatter(grad_bytes);
                const double ag = dp_allgather(trainable_local * 2.0);
                tb.dp_comm_s = rs + ag;
                tb.dp_exposed_s = std::max(0.0, rs - overlap) + std::min(rs, last_bucket) +
                                  (t.tp_comm_overlap ? std::max(0.0, ag - stage_fwd / clock) : ag);
            } else {
                tb.dp_comm_s = dp_allreduce(grad_bytes);
                tb.dp_exposed_s = std::max(0.0, tb.dp_comm_s - overlap) + std::min(tb.dp_comm_s, last_bucket);
            }
        }
    }
    tb.communication_s = tb.tp_comm_s + tb.ep_comm_s + tb.pp_comm_s + tb.dp_exposed_s;

    // ---- optimizer step: memory-bound over the states each GPU updates.
    const double shard = t.zero_stage >= 1 ? std::max(1, lay.dp) : 1;
    const double updated = trainable_local / shard;
    // Bytes per updated parameter: Adam reads the gradient and reads + writes
    // the master copy and the states; the 16-bit weights are rewritten from the
    // master (or updated in place without one); gradient-norm clipping reads the
    // gradients once more and zeroing the gradient buffer writes them.
    const double state_bytes = 3.0 * bpp.gradients + 2.0 * (bpp.master + bpp.optimizer_states) +
                               (bpp.master > 0 ? std::min(bpp.weights, 2.0) : 2.0 * bpp.weights);
    if (t.optimizer_offload == Offload::None) {
        tb.optimizer_s = updated * state_bytes / hw.bw;
    } else {
        // ZeRO-Offload: CPU Adam (~1e9 parameters/s per node; Ren et al. 2021,
        // Sec. 5.1 order of magnitude) plus gradients down and weights up over PCIe.
        const double cpu_params_per_s = 1e9 / std::max(1, gpn);
        const double pcie = (c.gpu.pcie_gen >= 5 ? 50e9 : c.gpu.pcie_gen == 4 ? 25e9 : 12e9);
        tb.offload_s = updated / cpu_params_per_s + updated * 4.0 / pcie;
        if (t.param_offload != Offload::None)
            tb.offload_s += micro_batches * 2.0 * stage_params / shard * 2.0 / pcie;
        if (t.optimizer_offload == Offload::NVMe || t.param_offload == Offload::NVMe)
            tb.offload_s += updated * 16.0 / 3e9;  // ~3 GB/s NVMe per GPU: estimate
    }

    // ---- step without data stall; then the loader.
    double step = tb.compute_s + tb.communication_s + tb.bubble_s + tb.optimizer_s + tb.offload_s;
    if (run.loader_workers > 0 && run.worker_samples_per_s > 0) {
        // Every rank of a data-parallel replica loads the replica's samples.
        const double samples_per_gpu = static_cast<double>(t.micro_batch * t.grad_accum);
        double rate = run.loader_workers * run.worker_samples_per_s;
        if (run.storage_bytes_per_s > 0) {
            const double bytes = run.bytes_per_sample > 0 ? run.bytes_per_sample : 2.0 * static_cast<double>(t.seq_len);
            rate = std::min(rate, run.storage_bytes_per_s / gpn / bytes);
        }
        const double t_data = samples_per_gpu / rate;
        tb.data_s = std::max(0.0, t_data - step);  // the loader prefetches while the GPU works
    }
    step += tb.data_s;
    tb.step_s = step;

    // ---- throughput and utilization
    Throughput& th = est.throughput;
    const double tokens_step = static_cast<double>(t.global_batch()) * static_cast<double>(t.seq_len);
    th.tokens_per_s = tokens_step / step;
    th.samples_per_s = static_cast<double>(t.global_batch()) / step;
    th.model_flops_per_token = model_flops_per_token(m, t.seq_len);
    double recompute_flops = 0;
    if (t.recompute == Recompute::Full) recompute_flops = th.model_flops_per_token / 3.0;
    else if (t.recompute == Recompute::Selective && !t.flash_attention)
        recompute_flops = 4.0 * static_cast<double>(m.num_layers) * static_cast<double>(m.q_dim()) * static_cast<double>(t.seq_len);
    th.hardware_flops_per_token = th.model_flops_per_token + recompute_flops;
    th.peak_flops = hw.peak;
    const double gpus = c.num_gpus;
    th.model_tflops_per_gpu = th.model_flops_per_token * th.tokens_per_s / gpus / units::TFLOPS;
    th.hardware_tflops_per_gpu = th.hardware_flops_per_token * th.tokens_per_s / gpus / units::TFLOPS;
    th.mfu = th.model_tflops_per_gpu * units::TFLOPS / hw.peak;
    th.hfu = th.hardware_tflops_per_gpu * units::TFLOPS / hw.peak;

    // ---- scaling: the same per-GPU work without communication or bubble.
    est.single_gpu_step_s = tb.compute_s + tb.optimizer_s + tb.offload_s;
    est.scaling_efficiency = est.single_gpu_step_s / step;

    // ---- energy and cost
    CostEstimate& co = est.cost;
    // Board power under training load ~ 80 % of TDP (estimate; settable) and
    // node overhead ~ 0.9 x TDP per GPU: DGX A100 6.5 kW for 8 x 400 W GPUs,
    // DGX H100 10.2 kW for 8 x 700 W (hardware-facts.toml node entries).
    const double tdp = c.gpu.tdp_w > 0 ? c.gpu.tdp_w : 400.0;
    const double board = tdp * (run.utilization_power_fraction > 0 ? run.utilization_power_fraction : 0.8);
    const double overhead = run.node_overhead_w_per_gpu > 0 ? run.node_overhead_w_per_gpu : 0.9 * tdp;
    co.power_w = gpus * (board + overhead) * run.pue;
    if (run.tokens_to_train > 0) {
        co.train_time_s = run.tokens_to_train / th.tokens_per_s;
        co.gpu_hours = gpus * co.train_time_s / 3600.0;
        co.energy_kwh = co.power_w * co.train_time_s / 3.6e6;
        co.energy_cost_usd = co.energy_kwh * run.electricity_usd_per_kwh;
        if (run.rent_usd_per_gpu_hour > 0) co.rent_cost_usd = co.gpu_hours * run.rent_usd_per_gpu_hour;
        const double price = run.purchase_usd_per_gpu > 0 ? run.purchase_usd_per_gpu : c.gpu.price_usd;
        if (price > 0 && run.amortization_years > 0)
            co.purchase_cost_usd = price * gpus * co.train_time_s / (run.amortization_years * 365.25 * 86400.0);
    }
    return est;
}

}  // namespace trainplan
