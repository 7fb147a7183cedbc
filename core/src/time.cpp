#include "trainplan/time.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "trainplan/collectives.hpp"
#include "trainplan/memory.hpp"
#include "trainplan/policy.hpp"
#include "trainplan/sharding.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

// Large-GEMM fraction of dense peak in a short burst: the GPU's measured "Maximum
// Achievable Matmul FLOPS" fraction where the preset has one, else the policy default.
namespace {
double burst_matmul_fraction(const GpuSpec& g) { return g.matmul_efficiency > 0 ? g.matmul_efficiency : policy().gemm_efficiency; }
}  // namespace

double burst_matmul_flops(const GpuSpec& g) { return g.peak_flops(NumericFormat::BF16) * burst_matmul_fraction(g); }

double fp8_gemm_fraction(const GpuSpec& g) {
    return (g.fp8_matmul_efficiency > 0 ? g.fp8_matmul_efficiency : burst_matmul_fraction(g)) * power_limited_share(g);
}

double power_limited_share(const GpuSpec& g) {
    const double burst = burst_matmul_flops(g);
    // (parse_gpu_toml refuses a sustained rate above the burst one.)
    if (g.sustained_matmul_flops <= 0 || burst <= 0) return 1.0;
    return g.sustained_matmul_flops / burst;
}

Efficiencies efficiencies(const GpuSpec& g, AttentionKernel k) {
    // Every fallback is policy data (data/defaults.toml, with its source).
    const Policy& pol = policy();
    Efficiencies e;
    e.gemm = burst_matmul_fraction(g);
    e.hbm = g.memory_bandwidth_efficiency > 0 ? g.memory_bandwidth_efficiency : pol.hbm_efficiency;
    // Fused attention per architecture x kernel generation; an architecture
    // without a row takes the fallback row (architecture_warning() says so).
    const AttentionEfficiency a = pol.attention(g.architecture, k);
    e.attention_fwd = e.attention_bwd = a.value;
    e.attention_fallback = a.fallback;
    // The GEMM fraction is a short burst's at the boost clock. A training step's
    // dense GEMMs hold the board at its power limit, where the SM clock settles
    // lower: where the preset gives the power-saturated GEMM rate, GEMMs run at it
    // (power_limited_share; H200: 708.5 sustained of 841.9 burst TFLOP/s, fp8
    // about the same, 1288.7 of 1491.9). Fused attention keeps its published
    // utilisations (35-75 % of peak, well below a dense GEMM's draw); no
    // power-saturated attention figure exists.
    e.gemm *= power_limited_share(g);
    e.kernel_overhead_s = pol.kernel_overhead_s;
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
    // + attention.
    return 6.0 * matmul + attention_model_flops_per_token(m, seq_len);
}

double attention_model_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
    // 12 L (n_heads d_head) s, without causal savings (Chowdhery et al. 2022, PaLM,
    // Appendix B): the score and value matmuls of every query-key pair, forward 4
    // FLOPs per pair and head dimension, backward 8.
    return 12.0 * static_cast<double>(m.num_layers) * static_cast<double>(m.q_dim()) * static_cast<double>(seq_len);
}

double attention_window_share(const ModelSpec& m, std::int64_t seq_len) {
    const double s = static_cast<double>(seq_len), w = static_cast<double>(m.sliding_window);
    if (m.sliding_window <= 0 || w >= s || m.num_layers <= 0) return 1.0;
    // Causal pairs within the window, sum over i of min(i, w) = w s - w^2 / 2 (to
    // leading order), over all causal pairs, s^2 / 2.
    const double local = 2.0 * w / s - (w / s) * (w / s);
    const double L = static_cast<double>(m.num_layers);
    const double global = m.sliding_window_global_every > 0 ? std::floor(L / m.sliding_window_global_every) : 0.0;
    return (global + (L - global) * local) / L;
}

double tp_shard_dim_copies_per_pair(const TrainingSetup& t) {
    const ParallelLayout& lay = t.layout;
    if (lay.tp <= 1 || !lay.sequence_parallel || !policy().stack(t.stack).tp_shard_dim_copies) return 0.0;
    return 2.0 + (t.micro_batch > 1 ? 2.0 : 0.0);
}

bool adamw_runs_foreach(const TrainingSetup& t) {
    const bool frameworks_own = t.framework == Framework::DeepSpeed || t.framework == Framework::Megatron;
    return t.optimizer == OptimizerKind::AdamW && !frameworks_own && policy().stack(t.stack).optimizer_foreach;
}

bool fsdp2_layer_overlap(const TrainingSetup& t) {
    // Under the stack's own engine a ZeRO stage is its FSDP's: 3 full-shard, 2
    // shard-grad-op (reshard_after_forward=False) -- not under DeepSpeed or Megatron.
    const bool own_engine = t.framework != Framework::DeepSpeed && t.framework != Framework::Megatron;
    // (HYBRID_SHARD is full sharding inside the node: ZeRO-3 too.)
    return policy().stack(t.stack).fsdp2 && own_engine && (t.zero_stage == 2 || t.zero_stage == 3);
}

double overlap_contention(const GpuSpec& g) {
    const double ctas = policy().nccl_overlap_ctas;
    return g.sm_count > ctas ? g.sm_count / (g.sm_count - ctas) - 1.0 : 0.0;
}

namespace {

// How an attention kernel runs a layer's score and value matmuls: the share of
// the query-key pairs it computes and its backward's matmul work as a multiple of
// the forward's. FlashAttention skips the causally masked half of the blocks and
// its backward recomputes the scores, 5 matmuls to the forward's 2 (Dao 2023).
// Eager attention computes every pair, the masked ones too, and its backward two
// matmuls per forward one (the gradients of both operands).
struct AttnExecution {
    double causal_share;
    double backward_matmuls;
};
constexpr AttnExecution kFusedAttention{0.5, 2.5};
constexpr AttnExecution kEagerAttention{1.0, 2.0};

// The share of the convention's query-key pairs the run's attention computes: a
// fused kernel the causal half, and of it only what a sliding window keeps (it
// skips the blocks outside; transformers passes the model's window to flash-attn);
// eager attention every pair, masked ones included.
double executed_pair_share(const ModelSpec& m, const TrainingSetup& t) {
    if (!fused_attention_runs(t)) return kEagerAttention.causal_share;
    return kFusedAttention.causal_share * attention_window_share(m, t.seq_len);
}

// The head dimension a fused attention kernel's tiles run at: each kernel is
// compiled for a few head dimensions and a smaller one runs on the next larger
// instance, its missing columns predicated off but its matmul tiles as wide
// (the same MMA count per block). FlashAttention 1 (flash-attn v0.2.x
// fmha_api.cpp run_fmha_fwd: d <= 32 / 64 / 128, FMHA_kernel_traits<..., 128,
// ...> for all of 72-128); FlashAttention 2 (csrc/flash_attn/src/static_switch.h
// HEADDIM_SWITCH: multiples of 32 up to 256; flash_api.cpp head_size_rounded =
// round_multiple(head_size, 32)); FlashAttention 3 (hopper/flash_api.cpp
// round_up_headdim: 64, 96, 128, 192, 256). fp32 runs SDPA's memory-efficient
// kernel instead (make_hw): no rounding taken there.
double attention_tile_head_dim(const TrainingSetup& t, double d) {
    if (t.precision == Precision::FP32 || d <= 0) return d;
    const auto first_at_least = [d](std::initializer_list<double> sizes) {
        for (const double s : sizes)
            if (d <= s) return s;
        return d;
    };
    switch (t.attention_kernel) {
        case AttentionKernel::Flash1: return first_at_least({32, 64, 128});
        case AttentionKernel::Flash2: return d <= 256 ? 32.0 * std::ceil(d / 32.0) : d;
        case AttentionKernel::Flash3: return first_at_least({64, 96, 128, 192, 256});
    }
    return d;
}

struct Hw {
    double peak = 0;       // dense peak for the compute format
    double attn_peak = 0;  // attention runs in 16-bit even under fp8
    double gemm16 = 0;     // the GEMM fraction of attn_peak for GEMMs that stay 16-bit under fp8
    double bw = 0;         // effective HBM bytes/s
    Efficiencies eff;
    int sms = 108;
};

// One GEMM of m x k times k x n: roofline with shape-dependent efficiency --
// wave quantization of 128 x 128 output tiles over the SMs, and the per-tile
// prologue/epilogue amortized over the reduction depth k. The per-tile cost (64
// steps of k) is our estimate; checked against XLA's measured H100 (sm_90) bf16
// matmul table (tests/test_time.cpp): within 9 % (median 2.6 %) on the shapes
// of training, m x n >= 8M and k >= 1024; smaller problems run below the model
// (2048^3: 632 measured, 661 modelled TFLOP/s; k = 256 up to +50 %).
// std::ceil of a positive double, exactly (the baseline x86-64 target has no
// rounding instruction, and std::ceil is a slow software routine there): below
// 2^52 the truncation to an integer is exact; above, every double is already an
// integer (and NaN takes std::ceil too).
inline double ceil_positive(double x) {
    if (!(x < 4503599627370496.0)) return std::ceil(x);
    const double whole = static_cast<double>(static_cast<std::int64_t>(x));
    return whole < x ? whole + 1.0 : whole;
}

// `batch` GEMMs of that shape in one batched kernel (torch.bmm / matmul over
// leading dimensions): their tiles share the waves.
double gemm_s(double m, double n, double k, double act_bytes, const Hw& hw, double batch = 1) {
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
    const double flops = 2.0 * m * n * k * batch;
    const double tiles = ceil_positive(m / 128.0) * ceil_positive(n / 128.0) * batch;
    // The per-tile fixed cost equals 64 steps of k at the 16-bit rate; a format
    // with a faster tensor-core rate (fp8: twice) runs the main loop faster while
    // the fixed cost stays, so it counts as proportionally more depth.
    const double rate = hw.attn_peak > 0 && hw.peak > 0 ? hw.peak / hw.attn_peak : 1.0;
    const double t_memory = batch * act_bytes * (m * k + k * n + m * n) / hw.bw;
    // Split-K (cuBLAS / CUTLASS): an output with fewer tiles than SMs is computed
    // as `splits` slices of the reduction in parallel, each slice's fp32 partial
    // tiles written to a workspace and summed by a second kernel (read them all,
    // write the output). The library takes the split that runs fastest; one
    // slice is at least kMinSplitDepth deep. Without it a 512 x 512 x 4096 GEMM
    // (16 tiles on an H100's 132 SMs) would run at 84 TFLOP/s where XLA measured
    // 187 (tests/test_time.cpp).
    // The reduction's cost grows with the split and the compute's gain stops at one
    // full wave, so the candidates are the split that fills the SMs once and its
    // halves (and no split).
    constexpr double kMinSplitDepth = 256;
    const auto time_at = [&](double splits) {
        const double slices = tiles * splits;
        const double waves = ceil_positive(slices / hw.sms);
        const double wave_eff = slices / (waves * hw.sms);
        const double depth = k / splits;
        const double depth_eff = depth / (depth + 64.0 * rate);
        const double t_compute = flops / (hw.peak * hw.eff.gemm * wave_eff * depth_eff);
        const double t_reduce = splits > 1 ? batch * m * n * (2.0 * splits * 4.0 + act_bytes) / hw.bw + hw.eff.kernel_overhead_s : 0.0;
        return std::max(t_compute, t_memory) + t_reduce;
    };
    double best = time_at(1);
    if (2.0 * tiles <= hw.sms && k >= 2.0 * kMinSplitDepth) {
        // (Truncation is floor here: both quotients are positive.)
        for (auto splits = std::min(static_cast<std::int64_t>(k / kMinSplitDepth), static_cast<std::int64_t>(hw.sms / tiles)); splits >= 2;
             splits /= 2)
            best = std::min(best, time_at(static_cast<double>(splits)));
    }
    return best + hw.eff.kernel_overhead_s;
}

struct PassTimes {
    double fwd = 0, bwd = 0;  // one micro-batch
    double memory_bound = 0;  // the part of fwd + bwd limited by HBM bandwidth
    double selective_fwd = 0; // forward of the ops selective recompute repeats
    double per_op_fwd = 0;    // forward that per-op (torchtitan) recompute repeats
};

// What the time terms share.
struct TimeContext {
    const Scenario& s;
    const StepGraph& g;
    ShardPlan plan;
    TierCosts tiers;
    Hw hw;
    double clock = 1;        // sustained clock fraction
    double micro_batches = 1;
    double tokens_mb = 0;    // tokens of one micro-batch
    int max_layers = 0;      // layers on the critical stage (the last, unless the split counts the embedding / loss)
    StageParams crit;        // parameters per GPU on the critical stage
    BytesPerParam bpp;
    // What every op's time reads, looked up once per evaluation.
    double act_bytes = 2;    // activation_bytes_per_elem(precision)
    double sq = 0;           // sequence length
    bool sp = false;         // sequence parallelism in effect (tp > 1)
    bool crit_first = false; // the critical stage runs the embedding side (first stage)
    bool crit_last = true;   // the critical stage runs the head and loss (last stage)
    // Set per op by site_times: this GEMM is the first to read its input tensor
    // (fp8: the input's cast_transpose runs once however many GEMMs read it).
    mutable bool fp8_first_reader = false;
    [[nodiscard]] const LinkCost& link(Tier t) const { return t == Tier::InterNode ? tiers.inter : tiers.intra; }
    // A per-site count of the step graph summed over the critical stage.
    [[nodiscard]] double on_stage(const double (&per_site)[3]) const {
        return max_layers * per_site[static_cast<int>(Site::Layer)] + (crit_last ? per_site[static_cast<int>(Site::Last)] : 0.0) +
               (crit_first ? per_site[static_cast<int>(Site::First)] : 0.0);
    }
    // ZeRO-3's fetches of a per-site count per micro-batch: forward and backward of
    // the stage, and the recomputed forward of each checkpointed layer, which
    // fetches its weights again.
    [[nodiscard]] double fetched(const double (&per_site)[3]) const {
        const TrainingSetup& t = s.setup;
        const double rec = t.recompute == Recompute::Full ? recompute_layers(t, max_layers).recomputed : 0.0;
        return 2.0 * on_stage(per_site) + rec * per_site[static_cast<int>(Site::Layer)];
    }
    [[nodiscard]] const std::string& link_id(Tier t) const {
        static const std::string none;
        return t == Tier::Local ? none : t == Tier::InterNode ? s.cluster.inter_node.id : s.cluster.intra_node.id;
    }
};

// One op, one micro-batch, forward and backward.
void op_times(const TimeContext& c, const OpDef& o, PassTimes& p) {
    const TrainingSetup& t = c.s.setup;
    const ModelSpec& m = c.s.model;
    const Hw& hw = c.hw;
    const double tp = t.layout.tp;
    const bool sp = c.sp;
    const double tokens = c.tokens_mb;
    const double sq = c.sq;
    const double a = c.act_bytes;
    double fwd = 0, bwd = 0;
    switch (o.kind) {
        case OpKind::Gemm:
        case OpKind::LoraGemm:
        case OpKind::Router: {
            // Under fp8-mixed a GEMM runs in fp8 unless Transformer Engine leaves it in
            // 16 bits (the LM head, LoRA adapters, the MoE router: OpDef::fp8_gemm); one
            // decision for its operand bytes, its rate (the 16-bit peak and GEMM fraction)
            // and TE's casts.
            const bool fp8_mixed = t.precision == Precision::FP8Mixed;
            const bool fp8 = fp8_mixed && o.fp8_gemm;
            const double gemm_bytes = fp8 ? 1.0 : a;
            Hw hw16;
            const Hw* gp = &hw;
            if (fp8_mixed && !fp8) {
                hw16 = hw;
                hw16.peak = hw.attn_peak;
                hw16.eff.gemm = hw.gemm16;
                gp = &hw16;
            }
            const Hw& g_hw = *gp;
            double mm = tokens * o.gemm_rows_per_token;
            double n = o.gemm_n, k = o.gemm_k;
            if (o.split == Split::TensorParallel) {
                if (o.row_parallel) k /= tp; else n /= tp;
            }
            if (o.gemm_groups > 1) {
                // Routed experts, balanced routing: each of E experts sees tokens x top_k / E rows.
                const double experts = o.gemm_groups;
                const double per_expert = mm / experts;
                fwd = experts * gemm_s(per_expert, n, k, gemm_bytes, g_hw);
                bwd = experts * (gemm_s(per_expert, k, n, gemm_bytes, g_hw) +
                                 (o.trainable_weight ? gemm_s(k, n, per_expert, gemm_bytes, g_hw) : 0));
                break;
            }
            if (o.split == Split::Replicated && sp && o.kind != OpKind::LoraGemm) mm /= tp;
            fwd = gemm_s(mm, n, k, gemm_bytes, g_hw);
            // Backward: the input gradient, and the weight gradient when trained.
            bwd = gemm_s(mm, k, n, gemm_bytes, g_hw) + (o.trainable_weight ? gemm_s(k, n, mm, gemm_bytes, g_hw) : 0);
            if (fp8) {
                // Transformer Engine (delayed scaling) around every fp8 GEMM, as
                // separate memory-bound kernels: cast_transpose of the input (read
                // 16-bit, write fp8 and its fp8 transpose for the weight gradient),
                // once per input tensor; in backward the same for the output's
                // gradient; and the weight cast to fp8 with its transpose (read the
                // weight, write 2 B), per micro-batch -- Megatron passes
                // is_first_microbatch, so TE casts it once per step there.
                // Megatron-Core's TE layers fuse the cast into the kernel that
                // produces the tensor (LayerNormLinear / LayerNormMLP: the norm and
                // the activation write fp8; backward's dact-cast-transpose): only
                // the transpose remains (read 1 B, write 1 B) for inputs coming
                // from a norm or the activation and for the MLP input GEMM's
                // output gradient.
                const bool megatron = c.s.setup.framework == Framework::Megatron;
                const bool in_fused = megatron && o.role != OpRole::OProj;
                const bool grad_fused = megatron && (o.role == OpRole::GateUpProj || o.role == OpRole::UpProj);
                const double in = c.fp8_first_reader ? mm * k * (in_fused ? 2.0 : a + 2.0) : 0.0;
                const double grad = mm * n * (grad_fused ? 2.0 : a + 2.0);
                const double w_bytes = c.s.setup.framework == Framework::PyTorchAMP ? 4.0 : 2.0;
                const double w_cast = k * n * (w_bytes + 2.0) /
                                      (c.s.setup.framework == Framework::Megatron ? c.micro_batches : 1.0);
                const double cast_fwd = (in + w_cast) / hw.bw + (c.fp8_first_reader ? 2 : 1) * hw.eff.kernel_overhead_s;
                const double cast_bwd = grad / hw.bw + hw.eff.kernel_overhead_s;
                fwd += cast_fwd;
                bwd += cast_bwd;
                p.memory_bound += cast_fwd + cast_bwd;
            }
            break;
        }
        case OpKind::FlashAttention: {
            // The kernel's tiles run at its compiled head dimension (a d = 96 head
            // on FlashAttention 1's d = 128 kernel takes 128/96 of the time).
            const double d = static_cast<double>(m.head_dim);
            const double tile = d > 0 ? attention_tile_head_dim(t, d) / d : 1.0;
            const double flops = o.flops_per_token_sq * sq * tokens / tp * executed_pair_share(m, t) * tile;
            fwd = flops / (hw.attn_peak * hw.eff.attention_fwd) + hw.eff.kernel_overhead_s;
            bwd = kFusedAttention.backward_matmuls * flops / (hw.attn_peak * hw.eff.attention_bwd) + hw.eff.kernel_overhead_s;
            break;
        }
        case OpKind::AttentionScores:
        case OpKind::AttentionValues: {
            // One batched GEMM over the micro-batch's heads, full (no causal
            // skipping): scores q k^T are s x s with depth d_head, the values
            // p v s x d_head with depth s; the heads' tiles fill the SMs together.
            const double heads = static_cast<double>(m.num_heads) / tp * static_cast<double>(t.micro_batch);
            const double d = static_cast<double>(m.head_dim);
            fwd = o.kind == OpKind::AttentionScores ? gemm_s(sq, sq, d, a, hw, heads) : gemm_s(sq, d, sq, a, hw, heads);
            bwd = kEagerAttention.backward_matmuls * fwd;
            break;
        }
        case OpKind::Lookup:
            break;  // embedding row gather: negligible
        default: {
            // Memory-bound ops: bytes through HBM (per token, and per token per
            // key for softmax / dropout over eager attention scores); backward
            // reads and writes bwd_hbm_factor times as much.
            double bytes = o.hbm_bytes_per_token * tokens + o.hbm_bytes_per_token_sq * sq * tokens;
            if (!o.full_on_each_tp_rank && (o.split == Split::TensorParallel || sp)) bytes /= tp;
            fwd = bytes / hw.bw + hw.eff.kernel_overhead_s;
            bwd = o.bwd_hbm_factor * bytes / hw.bw + hw.eff.kernel_overhead_s;
            p.memory_bound += fwd + bwd;
            break;
        }
    }
    if (o.selective_recompute) p.selective_fwd += fwd;
    if (o.per_op_recompute > 0) p.per_op_fwd += o.per_op_recompute * fwd;
    p.fwd += fwd;
    p.bwd += bwd;
}

// All ops in one pass: forward / backward per site (First, Layer, Last).
struct SiteTimes {
    PassTimes site[3];
};
SiteTimes site_times(const TimeContext& c) {
    SiteTimes st;
    int seen[16];
    int n_seen = 0;
    for (const OpDef& o : c.g.ops) {
        c.fp8_first_reader = false;
        if ((o.kind == OpKind::Gemm || o.kind == OpKind::LoraGemm || o.kind == OpKind::Router) && o.input >= 0) {
            const int in = o.input;
            c.fp8_first_reader = std::find(seen, seen + n_seen, in) == seen + n_seen;
            if (c.fp8_first_reader && n_seen < 16) seen[n_seen++] = in;
        }
        op_times(c, o, st.site[static_cast<int>(o.site)]);
    }
    return st;
}

Hw make_hw(const Scenario& s) {
    const ClusterSpec& c = s.cluster;
    const TrainingSetup& t = s.setup;
    Hw hw;
    // FlashAttention kernels exist for fp16/bf16 only; in fp32 PyTorch's SDPA
    // runs the memory-efficient kernel, which performs like FlashAttention v1.
    hw.eff = efficiencies(c.gpu, t.precision == Precision::FP32 ? AttentionKernel::Flash1 : t.attention_kernel);
    NumericFormat fmt = NumericFormat::BF16;
    switch (t.precision) {
        // PyTorch runs fp32 matmuls on CUDA cores unless TF32 is enabled
        // (torch.backends.cuda.matmul.allow_tf32 = False since 1.12).
        case Precision::FP32: fmt = t.tf32 && c.gpu.tf32_flops > 0 ? NumericFormat::TF32 : NumericFormat::FP32; break;
        case Precision::FP16Mixed: fmt = NumericFormat::FP16; break;
        case Precision::FP8Mixed: fmt = NumericFormat::FP8; break;
        default: fmt = NumericFormat::BF16; break;
    }
    hw.peak = c.gpu.peak_flops(fmt);
    hw.attn_peak = c.gpu.peak_flops(fmt == NumericFormat::FP8 ? NumericFormat::BF16 : fmt);
    // CUDA-core SGEMM: no tensor-core tiling limits; its own measured large-GEMM
    // fraction where the preset has one (sgemm_efficiency), else the tensor-core one.
    if (t.precision == Precision::FP32) hw.attn_peak = hw.peak;
    if (fmt == NumericFormat::FP32 && c.gpu.sgemm_efficiency > 0) hw.eff.gemm = c.gpu.sgemm_efficiency;
    // The 16-bit rate, kept for the GEMMs that stay 16-bit under fp8 (op_times).
    hw.gemm16 = hw.eff.gemm * s.calibration.gemm;
    // FP8 GEMMs reach a smaller share of their (doubled) peak than bf16 ones where the
    // FP8 MAMF is measured (fp8_matmul_efficiency); at the power limit they settle by the
    // bf16 share (H200: bf16 708.5 of 841.9 = 0.84, fp8 1,288.7 of 1,491.9 = 0.86).
    if (fmt == NumericFormat::FP8 && c.gpu.fp8_matmul_efficiency > 0) hw.eff.gemm = fp8_gemm_fraction(c.gpu);
    // Calibration hook (calibrate.hpp): multipliers fitted to measured runs.
    hw.eff.gemm *= s.calibration.gemm;
    hw.eff.attention_fwd *= s.calibration.attention;
    hw.eff.attention_bwd *= s.calibration.attention;
    hw.eff.hbm *= s.calibration.hbm;
    hw.bw = c.gpu.memory_bandwidth_Bps * hw.eff.hbm;
    hw.sms = c.gpu.sm_count > 0 ? c.gpu.sm_count : 108;
    return hw;
}

// What the critical stage computes in one micro-batch: its forward and its
// backward (recompute apart), and one of its layers' forward and backward with
// the recompute that layer's backward runs (what FSDP2's per-layer prefetch and
// reductions overlap: data_parallel_terms).
struct StagePasses {
    double fwd = 0, bwd = 0;
    double layer_fwd = 0, layer_bwd = 0;
};

// ---- compute per micro-batch on the critical (most-loaded) stage: its layers,
// the head side (final norm, LM head, loss), and the embedding side when the
// one stage holds both ends.
void compute_terms(const TimeContext& c, TimeEstimate& est, StagePasses& passes) {
    double& stage_fwd = passes.fwd;
    double& stage_bwd = passes.bwd;
    const TrainingSetup& t = c.s.setup;
    const SiteTimes st = site_times(c);
    const PassTimes& lt = st.site[static_cast<int>(Site::Layer)];
    const PassTimes head = c.crit_last ? st.site[static_cast<int>(Site::Last)] : PassTimes{};
    const PassTimes emb = c.crit_first ? st.site[static_cast<int>(Site::First)] : PassTimes{};
    const double L = c.max_layers;
    stage_fwd = L * lt.fwd + head.fwd + emb.fwd;
    stage_bwd = L * lt.bwd + head.bwd + emb.bwd;
    // Recompute repeats the forward of the layers full recompute checkpoints
    // (all, or per --recompute-method), or the ops the graph marks (selective, per-op).
    const double rec_layers = recompute_layers(t, c.max_layers).recomputed;
    double stage_rec = 0;
    if (t.recompute == Recompute::Full) stage_rec = rec_layers * lt.fwd;
    if (t.recompute == Recompute::Selective) stage_rec = L * lt.selective_fwd;
    if (t.recompute == Recompute::PerOp) stage_rec = L * lt.per_op_fwd;
    double dequant = 0;  // bandwidth-bound, like the element-wise ops: not stretched by a lowered clock
    if (t.method == Method::QLoRA) {
        // bitsandbytes dequantizes every 4-bit weight to 16-bit for each matmul
        // that uses it (forward, and the input-gradient GEMM in backward): read the
        // 4-bit weight and its constants, write 16 bits, and the GEMM reads them
        // back. auto-gptq (GPTQ bases) dequantizes with separate torch ops
        // (data/defaults.toml [qlora]) in forward only: autograd keeps the
        // dequantized matrix for the input gradient.
        const bool gptq = t.qlora.quant == QuantType::GPTQ;
        const StageParams one = stage_params(c.g, c.plan, 1, false, false);
        // (auto-gptq's torch ops run off PyTorch's vectorized path: at a share of the bandwidth.)
        const Policy& qp = policy();
        const double per_param = (gptq ? qp.gptq_dequant_bytes_per_param / qp.gptq_dequant_bandwidth_share
                                       : frozen_linear_bytes(t) + 2.0) + 2.0;
        const double per_pass = (one.frozen_linear_dense + one.frozen_linear_expert) * per_param / c.hw.bw;
        stage_fwd += L * per_pass;
        if (!gptq) stage_bwd += L * per_pass;
        if (t.recompute == Recompute::Full) stage_rec += rec_layers * per_pass;
        dequant = L * per_pass * (gptq ? 1 : 2) + (t.recompute == Recompute::Full ? rec_layers * per_pass : 0.0);
    }
    // Megatron without gradient accumulation fusion (--no-gradient-accumulation-fusion):
    // each weight-gradient GEMM writes a 16-bit .grad and Megatron's DDP hook adds it
    // to the fp32 main_grad (`param.main_grad.add_(param.grad.data)`: read 2 B, read and
    // write 4 B) for every trainable parameter of the stage, every micro-batch; with
    // the fusion the GEMM accumulates into main_grad itself (megatron/core
    // tensor_parallel/layers.py, fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32).
    double unfused_accum = 0;
    if (t.framework == Framework::Megatron && !t.grad_accum_fusion) {
        unfused_accum = c.crit.trainable() * (2.0 + 4.0 + 4.0) / c.hw.bw;
        stage_bwd += unfused_accum;
    }
    // torch.autocast over fp32 weights (framework pytorch-amp without FSDP, whose
    // units are gathered in the 16-bit param_dtype): every trained matmul weight is
    // cast to 16 bits in each forward (autocast's cast cache holds the copy for
    // one autocast region: at::autocast::cached_cast; a recomputed layer casts
    // again), read 4 B and write 2 B per element, and the cast's backward turns
    // the 16-bit weight gradient into fp32 (read 2, write 4), which AccumulateGrad
    // adds into .grad (read 4 + 4, write 4) from the step's second micro-batch on.
    double autocast_casts = 0;
    if (t.framework == Framework::PyTorchAMP && c.bpp.weights >= 4.0 && t.fsdp == FsdpStrategy::None && t.zero_stage < 3 &&
        (t.precision == Precision::BF16Mixed || t.precision == Precision::FP16Mixed)) {
        double per_site[3] = {0, 0, 0};
        for (const OpDef& o : c.g.ops) {
            if (o.kind != OpKind::Gemm || !o.trainable_weight) continue;
            // Each rank's share of the weight, as stage_params divides its buckets.
            per_site[static_cast<int>(o.site)] += o.gemm_n * o.gemm_k * std::max(1, o.gemm_groups) /
                                                  c.plan.weight_divisor(WeightSums::bucket(o.weight));
        }
        const double stage_elems = c.on_stage(per_site);
        const double accumulate = c.micro_batches > 1 ? (c.micro_batches - 1.0) / c.micro_batches : 0.0;
        const double fwd_cast = stage_elems * 6.0 / c.hw.bw;
        const double bwd_cast = stage_elems * (6.0 + 12.0 * accumulate) / c.hw.bw;
        const double rec_cast = t.recompute == Recompute::Full ? rec_layers * per_site[static_cast<int>(Site::Layer)] * 6.0 / c.hw.bw : 0.0;
        stage_fwd += fwd_cast;
        stage_bwd += bwd_cast;
        stage_rec += rec_cast;
        autocast_casts = fwd_cast + bwd_cast + rec_cast;
    }
    // A lowered SM clock (thermal / power throttling) stretches the math, not the
    // memory-bound (HBM/GDDR-bandwidth) part: memory clocks are not throttled with the SMs.
    const double memory_bound =
        L * lt.memory_bound + (t.recompute == Recompute::Full ? 0.5 * rec_layers * lt.memory_bound : 0.0) + unfused_accum + autocast_casts;
    const double stage = stage_fwd + stage_bwd + stage_rec;
    passes.layer_fwd = lt.fwd;
    passes.layer_bwd = lt.bwd + (L > 0 ? stage_rec / L : 0.0);
    // (An unbounded stage -- a zero bandwidth or peak -- stays unbounded, not inf - inf.)
    const double clocked = std::isfinite(stage) ? std::max(0.0, stage - memory_bound - dequant) : stage;
    const double gpu_mb = std::isfinite(stage) ? clocked / c.clock + (stage - clocked) : stage / c.clock;
    // The host issues the micro-batch's kernels while the GPU runs the ones
    // already queued: forward (and the forward repeated by recompute) from
    // Python, backward from the autograd engine. The queue lets the host run
    // ahead, so the GPU waits only when issuing takes longer than running.
    const double stage_launches = c.on_stage(c.g.launches);
    const double backward_launches = stage_launches - c.on_stage(c.g.forward_only_launches);
    double rec_launches = 0;
    if (t.recompute == Recompute::Full) rec_launches = rec_layers * c.g.launches[static_cast<int>(Site::Layer)];
    const Policy& pol = policy();
    // DeepSpeed ZeRO-3 runs Python hooks around every module that owns weights: before
    // its forward and its backward it fetches the module's parameters (all-gather,
    // events, bookkeeping) and after them releases them, on every rank, however many
    // ranks there are (runtime/zero/parameter_offload.py, partitioned_param_coordinator.py);
    // the recomputed forward of a checkpointed layer fetches them again.
    const double hooks_mb = runs_deepspeed_zero3(t) ? c.fetched(c.g.weighted_modules) * pol.zero3_module_hook_s : 0.0;
    const double host_mb =
        (stage_launches + rec_launches) * pol.forward_launch_s + backward_launches * pol.backward_launch_s + hooks_mb;
    const double per_mb = std::max(gpu_mb, host_mb);
    TimeBreakdown& tb = est.time;
    if (t.activation_offload) {
        // Activation offload: the stage's saved activations go to the host in
        // forward and come back in backward over PCIe, overlapped with the
        // micro-batch's compute; what does not fit under it is exposed.
        const ParallelLayout& lay = t.layout;
        const double bytes = stored_layers_bytes(c.g, t, c.max_layers, c.sq, static_cast<double>(t.micro_batch), lay.tp, c.sp);
        const double copy = 2.0 * bytes / policy().pcie_bytes_per_s(c.s.cluster.gpu.pcie_gen);
        tb.offload_s += c.micro_batches * std::max(0.0, copy - per_mb);
    }
    tb.compute_s = c.micro_batches * per_mb;
    tb.memory_bound_s = c.micro_batches * memory_bound;
    tb.recompute_s = c.micro_batches * stage_rec * (stage > 0 && std::isfinite(stage) ? gpu_mb / stage : 1.0 / c.clock);
    tb.thermal_s = c.micro_batches * clocked * (1.0 / c.clock - 1.0);
    tb.host_s = std::isfinite(gpu_mb) ? c.micro_batches * (per_mb - gpu_mb) : 0.0;
    tb.zero3_hooks_s = c.micro_batches * hooks_mb;
}

// ---- context parallelism (Megatron-Core docs/source/api-guide/
// context_parallel.rst; ring attention, Liu et al. 2023). Each of the cp ranks
// stores the K and V of its seq / cp tokens; the all-gather of K/V for forward
// runs as cp - 1 point-to-point ring steps, each overlapped with the attention
// of the block already there. Backward gathers K/V again and reduce-scatters
// their gradients (the docs: "stores the KV of a sequence chunk in forward and
// gathers KV again in backward"): twice the bytes per step. GQA exchanges only
// the KV heads. Each step hides behind one block's attention (1/cp of the
// layer's: the 2 x cp-chunk split balances the causal mask, so the blocks are
// equal); what a step takes beyond that block is exposed.
void context_parallel_terms(const TimeContext& c, TimeEstimate& est) {
    const TrainingSetup& t = c.s.setup;
    const ParallelLayout& lay = t.layout;
    const LinkCost& link = c.link(c.plan.cp_group.tier);
    double attn_fwd = 0, attn_bwd = 0;  // one layer's fused attention, one micro-batch
    for (const OpDef& o : c.g.ops) {
        if (o.site != Site::Layer || o.kind != OpKind::FlashAttention) continue;
        PassTimes p;
        op_times(c, o, p);
        attn_fwd += p.fwd;
        attn_bwd += p.bwd;
    }
    // K and V of the rank's tokens, the KV heads split over TP, in 16 bits
    // (attention runs in 16-bit even under fp8).
    const double kv_bytes = c.tokens_mb * 2.0 * static_cast<double>(c.s.model.kv_dim()) / lay.tp * 2.0;
    const double steps = lay.cp - 1.0;
    const double fwd_step = link.latency_s + kv_bytes / link.bus_Bps;
    const double bwd_step = link.latency_s + 2.0 * kv_bytes / link.bus_Bps;
    const double fwd_passes = 1.0 + (t.recompute == Recompute::Full ? 1.0 : 0.0);
    const double per_layer = fwd_passes * steps * fwd_step + steps * bwd_step;
    const double exposed = fwd_passes * steps * std::max(0.0, fwd_step - attn_fwd / lay.cp / c.clock) +
                           steps * std::max(0.0, bwd_step - attn_bwd / lay.cp / c.clock);
    TimeBreakdown& tb = est.time;
    tb.cp_comm_s = c.micro_batches * c.max_layers * per_layer;
    tb.cp_exposed_s = c.micro_batches * c.max_layers * exposed;
    est.placement.cp_link = c.link_id(c.plan.cp_group.tier);
    est.placement.cp_Bps = link.bus_Bps;
}

// Whether TE Userbuffers can overlap this TP group's collectives (see below).
bool tp_overlap_possible(const TimeContext& c) {
    return c.plan.tp_group.tier != Tier::InterNode && c.s.cluster.intra_node.p2p;
}

// Bytes per gradient element as the data-parallel reduction moves it: the
// dtype the gradients are kept in (the QLoRA adapters' own), or 16 bits when
// the run reduces them in bf16 (Megatron --grad-reduce-in-bf16).
double reduced_grad_elem_bytes(const TimeContext& c) {
    const TrainingSetup& t = c.s.setup;
    const double kept = t.method == Method::QLoRA ? qlora_adapter_bytes(t) : c.bpp.gradients;
    return t.grad_reduce_bf16 ? std::min(kept, 2.0) : kept;
}

// ---- tensor parallel, expert parallel and pipeline communication.
void model_parallel_terms(const TimeContext& c, TimeEstimate& est) {
    const TrainingSetup& t = c.s.setup;
    const ParallelLayout& lay = t.layout;
    const ShardPlan& plan = c.plan;
    TimeBreakdown& tb = est.time;
    Placement& pl = est.placement;
    const LinkCost& tp_link = c.link(plan.tp_group.tier);
    const LinkCost& pp_link = c.link(plan.pp_group.tier);
    const LinkCost& ep_link = c.link(plan.ep_group.tier);
    pl.tp_link = lay.tp > 1 ? c.link_id(plan.tp_group.tier) : "";
    pl.pp_link = lay.pp > 1 ? c.link_id(plan.pp_group.tier) : "";
    pl.tp_bus_Bps = lay.tp > 1 ? tp_link.bus_Bps : 0;
    pl.pp_Bps = lay.pp > 1 ? pp_link.bus_Bps : 0;
    const bool sp = lay.sequence_parallel;
    // The collectives each layer's ops trigger, once forward and once backward:
    //  - TP: the row-parallel outputs' all-reduce (all-gather + reduce-scatter
    //    pairs with SP, same volume), again when full recompute repeats the
    //    forward (Megatron-LM; Korthikanti et al. Sec. 4.2.2). Not overlapped.
    //  - EP: all-to-all dispatch and combine of the routed copies.
    double tp_s = 0, ep_s = 0;
    // Share of the stage's layers whose forward (and its TP collectives) full recompute repeats.
    const double rec_share = c.max_layers > 0 ? static_cast<double>(recompute_layers(t, c.max_layers).recomputed) / c.max_layers : 0.0;
    // DTensor's sequence-parallel collectives gather and scatter along the sequence
    // dimension through a full-size copy each (stack tp_shard_dim_copies): the
    // reduce-scatter's input always, the all-gather's output unless the local batch
    // is 1 (a view then); a gather's backward is a reduce-scatter and the other way
    // round, so each pass copies the same. A read and a write of the tensor in HBM,
    // on the compute stream beside the collective.
    const double copies_per_pair = tp_shard_dim_copies_per_pair(t);
    for (const OpDef& o : c.g.ops) {
        if (o.site != Site::Layer) continue;
        for (const CollectiveDef& col : o.collectives) {
            const double msg = c.tokens_mb * col.bytes_per_token;
            if (col.kind == CollectiveKind::TensorParallel && lay.tp > 1)
                tp_s += (2.0 + rec_share) * (allreduce_s(msg, lay.tp, tp_link) + copies_per_pair * msg / c.hw.bw);
            else if (col.kind == CollectiveKind::ExpertAllToAll && lay.ep > 1)
                ep_s += 2.0 * alltoall_s(msg / (sp ? lay.tp : 1), lay.ep, ep_link);
        }
    }
    // A TP plan that keeps the per-head q / k norms unsharded (stack
    // tp_gathers_qk_norm) all-gathers the normed q and k along the head dimension
    // each forward (recomputed ones too), each with the chunk + cat copy of a gather
    // along a dimension other than 0.
    if (lay.tp > 1 && tp_gathers_qk(c.s.model, t)) {
        const ModelSpec& m = c.s.model;
        const double q = c.tokens_mb * static_cast<double>(m.q_dim()) * c.act_bytes;
        const double k = c.tokens_mb * static_cast<double>(m.kv_dim()) * c.act_bytes;
        tp_s += (1.0 + rec_share) * (allgather_s(q, lay.tp, tp_link) + allgather_s(k, lay.tp, tp_link) + 2.0 * (q + k) / c.hw.bw);
    }
    tb.tp_comm_s = c.micro_batches * c.max_layers * tp_s;
    // Megatron-Core --tp-comm-overlap: only the first chunk of each split GEMM's
    // collective stays exposed (data/defaults.toml [overlap]). Its backend,
    // Transformer Engine's Userbuffers, maps the TP peers' buffers with CUDA
    // multicast or IPC handles: a TP group inside one node with peer access only
    // (TransformerEngine issue #1071: "only possible with single-node tensor-
    // parallelism"; IPC needs P2P). Elsewhere the flag changes nothing for TP.
    if (t.tp_comm_overlap && tp_overlap_possible(c)) tb.tp_comm_s *= policy().tp_comm_exposed_fraction;
    if (ep_s > 0) {
        tb.ep_comm_s = c.micro_batches * c.max_layers * ep_s;
        pl.ep_link = c.link_id(plan.ep_group.tier);
        pl.ep_bus_Bps = ep_link.bus_Bps;
    }
    if (lay.cp > 1) context_parallel_terms(c, est);
    // ---- pipeline: point-to-point activations each micro-batch each way, and
    // the bubble (p - 1)/v micro-batch slots (Narayanan et al. 2021, Sec. 2.2).
    if (lay.pp > 1) {
        const double h = static_cast<double>(c.s.model.hidden);
        const double msg = c.tokens_mb * h * activation_bytes_per_elem(t.precision) / lay.tp;  // scatter/gather optimization
        const double one = pp_link.latency_s + msg / pp_link.bus_Bps;
        const double per_mb = tb.compute_s / c.micro_batches;
        tb.pp_comm_s = c.micro_batches * 2.0 * lay.vp * one;
        tb.bubble_s = (lay.pp - 1.0) / lay.vp * (per_mb + 2.0 * one);
        if (lay.schedule == Schedule::GPipe) tb.bubble_s = (lay.pp - 1.0) * (per_mb + 2.0 * one);
        // Tied embeddings: the first stage's input embedding and the last stage's
        // output layer are two copies of one vocab-parallel matrix, whose
        // gradients the two stages all-reduce once a step after the last
        // backward, before the optimizer, nothing left to overlap it: Megatron's
        // embedding group (finalize_model_grads -> _allreduce_embedding_grads on
        // main_grad; allreduce_word_embedding_grads before Core), DeepSpeed's
        // pipeline engine (_exec_reduce_tied_grads on the fp32 accumulated
        // gradient under bf16). The pair sits pp - 1 stages apart, on the
        // pipeline's tier. The matrix and whether it trains are the graph's
        // (the copy stage_params counts on the last stage).
        const WeightSums& head = c.g.weights[static_cast<int>(Site::Last)];
        if (head.tied_copy > 0 && head.tied_copy_trainable) {
            const double bytes = head.tied_copy / lay.tp * reduced_grad_elem_bytes(c);
            tb.tied_embedding_s = allreduce_s(bytes, 2, pp_link);
            tb.pp_comm_s += tb.tied_embedding_s;
        }
    }
}

// ---- data parallel / ZeRO / FSDP. Bytes per rank follow the NCCL ring
// formulas on each tier (collectives.hpp); a group spanning nodes crosses the
// network with 1/(ranks per node) of the data on each GPU's NIC share, while
// the rest moves over NVLink at the same time (see dp_allgather below).
void data_parallel_terms(const TimeContext& c, TimeEstimate& est, const StagePasses& passes) {
    const double stage_fwd = passes.fwd, stage_bwd = passes.bwd;
    const TrainingSetup& t = c.s.setup;
    const ShardPlan& plan = c.plan;
    const ClusterSpec& cl = c.s.cluster;
    TimeBreakdown& tb = est.time;
    const LinkCost& intra = c.tiers.intra;
    const LinkCost& inter = c.tiers.inter;
    // The gradient group is dp x cp (context-parallel ranks share the weights).
    const bool reduces = plan.dp_group.size > 1;
    est.placement.dp_link = reduces ? c.link_id(plan.dp_group.tier) : "";
    est.placement.dp_bus_Bps = reduces ? c.link(plan.dp_group.tier).bus_Bps : 0;
    if (!reduces) return;
    const bool full = t.method == Method::Full;
    const double trainable = c.crit.trainable();
    // Weights no pass runs on text batches (an image encoder) are never gathered,
    // and DeepSpeed reduces only what its gradient hooks see: none of theirs.
    // (A flat gradient buffer, Megatron's or torch DDP's, reduces them as zeros.)
    auto reduced_of = [&](const StageParams& p) { return p.trainable() - (runs_deepspeed_zero(t) || plan.gathers_weights ? p.idle_trainable : 0.0); };
    const double reduced = reduced_of(c.crit);
    const double grad_bytes = reduced * reduced_grad_elem_bytes(c);
    // Parameters gather in the compute dtype, FP8 with fp8_params (memory.hpp).
    const double gather_elem = parameter_gather_bytes(t);
    const double w16 = gathered_bytes(t, c.crit);
    const int per_node = plan.dp_group.per_node;
    const int nodes = cl.inter_node.bandwidth_Bps > 0 ? plan.dp_group.nodes : 1;
    double intra_bytes = 0, inter_bytes = 0;  // per rank, one pass
    // Collectives over the whole data-parallel group, `times` of `bytes` each. A
    // group spanning nodes runs one NCCL ring (all-gather and reduce-scatter only
    // run as rings: ring_latency_s) whose chunks flow through its NVLink and its
    // network hops at once: each rank moves its share over NVLink (per_node - 1 of
    // per_node parts) while its NIC carries the 1/per_node of the data that crosses
    // nodes, and the slower of the two paces the ring -- not their sum. NCCL's
    // measured multi-node busbw is NIC-bound, per_node x the NIC's share: H100 RS at
    // 360 GB/s on 4 nodes of 8 GPUs and 8 x 400 Gb/s (NVIDIA/nccl#1229), about
    // 8 x 45 GB/s. (Separate collectives, as HYBRID_SHARD's below, add up.)
    auto dp_allreduce = [&](double bytes, double times = 1) {
        intra_bytes += times * allreduce_bytes(bytes, per_node);
        inter_bytes += times * allreduce_bytes(bytes / per_node, nodes);
        return times * std::max(allreduce_s(bytes, per_node, intra), allreduce_s(bytes / per_node, nodes, inter));
    };
    // One all-gather (or reduce-scatter) ring over the group: the slower tier paces it.
    auto gather_ring_s = [&](double bytes) { return std::max(allgather_s(bytes, per_node, intra), allgather_s(bytes / per_node, nodes, inter)); };
    auto dp_allgather = [&](double bytes, double times = 1) {  // reduce-scatter moves the same volume
        intra_bytes += times * allgather_bytes(bytes, per_node);
        inter_bytes += times * allgather_bytes(bytes / per_node, nodes);
        return times * gather_ring_s(bytes);
    };
    const bool grads = full || trainable > 0;
    // HYBRID_SHARD (FSDP1's, and FSDP2's HSDP): the 16-bit weights all-gathered inside
    // the node for forward and again for backward, the gradients reduce-scattered inside
    // the node, then each rank's 1/n_s of them all-reduced across the replicas on the
    // network; every micro-batch, a ring's latency per layer and collective.
    const int n_s = plan.shard_group.size, n_r = plan.hybrid && nodes > 1 ? plan.replica_group.size : 1;
    auto hybrid_collectives = [&] {
        intra_bytes = 2 * allgather_bytes(w16, n_s) + (grads ? reducescatter_bytes(grad_bytes, n_s) : 0);
        inter_bytes = grads ? allreduce_bytes(grad_bytes / n_s, n_r) : 0;
        const double latency =
            c.max_layers * ((grads ? 3.0 : 2.0) * ring_latency_s(n_s, 1, intra, intra) + (grads && n_r > 1 ? inter.latency_s : 0));
        return 2.0 * allgather_s(w16, n_s, intra) +
               (grads ? reducescatter_s(grad_bytes, n_s, intra) + allreduce_s(grad_bytes / n_s, n_r, inter) : 0) + latency;
    };
    if (fsdp2_layer_overlap(t)) {
        // FSDP2 (torch fully_shard; torch/distributed/fsdp/_fully_shard/
        // _fsdp_param_group.py, _fsdp_collectives.py). Every micro-batch each layer
        // is all-gathered before its forward (and again before its backward when
        // it reshards after forward: FULL_SHARD; SHARD_GRAD_OP keeps it gathered)
        // and its gradients reduce-scattered after its backward:
        //  - the all-gathers run on their own stream, issued one layer ahead
        //    (implicit prefetch in forward as the host runs ahead, explicit
        //    backward prefetch of the next layer), so a layer's gather hides
        //    behind the previous layer's compute;
        //  - a layer's reduce-scatter runs behind the next layer's backward: its
        //    post-backward makes the compute stream wait for the previous
        //    reduce-scatter, so one is in flight at a time, and in backward it
        //    shares the process group's NCCL stream with the prefetched gather;
        //  - nothing precedes the first gathers (the embedding's and the first
        //    layer's) or follows the last reductions (the first layer's and the
        //    embedding's): exposed;
        //  - the copy out of each all-gather's output into the parameters
        //    (split_with_sizes_copy in wait_for_unshard, a read and a write of
        //    the gathered bytes) and the copy of the 16-bit gradients into the
        //    reduce-scatter's buffer in the reduce dtype (chunk_cat: fp32 under
        //    torchtitan's default mixed_precision_reduce) run on the compute
        //    stream, serial with the compute: pytorch issue #157027 measures
        //    them ("FSDP::all_gather_copy_out", "FSDP::post_backward_reduce") at
        //    1.4 % of a Llama 3 70B step on one 8-GPU node.
        // What a layer's collectives take beyond the compute they hide behind is
        // exposed. (FSDP1, llm-foundry's and the Trainer's, keeps the count
        // below: its runs measure the collectives exposed.)
        // HSDP (torchtitan's dp_replicate x dp_shard, HYBRID_SHARD) gathers and
        // reduce-scatters over the shard group inside the node; each layer's reduced
        // shard is then all-reduced across the replicas, on the network, on FSDP2's
        // all-reduce stream (foreach_reduce: it waits for that reduce-scatter only),
        // so it runs beside the next layer's gather and reduce-scatter, not after them.
        const bool hsdp = plan.hybrid;
        const double ag_passes = plan.gathers_weights ? 2.0 : 1.0;
        const double L = c.max_layers;
        const double ring = hsdp ? ring_latency_s(n_s, 1, intra, intra) : ring_latency_s(per_node, nodes, intra, inter);
        const double comm = hsdp ? hybrid_collectives()
                                 : dp_allgather(w16, ag_passes) + (grads ? dp_allgather(grad_bytes) : 0) + (ag_passes + (grads ? 1 : 0)) * L * ring;
        auto gather_s = [&](double bytes) { return bytes > 0 ? (hsdp ? allgather_s(bytes, n_s, intra) : gather_ring_s(bytes)) + ring : 0.0; };
        auto replica_s = [&](double bytes) { return hsdp && bytes > 0 ? allreduce_s(bytes / n_s, n_r, inter) + inter.latency_s : 0.0; };
        const StageParams one = stage_params(c.g, plan, 1, false, false);
        const double layer_w = gathered_bytes(t, one);
        const double layer_g = grads ? reduced_of(one) * reduced_grad_elem_bytes(c) : 0.0;
        // The embedding and head units: what the stage gathers beyond its layers, half
        // of it (the embedding) ahead of the first layer.
        const double edge_w = std::max(0.0, w16 - L * layer_w), edge_g = std::max(0.0, grad_bytes - L * layer_g);
        const double ag = gather_s(layer_w), rs = gather_s(layer_g), ar = replica_s(layer_g);
        const double f = passes.layer_fwd / c.clock, b = passes.layer_bwd / c.clock;
        const double regather = plan.gathers_weights ? ag : 0.0;
        const double overlapped = std::max(0.0, L - 1) * std::max(0.0, ag - f) + L * std::max(0.0, std::max(regather + rs, ar) - b);
        const double ends = gather_s(edge_w / 2) + ag + (grads ? gather_s(edge_g / 2) + rs + ar + replica_s(edge_g / 2) : 0.0);
        const double compute_elem = activation_bytes_per_elem(t.precision);
        const double copies = (ag_passes * 2.0 * w16 + (grads ? reduced * (compute_elem + reduced_grad_elem_bytes(c)) : 0.0)) / c.hw.bw;
        // (The compute the hidden collectives slow: contention_terms.)
        tb.dp_comm_s = c.micro_batches * comm;
        tb.fsdp_copies_s = c.micro_batches * copies;
        tb.dp_exposed_s = c.micro_batches * std::min(comm, overlapped + ends) + tb.fsdp_copies_s;
        tb.dp_intra_bytes = c.micro_batches * intra_bytes;
        tb.dp_inter_bytes = c.micro_batches * inter_bytes;
        return;
    }
    if (plan.gathers_weights && plan.hybrid) {
        // FSDP1's HYBRID_SHARD: its collectives (above) every micro-batch, exposed
        // (as ZeRO-3 below).
        tb.dp_comm_s = c.micro_batches * hybrid_collectives();
        tb.dp_exposed_s = tb.dp_comm_s;
        tb.dp_intra_bytes = c.micro_batches * intra_bytes;
        tb.dp_inter_bytes = c.micro_batches * inter_bytes;
        return;
    }
    if (plan.gathers_weights) {
        // ZeRO-3 / FSDP: all-gather 16-bit weights for forward and again for
        // backward (one collective per wrapped layer), reduce-scatter
        // gradients, every micro-batch; each of those rings pays a hop latency
        // per rank (ring_latency_s), which at hundreds of ranks rivals the
        // bytes. Counted as exposed: the published
        // step times of PyTorch FSDP (llm-foundry MPT benchmarks, forward
        // prefetch off by default) match no effective overlap -- e.g. MPT-13B
        // on 8 x A100 at micro-batch 2 without recompute: 59.6 % MFU
        // measured, 59 % with the collectives exposed, 77 % if hidden.
        const double ring = ring_latency_s(per_node, nodes, intra, inter);
        double latency = 3.0 * c.max_layers * ring;
        if (t.ds_gather_per_tensor && t.fsdp == FsdpStrategy::None) {
            // DeepSpeed before v0.6 (training.hpp ds_gather_per_tensor): one gather
            // per parameter tensor -- in forward, backward and the recomputed forward,
            // which fetches its layer again -- each after a device synchronize and
            // followed by one copy per rank out of torch's flat buffer: its own ring
            // latency and host time per rank of the group, nothing overlapping it.
            latency = c.fetched(c.g.param_tensors) * (ring + plan.dp_group.size * policy().list_gather_per_rank_s) + c.max_layers * ring;
        }
        const double per_mb = dp_allgather(w16, 2) + (grads ? dp_allgather(grad_bytes) : 0) + latency;
        tb.dp_comm_s = c.micro_batches * per_mb;
        tb.dp_exposed_s = tb.dp_comm_s;
        tb.dp_intra_bytes = c.micro_batches * intra_bytes;
        tb.dp_inter_bytes = c.micro_batches * inter_bytes;
        return;
    }
    // Gradients reduced once per step, bucketed and overlapped with the last
    // micro-batch's backward (DDP, Megatron --overlap-grad-reduce), or after
    // it when overlap_grad_reduce is off (Megatron's default). ZeRO-1/2 and
    // Megatron's distributed optimizer reduce-scatter the gradients and
    // all-gather the updated 16-bit weights after the step; that gather hides
    // behind the next forward only with --overlap-param-gather (comm_overlap).
    const double overlap = t.overlap_grad_reduce ? stage_bwd / c.clock : 0.0;
    // The last gradient bucket (one of the two DDP buckets in flight, memory_defaults()) is never hidden.
    const double last_bucket = memory_defaults().grad_bucket_bytes / 2 / std::max(1.0, c.link(plan.dp_group.tier).bus_Bps);
    if (t.zero_stage >= 1) {
        // ZeRO-2 keeps only its gradient partition, so it reduces every
        // micro-batch's gradients as backward produces them, not once at the
        // accumulation boundary as ZeRO-1 and Megatron's distributed optimizer
        // do: DeepSpeed (deepspeed/runtime/zero/stage_1_and_2.py:
        // reduce_ready_partitions_and_remove_grads reduces when
        // partition_gradients or at the boundary), FSDP's SHARD_GRAD_OP, and
        // Megatron-LLaMA's OverlappedDistributedOptimizer (its gradient hook
        // reduce-scatters each full fp32 bucket on a side stream every
        // micro-batch and keeps only the partition: overlapped_dist_optimizer.py
        // _grad_hook, backward_epilogue after each micro-batch in schedules.py).
        // Each reduce overlaps its own micro-batch's backward.
        const bool ds = runs_deepspeed_zero12(t);
        const double reduces = t.zero_stage == 2 ? c.micro_batches : 1.0;
        // DeepSpeed ZeRO-1/2 all-reduce each gradient bucket and every rank keeps
        // its partition's slice (stage_1_and_2.py average_tensor ->
        // allreduce_and_scatter -> allreduce_bucket: dist.all_reduce, the default
        // use_multi_rank_bucket_allreduce=True since v0.12.4; before it the
        // per-destination path forced rank = None, an all-reduce too, until PR
        // #4946): twice a reduce-scatter's bytes. Megatron's distributed optimizer
        // and FSDP reduce-scatter.
        // DeepSpeed before v0.12.4 (training.hpp ds_reduce_per_rank) all-reduces
        // each bucket one destination rank's slice at a time: as many
        // collectives per bucket as ranks, each paying its latency.
        const double elems = std::max(1.0, trainable);
        const double collectives = ds && t.ds_reduce_per_rank ? std::ceil(elems / t.ds_reduce_bucket) * plan.dp_group.size : 1.0;
        const double rs = (ds ? dp_allreduce(grad_bytes / collectives, reduces * collectives) : dp_allgather(grad_bytes, reduces)) / reduces;
        const double ag = dp_allgather(c.crit.trainable() * gather_elem);
        tb.dp_comm_s = reduces * rs + ag;
        double hidden = overlap;
        double tail = t.overlap_grad_reduce ? std::min(rs, last_bucket) : 0.0;
        if (ds) {
            // DeepSpeed reduces on its own stream only with overlap_comm; without
            // it average_tensor runs on the compute stream, between backward's
            // kernels (stage_1_and_2.py average_tensor: current_stream()). The
            // bucket still open when backward ends (half of reduce_bucket_size on
            // average) is reduced in the epilogue after it. Before v0.12.4 a
            // device synchronize ahead of every rank's slice under overlap_comm
            // serializes backward and the reduction (training.hpp
            // ds_reduce_per_rank): nothing is hidden.
            const bool overlapped = ds_overlap_comm_on(t) && !t.ds_reduce_per_rank;
            hidden = overlapped ? stage_bwd / c.clock : 0.0;
            tail = overlapped ? rs * std::min(1.0, 0.5 * t.ds_reduce_bucket / elems) : 0.0;
        }
        // (What waits for backward's end is part of what backward could not hide:
        // under DeepSpeed never more than the reduction itself.)
        const double exposed_rs = ds ? std::min(rs, std::max(0.0, rs - hidden) + tail) : std::max(0.0, rs - hidden) + tail;
        tb.dp_exposed_s = reduces * exposed_rs + (t.tp_comm_overlap ? std::max(0.0, ag - stage_fwd / c.clock) : ag);
    } else {
        tb.dp_comm_s = dp_allreduce(grad_bytes);
        // torch DDP launches each bucket's all-reduce from the autograd hook on
        // NCCL's stream while backward goes on, but what that hides is lost again:
        // the all-reduce kernels share the SMs and memory with the backward
        // kernels they overlap, which run slower beside them (NVIDIA/nccl#338:
        // kernels overlapped with an all-reduce took 2-4x as long). Measured, the
        // step grows by the whole reduction: 2 x RTX 3090 under HF Trainer
        // (huggingface/transformers#9371, train_runtime per step over one GPU's)
        // add 101 / 239-252 / 515 ms for GPT-2 / -medium / -large fp32 gradients
        // without P2P, the same at block sizes 128 to 512 while the compute
        // triples, and 17-19 / 29-44 / 82 ms over NVLink. DeepSpeed's engine
        // without ZeRO reduces after backward anyway (engine.py backward ->
        // allreduce_gradients -> buffered_allreduce_fallback). Megatron's DDP
        // (--overlap-grad-reduce) keeps its overlap.
        const bool additive = runs_torch_ddp(t) || (t.framework == Framework::DeepSpeed && t.zero_stage == 0 && t.fsdp == FsdpStrategy::None);
        tb.dp_exposed_s = additive ? tb.dp_comm_s
                                   : std::max(0.0, tb.dp_comm_s - overlap) + (t.overlap_grad_reduce ? std::min(tb.dp_comm_s, last_bucket) : 0.0);
        // torch.nn.parallel.DistributedDataParallel keeps its buckets apart from
        // the .grad tensors (gradient_as_bucket_view=False by default, PyTorch
        // DDP docs): torch/csrc/distributed/c10d/reducer.cpp
        // mark_variable_ready_dense copies each gradient into its bucket (scaled
        // by 1/world size on the way) from the autograd hook, on the compute
        // stream, and copy_bucket_to_grad copies the reduced bucket back after
        // the last reduction: a read and a write of the gradients each way, on
        // the critical path. Megatron's DDP reduces its contiguous main-grad
        // buffer in place (no copies).
        // With gradient_as_bucket_view the gradients are the buckets: only the
        // in-place scaling (bucket_view.div_) is left, a read and a write.
        if (runs_torch_ddp(t)) tb.dp_exposed_s += (t.ddp_bucket_view ? 2.0 : 4.0) * grad_bytes / c.hw.bw;
    }
    tb.dp_intra_bytes = intra_bytes;
    tb.dp_inter_bytes = inter_bytes;
}

// ---- the SMs the overlapped collectives hold. An NCCL kernel takes one SM per
// channel and shares it with no compute kernel (NVIDIA/nccl#689: "NCCL CTAs won't
// share an SM with compute kernels"; 16 SMs on a DGX with 8 NICs), so the compute
// under a data-parallel or context-parallel collective it hides runs on the rest,
// stretched by overlap_contention for as long as the collective runs. (Transformer
// Engine's TP overlap sizes its own SM margin, in the GEMM rate it is measured at.)
void contention_terms(const TimeContext& c, TimeEstimate& est) {
    TimeBreakdown& tb = est.time;
    const double k = overlap_contention(c.s.cluster.gpu);
    const double dp_hidden = std::max(0.0, tb.dp_comm_s - (tb.dp_exposed_s - tb.fsdp_copies_s));
    const double cp_hidden = std::max(0.0, tb.cp_comm_s - tb.cp_exposed_s);
    tb.dp_exposed_s += k * dp_hidden;
    tb.cp_exposed_s += k * cp_hidden;
    tb.overlap_contention_s = k * (dp_hidden + cp_hidden);
}

// ---- optimizer step: memory-bound over the states each GPU updates; or
// offloaded to the CPU.
void optimizer_terms(const TimeContext& c, TimeEstimate& est) {
    const TrainingSetup& t = c.s.setup;
    const Policy& pol = policy();
    TimeBreakdown& tb = est.time;
    const BytesPerParam& bpp = c.bpp;
    // Each rank updates its shard of the optimizer states.
    const double updated = c.crit.trainable_dense / c.plan.dense.optimizer + c.crit.trainable_expert / c.plan.expert.optimizer;
    // Bytes per updated parameter: Adam reads the gradient and reads + writes
    // the master copy and the states; the 16-bit weights are rewritten from the
    // master (or updated in place without one); gradient-norm clipping reads the
    // gradients once more and zeroing the gradient buffer writes them.
    double state_bytes = 3.0 * bpp.gradients + 2.0 * (bpp.master + bpp.optimizer_states) +
                         (bpp.master > 0 ? std::min(bpp.weights, 2.0) : 2.0 * bpp.weights);
    // torch.optim.AdamW's multi-tensor path (data/defaults.toml [stack.*]
    // optimizer_foreach; torch/optim/adamw.py _multi_tensor_adamw, torch 2.x, no
    // amsgrad) passes over whole tensor lists once per op, with p the updated
    // parameter's bytes, s one moment's, g the gradient's:
    //   _foreach_mul_(params)                      r p, w p      2p
    //   _foreach_lerp_(exp_avgs, grads)            r s g, w s    2s + g
    //   _foreach_mul_(exp_avg_sqs)                 r s, w s      2s
    //   _foreach_addcmul_(exp_avg_sqs, g, g)       r s g g, w s  2s + 2g
    //   _foreach_sqrt(exp_avg_sqs) -> denom        r s, w s      2s
    //   _foreach_div_(denom), _foreach_add_(eps)   2 x (r s, w s) 4s
    //   _foreach_addcdiv_(params, exp_avgs, denom) r p s s, w p  2p + 2s
    // = 4p + 14s + 3g; clip_grad_norm_ (torch/nn/utils/clip_grad.py, foreach)
    // reads the gradients for the norm and scales them in place: + 3g. Gradients
    // are freed, not zeroed (zero_grad set_to_none=True since torch 2.0).
    if (adamw_runs_foreach(t)) {
        const double p = bpp.master > 0 ? bpp.master : std::min(bpp.weights, 4.0);
        const double s = bpp.optimizer_states / 2.0;
        state_bytes = 4.0 * p + 14.0 * s + 6.0 * bpp.gradients;
    }
    if (t.optimizer_offload == Offload::None) {
        tb.optimizer_s = updated * state_bytes / c.hw.bw;
        // A paged optimizer whose states do not all fit on the device (memory.cpp
        // paged_out): every step touches every state, so the driver migrates the
        // paged-out part in on fault and writes it back out, dirty, to make room:
        // twice its bytes over PCIe, at best at the copy rate (unified-memory
        // migration is no faster than cudaMemcpy). Adapters' states never page
        // enough to matter: only full fine-tunes pay the memory estimate here.
        if (paged_optimizer_on(t) && t.method == Method::Full) {
            const double out = estimate_memory(c.s, c.g).peak().paged_out;
            tb.paging_s = 2.0 * out / pol.pcie_bytes_per_s(c.s.cluster.gpu.pcie_gen);
            tb.offload_s += tb.paging_s;
        }
        return;
    }
    // ZeRO-Offload: CPU Adam plus gradients down and weights up over PCIe.
    const double cpu_params_per_s = pol.cpu_adam_params_per_s_per_node / std::max(1, c.s.cluster.gpus_per_node);
    const double pcie = pol.pcie_bytes_per_s(c.s.cluster.gpu.pcie_gen);
    tb.offload_s += updated / cpu_params_per_s + updated * 4.0 / pcie;
    if (t.param_offload != Offload::None) tb.offload_s += c.micro_batches * 2.0 * c.crit.total() / c.plan.dense.optimizer * 2.0 / pcie;
    if (t.optimizer_offload == Offload::NVMe || t.param_offload == Offload::NVMe) tb.offload_s += updated * 16.0 / pol.nvme_bytes_per_s;
}

// ---- data loader: every rank of a data-parallel replica loads the replica's
// samples; the loader prefetches while the GPU works.
void data_terms(const TimeContext& c, TimeEstimate& est, double step) {
    const RunOptions& run = c.s.run;
    const TrainingSetup& t = c.s.setup;
    if (run.loader_workers <= 0 || run.worker_samples_per_s <= 0) return;
    const double samples_per_gpu = static_cast<double>(t.micro_batch * t.grad_accum);
    double rate = run.loader_workers * run.worker_samples_per_s;
    if (run.storage_bytes_per_s > 0) {
        const double bytes = run.bytes_per_sample > 0 ? run.bytes_per_sample : 2.0 * static_cast<double>(t.seq_len);
        rate = std::min(rate, run.storage_bytes_per_s / c.s.cluster.gpus_per_node / bytes);
    }
    est.time.data_s = std::max(0.0, samples_per_gpu / rate - step);
}

void throughput_terms(const TimeContext& c, TimeEstimate& est) {
    const ModelSpec& m = c.s.model;
    const TrainingSetup& t = c.s.setup;
    Throughput& th = est.throughput;
    const double step = est.time.step_s;
    const double tokens_step = t.tokens_per_step();
    th.tokens_per_s = tokens_step / step;
    th.samples_per_s = static_cast<double>(t.global_batch()) / step;
    th.model_flops_per_token = model_flops_per_token(m, t.seq_len);
    // MFU keeps the 6N + 12 L h s convention (PaLM Appendix B) for every method:
    // under LoRA / QLoRA N is the base model's matmul parameters, as fine-tuning
    // reports quote it. Hardware FLOPs are the FLOPs executed: attention as its
    // kernel runs it (below), frozen base weights
    // have no weight-gradient GEMM (2 of the 6 FLOPs per parameter), the adapters'
    // GEMMs run forward, input- and weight-gradient; and what recompute repeats:
    // the forward of the recomputed layers (full), or the ops the graph marks
    // (selective: attention; per-op: every other matmul and the memory-bound ops).
    const double Lm = static_cast<double>(m.num_layers), sq = static_cast<double>(t.seq_len);
    // (layer_fwd: the matmuls full recompute runs again, the checkpointed layers'
    // own and their adapters'; the embedding and the LM head are outside them.)
    double frozen_wgrad = 0, adapters_fwd = 0, layer_fwd = 0;
    for (const OpDef& o : c.g.ops) {
        const bool layer = o.site == Site::Layer;
        const double n = layer ? Lm : 1.0;
        const bool matmul = o.kind == OpKind::Gemm || o.kind == OpKind::Router;
        if (matmul && !o.trainable_weight) frozen_wgrad += n * o.flops_per_token;
        if (o.kind == OpKind::LoraGemm) adapters_fwd += n * o.flops_per_token;
        if (layer && (matmul || o.kind == OpKind::LoraGemm)) layer_fwd += n * o.flops_per_token;
    }
    // Attention as its kernels execute it (kFusedAttention / kEagerAttention, the
    // same figures the time model above runs): the convention's term counts every
    // query-key pair, forward 4 FLOPs per pair and head dimension, backward 8; a
    // fused kernel runs (4 + 10) / 2 = 7 of the 12, eager attention all 12.
    const AttnExecution& kernel = fused_attention_runs(t) ? kFusedAttention : kEagerAttention;
    const double pair_share = executed_pair_share(m, t);
    const double attn_model = attention_model_flops_per_token(m, t.seq_len);
    const double attn_fwd = attn_model / 3.0 * pair_share;  // what a recomputed forward runs again
    const double attn_executed = attn_fwd * (1.0 + kernel.backward_matmuls);
    const double sq_executed = pair_share;  // per-pair FLOPs the graph counts before causal and window savings
    double recompute_flops = 0;
    if (t.recompute == Recompute::Full) {
        const double share = c.max_layers > 0 ? static_cast<double>(recompute_layers(t, c.max_layers).recomputed) / c.max_layers : 1.0;
        recompute_flops = share * (layer_fwd + attn_fwd);
    } else if (t.recompute == Recompute::Selective) {
        recompute_flops = c.g.selective_flops_per_token_sq * Lm * sq * sq_executed;
    } else if (t.recompute == Recompute::PerOp) {
        recompute_flops = (c.g.per_op_flops_per_token + c.g.per_op_flops_per_token_sq * sq * sq_executed) * Lm;
    }
    th.hardware_flops_per_token =
        th.model_flops_per_token - attn_model + attn_executed - frozen_wgrad + 3.0 * adapters_fwd + recompute_flops;
    th.peak_flops = c.hw.peak;
    const double gpus = c.s.cluster.num_gpus;
    th.model_tflops_per_gpu = th.model_flops_per_token * th.tokens_per_s / gpus / units::TFLOPS;
    th.hardware_tflops_per_gpu = th.hardware_flops_per_token * th.tokens_per_s / gpus / units::TFLOPS;
    th.mfu = th.model_tflops_per_gpu * units::TFLOPS / c.hw.peak;
    th.hfu = th.hardware_tflops_per_gpu * units::TFLOPS / c.hw.peak;
}

// ---- energy and cost (factors: data/defaults.toml [power]).
void cost_terms(const TimeContext& c, TimeEstimate& est) {
    const RunOptions& run = c.s.run;
    const Policy& pol = policy();
    const double gpus = c.s.cluster.num_gpus;
    CostEstimate& co = est.cost;
    const double tdp = c.s.cluster.gpu.tdp_w > 0 ? c.s.cluster.gpu.tdp_w : pol.fallback_tdp_w;
    const double board = tdp * (run.utilization_power_fraction > 0 ? run.utilization_power_fraction : pol.board_fraction_of_tdp);
    const double overhead = run.node_overhead_w_per_gpu > 0 ? run.node_overhead_w_per_gpu : pol.node_overhead_fraction_of_tdp * tdp;
    co.power_w = gpus * (board + overhead) * run.pue;
    if (run.tokens_to_train <= 0) return;
    co.train_time_s = run.tokens_to_train / est.throughput.tokens_per_s;
    co.gpu_hours = gpus * co.train_time_s / 3600.0;
    co.energy_kwh = co.power_w * co.train_time_s / 3.6e6;
    co.energy_cost_usd = co.energy_kwh * run.electricity_usd_per_kwh;
    if (run.rent_usd_per_gpu_hour > 0) co.rent_cost_usd = co.gpu_hours * run.rent_usd_per_gpu_hour;
    const double price = run.purchase_usd_per_gpu > 0 ? run.purchase_usd_per_gpu : c.s.cluster.gpu.price_usd;
    if (price > 0 && run.amortization_years > 0)
        co.purchase_cost_usd = price * gpus * co.train_time_s / (run.amortization_years * 365.25 * 86400.0);
}

}  // namespace

TimeEstimate estimate_time(const Scenario& s) { return estimate_time(s, build_step_graph(s.model, s.setup)); }

double matmul_seconds(const Scenario& s, double m, double n, double k, double batch) {
    return gemm_s(m, n, k, activation_bytes_per_elem(s.setup.precision), make_hw(s), batch);
}

TimeEstimate estimate_time(const Scenario& s, const StepGraph& g) {
    const TrainingSetup& t = s.setup;
    const ParallelLayout& lay = t.layout;
    TimeContext c{s, g, shard_plan(s), tier_costs(s.cluster), make_hw(s), 1, 1, 0, 0, {}, bytes_per_trainable_param(t),
                  activation_bytes_per_elem(t.precision), static_cast<double>(t.seq_len), lay.sequence_parallel && lay.tp > 1};
    // Calibration hook (calibrate.hpp): fitted bus-efficiency multipliers per tier.
    c.tiers.intra.bus_Bps *= s.calibration.intra_link;
    c.tiers.inter.bus_Bps *= s.calibration.inter_link;
    c.clock = std::clamp(s.run.sustained_clock, 0.05, 1.0);
    c.micro_batches = static_cast<double>(t.grad_accum);
    // Tokens one rank processes per micro-batch: context parallelism gives each
    // of the cp ranks seq_len / cp of every sequence (its queries); attention
    // still runs each query against the whole sequence's keys (c.sq).
    c.tokens_mb = static_cast<double>(t.seq_len * t.micro_batch) / lay.cp;
    // The stage with the most work sets the pipeline's pace. By default the last
    // stage: it holds the most layers (remainders go last) and the head, which
    // outweighs the embedding lookup. When the split counts the embedding / loss
    // as layers (Megatron-Core), the first and last stages give up a layer each;
    // the stage with the longest forward + backward is then found from the times.
    c.max_layers = layers_on_stage(s.model.num_layers, lay, lay.pp - 1);
    c.crit_first = lay.pp == 1;
    c.crit_last = true;
    if (lay.pp > 1 && (lay.split_counts_embedding || lay.split_counts_loss)) {
        const SiteTimes st = site_times(c);
        const PassTimes& lt = st.site[static_cast<int>(Site::Layer)];
        const PassTimes& first = st.site[static_cast<int>(Site::First)];
        const PassTimes& last = st.site[static_cast<int>(Site::Last)];
        double most = -1;
        for (int i : {0, 1, lay.pp - 1}) {  // stages 1 .. pp-2 hold the same layers
            const bool f = i == 0, l = i == lay.pp - 1;
            const int n = layers_on_stage(s.model.num_layers, lay, i);
            const double work = n * (lt.fwd + lt.bwd) + (f ? first.fwd + first.bwd : 0.0) + (l ? last.fwd + last.bwd : 0.0);
            if (work > most) most = work, c.max_layers = n, c.crit_first = f, c.crit_last = l;
        }
    }
    // The critical stage's parameters: its layers plus the embedding side (first
    // stage) or the head side (last stage), whichever holds more; both on one stage.
    const StageParams a = stage_params(g, c.plan, c.max_layers, true, lay.pp == 1);
    const StageParams b = stage_params(g, c.plan, c.max_layers, lay.pp == 1, true);
    c.crit = a.total() >= b.total() ? a : b;

    TimeEstimate est;
    if (c.hw.eff.attention_fallback)
        if (auto w = architecture_warning(s.cluster.gpu)) est.warnings.push_back(*w);
    if (s.setup.tp_comm_overlap && lay.tp > 1 && !tp_overlap_possible(c))
        est.warnings.push_back({"", 0, 0, "tp_comm_overlap",
                                c.plan.tp_group.tier == Tier::InterNode
                                    ? "tp_comm_overlap does not overlap TP traffic here: the TP group spans nodes, and Transformer Engine's userbuffers need it inside one node"
                                    : "tp_comm_overlap does not overlap TP traffic here: " + s.cluster.intra_node.name +
                                          " has no peer access, and Transformer Engine's userbuffers need it (CUDA IPC / multicast)"});
    StagePasses passes;
    compute_terms(c, est, passes);
    model_parallel_terms(c, est);
    data_parallel_terms(c, est, passes);
    contention_terms(c, est);
    TimeBreakdown& tb = est.time;
    tb.communication_s = tb.tp_comm_s + tb.ep_comm_s + tb.pp_comm_s + tb.dp_exposed_s + tb.cp_exposed_s;
    optimizer_terms(c, est);
    // ---- step without data stall; then the loader.
    const double step = tb.compute_s + tb.communication_s + tb.bubble_s + tb.optimizer_s + tb.offload_s;
    data_terms(c, est, step);
    tb.step_s = step + tb.data_s;
    throughput_terms(c, est);
    // ---- scaling: the same per-GPU work without communication or bubble.
    est.single_gpu_step_s = tb.compute_s + tb.optimizer_s + tb.offload_s;
    est.scaling_efficiency = est.single_gpu_step_s / tb.step_s;
    cost_terms(c, est);
    return est;
}

}  // namespace trainplan
