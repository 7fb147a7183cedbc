// Step time from the same layer op graph as the memory model: per-op compute
// (roofline with shape-dependent GEMM efficiency), collectives on the tier each
// group spans, pipeline bubble, optimizer, offload, data and thermal terms;
// throughput, MFU/HFU, and time / energy / cost to train a token budget.
#pragma once

#include <string>
#include <vector>

#include "trainplan/memory.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/result.hpp"

namespace trainplan {

// Efficiency factors per GPU family and op kind: the GPU preset's measured
// figures where given, else the policy defaults (data/defaults.toml, sourced).
struct Efficiencies {
    double gemm = 0;             // achievable fraction of dense peak for large GEMMs
    double hbm = 0;              // achievable fraction of HBM bandwidth
    double attention_fwd = 0;    // FlashAttention forward, fraction of peak
    double attention_bwd = 0;    // FlashAttention backward
    double kernel_overhead_s = 0;  // idle gap per kernel launch
    bool attention_fallback = false;  // the GPU's architecture has no policy row (see architecture_warning())
};
[[nodiscard]] Efficiencies efficiencies(const GpuSpec& g, AttentionKernel k = AttentionKernel::Flash2);
// Large 16-bit GEMMs in a short burst at the boost clock: bf16 peak x the preset's
// matmul_efficiency (else the policy default).
[[nodiscard]] double burst_matmul_flops(const GpuSpec& g);
// Sustained over burst tensor-core rate of a power-saturated GPU: the preset's
// sustained_matmul_tflops over burst_matmul_flops; 1 without one.
[[nodiscard]] double power_limited_share(const GpuSpec& g);
// The fraction of fp8_flops a training step's FP8 GEMMs run at: the measured FP8
// burst fraction (fp8_matmul_efficiency, else matmul_efficiency) x power_limited_share.
[[nodiscard]] double fp8_gemm_fraction(const GpuSpec& g);

// Where the parallel groups land on the machines, and what each costs.
struct Placement {
    std::string tp_link, pp_link, dp_link, ep_link;  // link preset ids the groups span
    double tp_bus_Bps = 0, pp_Bps = 0, dp_bus_Bps = 0, ep_bus_Bps = 0;
    std::string cp_link;  // context parallelism's K/V ring
    double cp_Bps = 0;
};

struct TimeBreakdown {
    double compute_s = 0;        // forward + backward (+ recompute) on the critical stage, all micro-batches
    double communication_s = 0;  // exposed TP + PP + DP/ZeRO + EP + CP
    double bubble_s = 0;
    double optimizer_s = 0;
    double offload_s = 0;
    double data_s = 0;           // data-loader stall
    double step_s = 0;
    // detail
    double recompute_s = 0;      // part of compute_s
    double memory_bound_s = 0;   // part of compute_s spent in HBM-bandwidth-bound (element-wise) ops
    double tp_comm_s = 0, pp_comm_s = 0, dp_comm_s = 0, ep_comm_s = 0;  // totals before overlap
    double dp_exposed_s = 0;
    // Part of pp_comm_s: the tied embedding's gradient all-reduce between the first
    // and last pipeline stages, once a step (time.cpp model_parallel_terms).
    double tied_embedding_s = 0;
    // Context parallelism: the K/V ring's sends before overlap, and what the
    // attention blocks computed meanwhile leave exposed (part of communication_s).
    double cp_comm_s = 0, cp_exposed_s = 0;
    // Data-parallel traffic per rank per step (NCCL ring volumes), on each tier.
    double dp_intra_bytes = 0, dp_inter_bytes = 0;
    double thermal_s = 0;        // part of compute_s caused by sustained_clock < 1
    // Part of compute_s the GPU waits for the host to launch kernels: eager model
    // code issues each kernel from Python; when issuing a micro-batch takes longer
    // than running it, the GPU idles for the difference.
    double host_s = 0;
    // Host time DeepSpeed ZeRO-3's per-module fetch / release hooks take (included in
    // what the host spends issuing the step; part of host_s only where it makes the
    // host the slower side).
    double zero3_hooks_s = 0;
    // Part of dp_exposed_s under FSDP2 (fsdp2_layer_overlap): the copies out of the
    // all-gathers' buffers and into the reduce-scatters' on the compute stream.
    double fsdp_copies_s = 0;
    // Part of dp_exposed_s and cp_exposed_s: the compute slowed beside the data- and
    // context-parallel collectives it hides (overlap_contention).
    double overlap_contention_s = 0;
    // Part of offload_s a paged optimizer spends moving its paged-out states in and
    // back out over PCIe (time.cpp optimizer_terms).
    double paging_s = 0;
};

struct Throughput {
    double tokens_per_s = 0;
    double samples_per_s = 0;
    double model_flops_per_token = 0;     // 6N + attention (PaLM convention, see time.cpp)
    double hardware_flops_per_token = 0;  // + recompute
    double model_tflops_per_gpu = 0;
    double hardware_tflops_per_gpu = 0;
    double mfu = 0, hfu = 0;              // against the dense peak of the compute format
    double peak_flops = 0;
};

struct CostEstimate {
    double train_time_s = 0;
    double gpu_hours = 0;
    double energy_kwh = 0;
    double energy_cost_usd = 0;
    double rent_cost_usd = 0;       // 0 when no rent price
    double purchase_cost_usd = 0;   // amortized share for the run's duration, 0 when no price
    double power_w = 0;             // whole cluster at the wall
};

struct TimeEstimate {
    TimeBreakdown time;
    Throughput throughput;
    CostEstimate cost;
    Placement placement;
    double single_gpu_step_s = 0;   // the same per-GPU work with no communication or bubble
    double scaling_efficiency = 1;  // single_gpu_step_s / step_s
    // Warnings about the inputs (e.g. a GPU architecture with no policy row:
    // names the fallback used). Front ends print them.
    std::vector<Diagnostic> warnings;
};

// The scenario must be valid (validate()).
[[nodiscard]] TimeEstimate estimate_time(const Scenario& s);
[[nodiscard]] TimeEstimate estimate_time(const Scenario& s, const LayerGraph& g);

// One (m x k) by (k x n) matmul on the scenario's GPU in its precision's compute
// format, as the step's time model runs every GEMM: seconds, the kernel's own
// launch gap included; `batch` such matmuls in one batched kernel share its waves.
[[nodiscard]] double matmul_seconds(const Scenario& s, double m, double n, double k, double batch = 1);

// Model FLOPs per token: 6 x matmul parameters (incl. LM head) + 12 L h s
// (attention scores and values, counted without causal savings as PaLM does).
[[nodiscard]] double model_flops_per_token(const ModelSpec& m, std::int64_t seq_len);
// Its attention term alone: 12 L (n_heads d_head) s.
[[nodiscard]] double attention_model_flops_per_token(const ModelSpec& m, std::int64_t seq_len);
// The share of a causal sequence's query-key pairs a windowed kernel computes,
// averaged over the layers: 1 without a sliding window (ModelSpec::sliding_window).
[[nodiscard]] double attention_window_share(const ModelSpec& m, std::int64_t seq_len);
// AdamW runs as torch.optim.AdamW's multi-tensor (foreach) path, one memory pass
// per _foreach op, rather than one fused kernel: the stack's convention
// (data/defaults.toml [stack.*] optimizer_foreach), except under framework
// deepspeed / megatron, whose own Adam is fused.
[[nodiscard]] bool adamw_runs_foreach(const TrainingSetup& t);
// Full-size copies, in tensors read and written, one TP all-gather / reduce-scatter
// pair makes per pass under DTensor's sequence parallelism (the stack's
// tp_shard_dim_copies): 2 (the reduce-scatter's input) + 2 (the gather's output,
// unless the local batch is 1); 0 without TP, SP or that stack.
[[nodiscard]] double tp_shard_dim_copies_per_pair(const TrainingSetup& t);
// FSDP as the stack runs it is FSDP2 (torch fully_shard, data/defaults.toml [stack.*]
// fsdp2) sharding each layer (full-shard or shard-grad-op, or ZeRO-3 / ZeRO-2 under
// the stack's own engine): its collectives overlap the neighbouring layers' compute,
// one layer ahead (time.cpp data_parallel_terms).
[[nodiscard]] bool fsdp2_layer_overlap(const TrainingSetup& t);
// How much longer compute runs beside an NCCL collective it overlaps: the
// collective holds [overlap] nccl_overlap_ctas of the GPU's SMs (sm / (sm - ctas) - 1;
// 0 where the preset gives no SM count).
[[nodiscard]] double overlap_contention(const GpuSpec& g);

}  // namespace trainplan
