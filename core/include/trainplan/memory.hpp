// Per-GPU memory: model states, activations from the op graph, logits, temporary
// buffers, framework overhead and allocator fragmentation, per pipeline stage.
#pragma once

#include <cstdint>
#include <vector>

#include "trainplan/opgraph.hpp"
#include "trainplan/sharding.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

// Documented defaults (override per scenario with TrainingSetup fields).
struct MemoryDefaults {
    // CUDA context, loaded kernels and library handles of a PyTorch process.
    double cuda_context_bytes = 0;
    // cuBLAS/cuDNN workspaces.
    double library_workspace_bytes = 0;
    // NCCL buffers of one communicator (two ranks / more), per communicator a
    // rank opens (sharding.hpp communicators()).
    double communicator_bytes = 0;
    double communicator_pair_bytes = 0;
    // NVLink SHARP buffers per GPU of a communicator's node, by NCCL release.
    double nvls_head_bytes_2_20 = 0, nvls_head_bytes_2_21 = 0, nvls_head_bytes = 0;
    [[nodiscard]] double nvls_head(NcclRelease r) const {
        switch (r) {
            case NcclRelease::V2_19:
            case NcclRelease::V2_20: return nvls_head_bytes_2_20;
            case NcclRelease::V2_21: return nvls_head_bytes_2_21;
            case NcclRelease::Current: return nvls_head_bytes;
            case NcclRelease::NvlsOff: return 0;
        }
        return 0;
    }
    // Gradient-reduction buckets in flight (2 x PyTorch DDP's 25 MB default).
    double grad_bucket_bytes = 0;
};
[[nodiscard]] const MemoryDefaults& memory_defaults();

// The run's caching allocator maps expandable segments: the scenario's
// expandable_segments, else the stack's ([stack.*] expandable_segments).
[[nodiscard]] bool expandable_segments_on(const TrainingSetup& t);

// Bytes kept per parameter under a precision policy / optimizer / framework, before
// any sharding. `master` is the fp32 master copy (shown inside the optimizer term).
struct BytesPerParam {
    double weights = 0;
    double gradients = 0;
    double master = 0;
    double optimizer_states = 0;  // excluding master
    [[nodiscard]] double optimizer() const { return master + optimizer_states; }
    [[nodiscard]] double total() const { return weights + gradients + master + optimizer_states; }
};
[[nodiscard]] BytesPerParam bytes_per_trainable_param(const TrainingSetup& t);
// Bytes a parameter is stored in, without the step's cast copies (a weight the
// step never uses: an idle image encoder).
[[nodiscard]] double parameter_storage_bytes(const TrainingSetup& t);
// Bytes per element of a parameter gathered by data parallelism (a ZeRO-3 / FSDP
// unit, the distributed optimizer's updated weights): the compute dtype, FP8 with
// fp8_params (training.hpp). Memory (the gathered units) and time (the all-gathers)
// both read it.
[[nodiscard]] double parameter_gather_bytes(const TrainingSetup& t);
// Bytes per parameter of a frozen base linear weight as stored: 4-bit under QLoRA
// (qlora_bits_per_param), FP8 with fp8_params, else the compute dtype.
[[nodiscard]] double frozen_linear_bytes(const TrainingSetup& t);
// Bytes of a QLoRA adapter weight and of its gradient outside an engine that casts
// the model: 16-bit as QLoRA's recipe casts them, fp32 after PEFT's kbit
// preparation (fp32_stream), which makes them beside a 4-bit base.
[[nodiscard]] double qlora_adapter_bytes(const TrainingSetup& t);

// FSDP units hold frozen base weights beside the adapters (use_orig_params;
// data/defaults.toml [stack.*] fsdp_units_mix_frozen).
[[nodiscard]] bool fsdp_units_mix_frozen(const TrainingSetup& t);
// FSDP1 keeps every frozen unit's input gradient until backward ends: units that
// hold only frozen weights under reentrant full recompute (memory.cpp).
[[nodiscard]] bool fsdp_holds_input_grads(const TrainingSetup& t);
// Bytes data parallelism's all-gather of the parameters `p` moves (ZeRO-3 / FSDP
// units): a frozen base in its stored form -- FSDP-QLoRA gathers the packed 4-bit
// storage (bnb_4bit_quant_storage) -- and the rest at parameter_gather_bytes.
// Weights no pass uses (p.idle) are never gathered. Memory (the gathered units)
// and time (the all-gathers) both read it.
[[nodiscard]] double gathered_bytes(const TrainingSetup& t, const StageParams& p);
// What a step's own temporaries are (MemoryBreakdown::step_copies): DeepSpeed's fp32
// gradient copies, else torch AdamW's foreach list.
[[nodiscard]] const char* step_copies_name(const TrainingSetup& t);

// Bits per parameter of a QLoRA base weight: 4 + the quantization constants.
[[nodiscard]] double qlora_bits_per_param(const QLoraConfig& q);

// Model states (ZeRO paper, Rajbhandari et al. 2020, Sec. 3 and Table 1): for
// `params` parameters all trained, sharded over `shard` data-parallel ranks by
// ZeRO stage `t.zero_stage`. Stage 1: optimizer / N_d; 2: + gradients; 3: + weights.
struct ModelStates {
    double weights = 0, gradients = 0, optimizer = 0, master = 0;
    [[nodiscard]] double total() const { return weights + gradients + optimizer; }
};
[[nodiscard]] ModelStates model_states(double params, const TrainingSetup& t, double shard);
// The same with the divisors of a ShardPlan.
[[nodiscard]] ModelStates model_states(double params, const BytesPerParam& b, const StateDivisors& d);

struct MemoryBreakdown {
    double weights = 0;
    double gradients = 0;
    double ddp_buckets = 0;     // the part of `gradients` that is torch DDP's bucket copy
    // Gradients that exist only from late in backward to the step (zero_grad
    // set_to_none frees them between steps): not in `gradients`, which holds what
    // backward's peak holds; `temporary` carries them when the step is the peak.
    double grads_at_step = 0;
    // Every gradient the run keeps, whenever it exists.
    [[nodiscard]] double all_gradients() const { return gradients + grads_at_step; }
    // The part of `fragmentation` that is those gradients' blocks in FSDP's own
    // stream pool, reserved but unusable by the compute stream (memory.cpp).
    double stream_pool = 0;
    double optimizer = 0;       // includes master weights
    double master_weights = 0;  // the part of `optimizer` that is the fp32 master copy
    double activations = 0;
    double logits = 0;
    double temporary = 0;
    // DeepSpeed's optimizer-step gradient copies (memory.cpp); when they outgrow
    // what backward holds, the peak is at the step: `temporary` then carries their
    // excess over the freed activations, logits and backward buffers.
    double step_copies = 0;
    bool peak_at_step = false;
    // Gradients freed between steps make the peak at backward's end instead: the
    // gradients made again beside the last layer's working set (memory.cpp).
    bool peak_at_backward_end = false;
    // The part of `fragmentation` that is the step copies' own segments: those of
    // the copies no block backward freed could hold (memory.cpp).
    double step_segments = 0;
    // The part of `fragmentation` that is layers gathered ahead of the compute
    // (training.hpp gathers_ahead_of_compute): each gathered buffer is freed with
    // record_stream on the compute stream, and the caching allocator holds its
    // block until that stream has passed. torch counts such a tensor out of the
    // allocated bytes at free() but keeps its block active and reserved
    // (c10/cuda/CUDACachingAllocator.cpp free / insert_events): in active() and
    // reserved(), not in `allocated`; at most what the device has free beside
    // everything else (the allocator reclaims them before it would run out).
    double gathered_ahead = 0;
    double framework = 0;
    // The part of `framework` that is NCCL buffers, and how many communicators
    // hold them (sharding.hpp communicators()).
    double nccl_buffers = 0;
    int nccl_communicators = 0;
    // The part of `nccl_buffers` that is NVLink SHARP buffers (NVSwitch multicast).
    double nccl_nvls = 0;
    // The part of `optimizer` a paged optimizer keeps in CUDA unified memory
    // (training.hpp paged_optimizer): on the device while it has room (nvidia-smi
    // counts it), never in torch's allocated or reserved bytes.
    double managed = 0;
    double fragmentation = 0;
    // The part of `fragmentation` that is the allocator's share of the transient
    // bytes (data/defaults.toml [memory] reserve_fraction_*), no more than the
    // device has free: a failed cudaMalloc makes it return its unsplit cached
    // blocks and retry. `reserve_cut` is what the share would be beyond that.
    double transient_reserve = 0;
    double reserve_cut = 0;
    double total = 0;           // everything above except master_weights (already in optimizer)
    double allocated = 0;       // tensor peak: total - managed - framework - fragmentation
    // What the caching allocator holds at that peak (torch.cuda.max_memory_reserved).
    [[nodiscard]] double reserved() const { return allocated + fragmentation; }
    // Blocks in use or awaiting their streams (memory_stats active_bytes.all.peak).
    [[nodiscard]] double active() const { return allocated + gathered_ahead; }
    double capacity = 0;
    double cpu = 0;             // host memory per GPU (offload, paged optimizer pages included)
    double nvme = 0;            // NVMe bytes per GPU (offload to NVMe)
    double paged_out = 0;       // paged optimizer states that spill to the host
    // Host memory one GPU's process may use: the node's RAM over the GPUs on the
    // node (0 = node RAM not given: not checked).
    double host_capacity = 0;
    [[nodiscard]] bool host_fits() const { return host_capacity <= 0 || cpu <= host_capacity; }
    // (A paged optimizer fills the device to its capacity exactly: the sum of the
    // terms may round a few ulps past it.)
    [[nodiscard]] bool fits() const { return total <= capacity * (1.0 + 1e-12) && host_fits(); }
    // The peak less what is given back before an allocation would fail: layers
    // gathered ahead of the compute (they fill only what the device has spare), the
    // step copies' own segments and the allocator's share of the transient bytes
    // (cached blocks, released and retried on a failed cudaMalloc), and
    // a paged optimizer's resident states (the driver evicts unified-memory pages
    // to the host under pressure: bitsandbytes' paged optimizers exist to absorb
    // memory spikes, Dettmers et al. 2023, Sec. 3).
    [[nodiscard]] double firm() const { return total - gathered_ahead - step_segments - transient_reserve - stream_pool - managed; }
    // What the run could still take before an out-of-memory: capacity less firm().
    [[nodiscard]] double headroom() const { return capacity - firm(); }
};

struct StageMemory {
    int stage = 0;
    int layers = 0;
    double microbatches_in_flight = 0;  // layer-weighted, as stored at the peak
    MemoryBreakdown mem;
};

struct MemoryEstimate {
    std::vector<StageMemory> stages;  // one per distinct stage kind (first, middle, last) or all on request
    int worst = 0;                    // index into stages
    std::int64_t trainable_params = 0;
    std::int64_t total_params = 0;
    [[nodiscard]] const MemoryBreakdown& peak() const { return stages[static_cast<size_t>(worst)].mem; }
};

// Layers held by pipeline stage i (remainders go to the last stages, which keep
// fewer micro-batches in flight).
[[nodiscard]] int layers_on_stage(std::int64_t layers, int pp, int stage);
// The same under the layout's split: with split_counts_embedding /
// split_counts_loss (Megatron-Core megatron/core/transformer/transformer_block.py
// get_num_layers_to_build) the L + e + l units split evenly over the pp stages
// (the rules require pp x vp to divide them) and the first stage builds e, the
// last l, transformer layers fewer. Without them, layers_on_stage above.
[[nodiscard]] int layers_on_stage(std::int64_t layers, const ParallelLayout& lay, int stage);

// Trainable parameters of LoRA adapters in one layer (before TP), counted from
// the shapes: the cross-check of the step graph's adapter weights (as
// count_params is for the base), not used by the estimates.
[[nodiscard]] std::int64_t lora_params_per_layer(const ModelSpec& m, const LoraConfig& l);

// Evaluates memory. With all_stages = false only the distinct stage kinds are
// computed (first, one middle, last), which is what the worst case needs.
// The scenario must be valid (see validate()).
[[nodiscard]] MemoryEstimate estimate_memory(const Scenario& s, bool all_stages = false);

// Same, reusing a layer graph built once for the model and setup (fast path for
// searches and benchmarks).
[[nodiscard]] MemoryEstimate estimate_memory(const Scenario& s, const LayerGraph& g, bool all_stages = false);

}  // namespace trainplan
