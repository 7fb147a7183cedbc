// How the model is trained: method, precision, optimizer, sharding, recompute,
// batch and the parallel layout; plus the Scenario that ties model, cluster and
// setup together.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainplan/calibration.hpp"
#include "trainplan/hardware.hpp"
#include "trainplan/model.hpp"
#include "trainplan/result.hpp"

namespace trainplan {

enum class Method { Full, LoRA, QLoRA };
enum class Precision { FP32, FP16Mixed, BF16Mixed, BF16, FP8Mixed };
enum class OptimizerKind { AdamW, AdamW8bit, SGD, SGDMomentum, Adafactor, Lion };
enum class Recompute { None, Selective, Full, PerOp };
// Which layers full recompute checkpoints (Megatron-LM --recompute-method; torchtitan's
// "checkpoint every k-th block"); recompute_layers is N (uniform, block) or k (every).
enum class RecomputeMethod { Uniform, Block, Every };
enum class Offload { None, CPU, NVMe };
enum class Schedule { OneF1B, Interleaved, GPipe };
enum class QuantType { NF4, FP4, GPTQ };
enum class FsdpStrategy { None, FullShard, ShardGradOp, HybridShard, NoShard };
// The ZeRO stage an FSDP strategy shards like (PyTorch FSDP docs: FULL_SHARD and
// HYBRID_SHARD = ZeRO-3 within their shard group, SHARD_GRAD_OP = ZeRO-2, NO_SHARD
// = DDP); `zero` itself when FSDP is not used.
[[nodiscard]] constexpr int fsdp_zero_stage(FsdpStrategy f, int zero) {
    switch (f) {
        case FsdpStrategy::None: return zero;
        case FsdpStrategy::ShardGradOp: return 2;
        case FsdpStrategy::NoShard: return 0;
        case FsdpStrategy::FullShard:
        case FsdpStrategy::HybridShard: return 3;
    }
    return zero;
}
// Fused attention kernel generation (flash_attention = false means eager attention).
enum class AttentionKernel { Flash1, Flash2, Flash3 };
// What the training loop keeps of the model's outputs through backward: nothing
// beyond the loss, the logits (`outputs = model(batch); loss = outputs.loss`
// keeps `outputs.logits` alive), or the logits and past_key_values (the K/V of
// every layer, when the model runs with use_cache on).
enum class HeldOutputs { None, Logits, LogitsKv };
// The NCCL release a run links, as far as it changes what a rank's communicators
// hold: NVLink SHARP (NVLS) buffers on a multicast-capable NVSwitch (memory.cpp,
// sharding.cpp communicators()). NCCL's src/transport/nvls.cc at each tag:
// 2.17-2.19 and 2.21 set NVLS up at init on every communicator with more than
// two GPUs of a node, 2.20 only on single-node ones (ncclNvlsInit: nNodes > 1 ->
// off); from 2.22 the buffers are allocated at the first NVLS collective and are
// smaller (ncclNvlsBufferSetup). NvlsOff: NCCL_NVLS_ENABLE=0 (NeMo-Framework-
// Launcher PR #127, JAX-Toolbox PR #383 set it to save memory).
enum class NcclRelease { V2_19, V2_20, V2_21, Current, NvlsOff };

// Whose bookkeeping of mixed-precision training is assumed. They differ in what
// is kept per parameter (see memory.cpp for the table and sources).
enum class Framework {
    DeepSpeed,   // ZeRO paper: 2 B weights + 2 B grads + 12 B optimizer (fp32 master, m, v)
    Megatron,    // fp32 main grads: 2 + 4 + 12
    PyTorchAMP,  // torch.autocast: fp32 weights and grads, 16-bit weight copies cached
};

// The training stack whose model code and runtime produce the run: it selects the
// kernel and memory conventions a run really has (loss implementation, norm
// precision, fused element-wise ops, allocator behaviour). The conventions of
// each, with their sources, are data: data/defaults.toml [stack.*] (policy.hpp
// StackConventions). `framework` stays the separate fact of whose mixed-precision
// bookkeeping holds the states (an HF model may run under DeepSpeed or autocast).
enum class Stack {
    GenericEager,  // plain PyTorch model code under torch.autocast (the default)
    HfPeft,        // Hugging Face transformers (+ PEFT, Trainer / accelerate)
    HfFused,       // transformers with flash-attn CE / RMSNorm patched in (whyNLP/tinyllama)
    Unsloth,
    LitGPT,
    LitGPT2023,    // Lit-GPT before 2023-10-24 (PR #606): RMSNorm in the activation dtype
    Torchtitan,
    Torchtitan2025,  // torchtitan before 2025-10-14 (PR #1870): Qwen3's q_norm / k_norm gather q and k to every TP rank
    Torchtune,
    Torchtune2024,  // torchtune recipes before 2024-07-28 (PR #1235): whole fp32 logits kept through backward
    DeepSpeed,     // DeepSpeed engine over Hugging Face model code (DeepSpeed-Chat, HF + ZeRO)
    MegatronCore,  // Megatron-LM / Megatron-Core / NeMo
    MegatronCore07,  // Megatron-Core up to core_v0.7.0: the loss's out-of-place max subtraction
    MegatronLegacy,  // Megatron-LM's megatron/model before Megatron-Core, and forks of it (Megatron-LLaMA)
    MegatronDeepSpeed,  // Microsoft's Megatron-DeepSpeed fork of it: DeepSpeed's activation checkpointing (--checkpoint-in-cpu)
    LlmFoundry,      // MosaicML llm-foundry on Composer (PyTorch FSDP, flash-attn's fused cross-entropy)
    HfLiger,         // transformers patched by Liger Kernel (RMSNorm, RoPE, SwiGLU, fused linear cross-entropy)
    FlashAttnTraining,  // Dao-AILab/flash-attention training/ (fused dense, dropout-add-LayerNorm, in-place cross-entropy)
};

[[nodiscard]] const char* to_string(Method v);
[[nodiscard]] const char* to_string(Precision v);
[[nodiscard]] const char* to_string(OptimizerKind v);
[[nodiscard]] const char* to_string(Recompute v);
[[nodiscard]] const char* to_string(RecomputeMethod v);
[[nodiscard]] const char* to_string(Offload v);
[[nodiscard]] const char* to_string(Schedule v);
[[nodiscard]] const char* to_string(QuantType v);
[[nodiscard]] const char* to_string(FsdpStrategy v);
[[nodiscard]] const char* to_string(Framework v);
[[nodiscard]] const char* to_string(Stack v);
[[nodiscard]] const char* to_string(AttentionKernel v);
[[nodiscard]] const char* to_string(HeldOutputs v);
[[nodiscard]] const char* to_string(NcclRelease v);

// LoRA target modules (bit flags).
enum LoraTarget : unsigned {
    kLoraQ = 1u << 0, kLoraK = 1u << 1, kLoraV = 1u << 2, kLoraO = 1u << 3,
    kLoraGate = 1u << 4, kLoraUp = 1u << 5, kLoraDown = 1u << 6,
    kLoraAttention = kLoraQ | kLoraK | kLoraV | kLoraO,
    kLoraMlp = kLoraGate | kLoraUp | kLoraDown,
    kLoraAll = kLoraAttention | kLoraMlp,
};

struct LoraConfig {
    int rank = 16;
    double alpha = 32;
    unsigned targets = kLoraAll;
    double dropout = 0.05;  // > 0 stores a dropped copy of each adapted input
    // Also train the embedding and LM head in full: PEFT modules_to_save keeps the
    // frozen original and trains a copy of each (peft ModulesToSaveWrapper).
    bool train_embeddings = false;
};

struct QLoraConfig {
    QuantType quant = QuantType::NF4;
    bool double_quant = true;
    int block_size = 64;
    // PEFT's prepare_model_for_kbit_training (peft utils/other.py; run by trl's
    // SFTTrainer on a 4-bit model, the QLoRA notebooks, Qwen's and many other
    // fine-tuning scripts): every parameter that is not quantized -- embeddings,
    // norm weights, the LM head -- is cast to fp32 (bitsandbytes only: it leaves
    // GPTQ models as they are). The embedding then emits fp32, the norms return
    // fp32 (weight * x.to(input_dtype)), each 4-bit linear casts its input to the
    // compute dtype and returns its output .to(input dtype): the residual stream,
    // each layer's checkpointed input, the norm outputs and the MLP's element-wise
    // tensors are fp32 while the matmuls still run in 16 bits. The LoRA adapters
    // made after it stay fp32 (their base weight is not a float).
    bool kbit_upcast = false;
};

struct ParallelLayout {
    int tp = 1, pp = 1, dp = 1, ep = 1;
    int vp = 1;  // interleaved model chunks per pipeline stage
    bool sequence_parallel = false;
    Schedule schedule = Schedule::OneF1B;
    // Context parallelism: each sequence split over `cp` ranks (Megatron-Core
    // --context-parallel-size; ring attention exchanges K/V between them).
    int cp = 1;
    // Megatron-Core --account-for-embedding-in-pipeline-split /
    // --account-for-loss-in-pipeline-split: the embedding (loss) counts as one
    // layer when the layers are split over the stages, so the first (last)
    // stage holds one transformer layer fewer (layers_on_stage).
    bool split_counts_embedding = false;
    bool split_counts_loss = false;
    // Layers the split distributes: the transformer layers plus the counted
    // embedding and loss (Megatron-Core get_num_layers_to_build).
    [[nodiscard]] std::int64_t split_units(std::int64_t layers) const {
        return layers + (split_counts_embedding ? 1 : 0) + (split_counts_loss ? 1 : 0);
    }
    [[nodiscard]] int model_parallel() const { return tp * pp * cp; }
    [[nodiscard]] int world() const { return tp * pp * cp * dp; }
};

struct TrainingSetup {
    Method method = Method::Full;
    LoraConfig lora;
    QLoraConfig qlora;
    Precision precision = Precision::BF16Mixed;
    // fp32 matmuls on tensor cores in TF32 (torch.backends.cuda.matmul.allow_tf32; off by
    // default since PyTorch 1.12). Only read when precision = fp32 on a GPU with a TF32 rate.
    bool tf32 = false;
    // FP8 weights alone (Transformer Engine fp8_model_init: NeMo fp8_params,
    // Megatron-Core --fp8-param-gather; torchao's FSDP float8 all-gather): the linear
    // layers keep no 16-bit copy, and data parallelism gathers parameters at 1 B
    // per element. Needs precision fp8-mixed.
    bool fp8_params = false;
    OptimizerKind optimizer = OptimizerKind::AdamW;
    Framework framework = Framework::DeepSpeed;
    Stack stack = Stack::GenericEager;    // default megatron-core when framework = megatron (resolver)
    int zero_stage = 0;                   // 0..3
    FsdpStrategy fsdp = FsdpStrategy::None;
    Offload optimizer_offload = Offload::None;
    Offload param_offload = Offload::None;
    Recompute recompute = Recompute::None;
    RecomputeMethod recompute_method = RecomputeMethod::Uniform;  // full recompute only
    int recompute_layers = 0;  // uniform: layers per checkpoint (0 = 1); block: layers checkpointed per stage (0 = all); every: k (0 = 1)
    // Saved activations streamed to host memory in forward and back before their
    // layer's backward (DeepSpeed activation checkpointing cpu_checkpointing,
    // Megatron-Core --cpu-offloading).
    bool activation_offload = false;
    // The optimizer steps each parameter as soon as its gradient is accumulated in
    // backward and frees that gradient (torchtune `optimizer_in_bwd: True`, built on
    // torch.Tensor.register_post_accumulate_grad_hook; PyTorch tutorial "How to save
    // memory by fusing the optimizer step into the backward pass"): the full gradient
    // set is never resident, only the gradient of the tensor being stepped. Needs
    // grad_accum = 1 (rule optimizer-in-backward-no-accumulation).
    bool optimizer_in_backward = false;
    bool flash_attention = true;
    AttentionKernel attention_kernel = AttentionKernel::Flash2;  // PyTorch SDPA / flash-attn 2
    // Model outputs the training loop holds through backward (memory.cpp).
    HeldOutputs held_outputs = HeldOutputs::None;
    // FSDP's all-gather rate limiter (FullyShardedDataParallel limit_all_gathers,
    // default True since PyTorch 2.1, PR #104900): at most two layers gathered at
    // once. Off, the host runs ahead of the GPU and each all-gather it issues holds
    // its unsharded layer until the GPU catches up (memory.cpp).
    bool fsdp_limit_all_gathers = true;
    // DeepSpeed ZeRO-3 as first released (v0.3.13-v0.5.x; partition_parameters.py
    // _allgather_param): every parameter tensor gathered on its own after a device
    // synchronize, into a list of one output view per rank that torch copies out one
    // by one -- host work that grows with the group, per tensor and pass, with the GPU
    // idle (time.cpp). v0.6.0 on gathers coalesced sets into one flat buffer.
    bool ds_gather_per_tensor = false;
    // DeepSpeed ZeRO-1/2 gradient buckets (zero_optimization.reduce_bucket_size,
    // elements; overlap_comm): with contiguous_gradients (default true) stages 1-2
    // copy each gradient into a reduce bucket of reduce_bucket_size elements in
    // the gradient dtype, two of them under overlap_comm (DeepSpeed
    // runtime/zero/stage_1_and_2.py, backward: ipg_buffer). DeepSpeed's defaults:
    // 5e8 elements, overlap_comm false for stages 1 and 2 (DeepSpeed config docs).
    // ZeRO-3 gathers weights on a stream of its own under overlap_comm, true by
    // default for stage 3 (zero/config.py overlap_comm_valid; parameter_offload.py:
    // the all-gather stream is the default stream without it). Unset: DeepSpeed's
    // default for the stage (ds_overlap_comm_on).
    double ds_reduce_bucket = 5e8;
    std::optional<bool> ds_overlap_comm;
    // DeepSpeed before v0.12.4 (PR #4695 added use_multi_rank_bucket_allreduce,
    // default on): ZeRO-1/2 with reduce_scatter (the default) reduce each bucket
    // one destination rank at a time (average_tensor -> allreduce_no_retain ->
    // allreduce_and_copy, rank forced to None: an all-reduce of that rank's
    // slice), and under overlap_comm allreduce_and_copy synchronizes the device
    // before each (v0.12.3 stage_1_and_2.py: get_accelerator().synchronize()).
    // The host waits in backward's gradient hook for the compute queued so far
    // and for the previous slice's reduction, so nothing overlaps: the whole
    // reduction is exposed, in dp collectives per bucket, not one.
    bool ds_reduce_per_rank = false;
    // A bitsandbytes paged optimizer (PagedAdamW, paged_adamw_32bit / _8bit): its
    // states are allocated in CUDA unified memory (bitsandbytes functional.py
    // get_paged: cudaMallocManaged), not by PyTorch's caching allocator, so
    // torch.cuda.max_memory_allocated / _reserved never count them while
    // nvidia-smi does, as long as the pages stay on the device; the driver
    // evicts them to the host when the device runs out. Unset: on for QLoRA
    // (artidoro/qlora's paged_adamw_32bit) outside DeepSpeed's ZeRO engine, off
    // otherwise (paged_optimizer_on).
    std::optional<bool> paged_optimizer;
    // Full recompute as torch.utils.checkpoint's reentrant implementation
    // (use_reentrant=True: CheckpointFunction reruns the layer in backward on
    // detached inputs that require grad and reads their .grad); false: the
    // non-reentrant one (saved-tensor hooks; FSDP's checkpoint_wrapper default).
    // Unset: the stack's ([stack.*] checkpoint_reentrant; reentrant_checkpointing).
    std::optional<bool> checkpoint_reentrant;
    // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator maps
    // segments that grow in place, and keeps less of what it frees unusable. Unset:
    // the stack's ([stack.*] expandable_segments; memory.hpp expandable_segments_on).
    std::optional<bool> expandable_segments;
    // Liger's fused linear cross-entropy (liger-kernel
    // ops/fused_linear_cross_entropy.py; transformers' use_liger_kernel=True,
    // LigerFusedLinearCrossEntropyLoss): the LM head and the loss run together
    // over chunks of the tokens sized so one chunk's logits are about tokens x
    // hidden elements; the logits are never whole, and none is kept for backward
    // (opgraph.cpp fused_linear_ce_bytes). Off: the stack's own loss.
    std::optional<bool> fused_linear_ce;  // unset: the stack's default ([stack.*] fused_linear_ce_default)
    // DeepSpeed ZeRO-3 zero_optimization.sub_group_size (elements; DeepSpeed's
    // default 1e9, runtime/zero/config.py): the step walks the rank's partition
    // in sub-groups of at least this many elements (stage3.py
    // _create_fp16_sub_groups), one sub-group's gradient copies at a time.
    double ds_sub_group_size = 1e9;
    // DeepSpeed ZeRO-3 gathers one module that owns weights at a time and prefetches
    // the next ones up to zero_optimization.stage3_prefetch_bucket_size elements
    // (DeepSpeed's default 5e7; the HF integration's "auto" writes 0.9 h^2). After a
    // module's forward it keeps the parameters that the trace uses again within
    // stage3_max_reuse_distance elements of fetches (default 1e9): at the turn from
    // forward to backward the head and the last layers stay gathered
    // (runtime/zero/partitioned_param_coordinator.py fetch_sub_module,
    // __params_to_release; defaults in runtime/zero/config.py).
    double ds_prefetch_bucket = 5e7;
    double ds_max_reuse_distance = 1e9;
    // torch.nn.parallel.DistributedDataParallel gradient_as_bucket_view (PyTorch
    // docs; default False, and accelerate / the HF Trainer, Lightning / Fabric and
    // LitGPT leave it so). Off, DDP's Reducer keeps flat all-reduce buckets covering
    // every trainable parameter and copies the gradients into them: a second
    // gradient-sized allocation ("the saved memory size will be equal to the total
    // gradients size" when on). On, the gradients are views into the buckets.
    bool ddp_bucket_view = false;
    bool tp_comm_overlap = false;  // Megatron-Core --tp-comm-overlap / --overlap-param-gather
    // Reduce gradients in 16 bits even where they are kept in fp32 (Megatron
    // --grad-reduce-in-bf16; FSDP MixedPrecision(reduce_dtype=bf16)).
    bool grad_reduce_bf16 = false;
    // Gradient reduction overlapped with backward, bucket by bucket (PyTorch
    // DDP, Megatron --overlap-grad-reduce); off: reduced after the last
    // micro-batch's backward (Megatron's DistributedOptimizer without it).
    bool overlap_grad_reduce = true;
    // Megatron's gradient accumulation fusion (APEX fused_weight_gradient_mlp_cuda,
    // on by default): weight-gradient GEMMs accumulate straight into the fp32
    // main_grad. Off (--no-gradient-accumulation-fusion): each writes a 16-bit .grad
    // that a separate kernel adds to main_grad every micro-batch.
    bool grad_accum_fusion = true;
    NcclRelease nccl = NcclRelease::Current;
    std::int64_t seq_len = 2048;
    std::int64_t micro_batch = 1;
    std::int64_t grad_accum = 1;          // micro-batches per step per DP replica
    ParallelLayout layout;
    // Overrides of documented defaults (see memory.hpp); negative = use default.
    double framework_overhead_bytes = -1;
    double fragmentation_fraction = -1;

    [[nodiscard]] std::int64_t global_batch() const { return micro_batch * grad_accum * layout.dp; }
    [[nodiscard]] double tokens_per_step() const { return static_cast<double>(global_batch()) * static_cast<double>(seq_len); }
    [[nodiscard]] bool trains_base_weights() const { return method == Method::Full; }
};

// DeepSpeed runs ZeRO itself (no FSDP doing the sharding): its optimizer keeps
// flat 16-bit parameter groups and fp32 partitions of its own.
[[nodiscard]] constexpr bool runs_deepspeed_zero(const TrainingSetup& t) {
    return t.framework == Framework::DeepSpeed && t.fsdp == FsdpStrategy::None && t.zero_stage >= 1;
}

// A mixed-precision engine that casts the model itself runs the step, with no
// torch.autocast: DeepSpeed's ZeRO optimizer (stage >= 1; transformers' Trainer turns
// autocast off when DeepSpeed is on) or Megatron. It keeps an fp32 master of every
// trainable weight (QLoRA adapters too), and ops outside the model's own casts run
// in the 16-bit dtype (a loss on 16-bit logits: opgraph loss_copies).
[[nodiscard]] constexpr bool engine_casts_model(const TrainingSetup& t) {
    return runs_deepspeed_zero(t) || (t.framework == Framework::Megatron && t.fsdp == FsdpStrategy::None);
}

// A paged optimizer as the run has it: as set, else QLoRA's recipe (artidoro/qlora
// paged_adamw_32bit) unless a DeepSpeed ZeRO engine builds the optimizer itself.
[[nodiscard]] constexpr bool paged_optimizer_on(const TrainingSetup& t) {
    return t.paged_optimizer.value_or(t.method == Method::QLoRA && !runs_deepspeed_zero(t));
}

// DeepSpeed's overlap_comm as the run has it: as set, else DeepSpeed's default,
// on for stage 3 and off for stages 1-2 (runtime/zero/config.py overlap_comm_valid).
[[nodiscard]] constexpr bool ds_overlap_comm_on(const TrainingSetup& t) {
    return t.ds_overlap_comm.value_or(t.zero_stage == 3);
}

// DeepSpeed's ZeRO-1/2 optimizer (runtime/zero/stage_1_and_2.py) runs the step:
// contiguous-gradient reduce buckets reduced by all-reduce (overlap_comm on its
// own stream).
[[nodiscard]] constexpr bool runs_deepspeed_zero12(const TrainingSetup& t) {
    return runs_deepspeed_zero(t) && t.zero_stage <= 2;
}

// DeepSpeed's ZeRO-3 optimizer (runtime/zero/stage3.py): the step works through
// the partition one sub_group_size sub-group at a time.
[[nodiscard]] constexpr bool runs_deepspeed_zero3(const TrainingSetup& t) {
    return runs_deepspeed_zero(t) && t.zero_stage == 3;
}

// Whether the host issues all-gathers ahead of the GPU's compute, each gathered
// layer resident until the compute stream has used it (memory.cpp): FSDP with its
// rate limiter off, and DeepSpeed ZeRO-3 under overlap_comm, which gathers on a
// stream of its own and whose fetch limit (runtime/zero/partitioned_param_coordinator.py
// fetch_sub_module: at most __max_ongoing_fetch_events = 2 pending) waits on events
// of that stream -- the collectives, not the compute that uses and then frees their
// output (partition_parameters.py free_param: record_stream on the compute stream).
// Without overlap_comm DeepSpeed gathers on the compute stream, whose order frees
// each layer for the next one.
[[nodiscard]] constexpr bool gathers_ahead_of_compute(const TrainingSetup& t) {
    return (t.fsdp != FsdpStrategy::None && !t.fsdp_limit_all_gathers) || (runs_deepspeed_zero3(t) && ds_overlap_comm_on(t));
}

// Plain torch DistributedDataParallel replicates the model: autocast or pure
// 16-bit bookkeeping, no FSDP, no optimizer sharding of an engine, more than one
// data-parallel rank (one process trains alone, unwrapped).
[[nodiscard]] constexpr bool runs_torch_ddp(const TrainingSetup& t) {
    return t.framework == Framework::PyTorchAMP && t.fsdp == FsdpStrategy::None && t.zero_stage == 0 && t.layout.dp > 1;
}

// The training loop frees every gradient after the step and backward makes them
// again: torch's optimizer.zero_grad() / Module.zero_grad() set .grad to None by
// default since PyTorch 2.0 (release notes: "set_to_none=True by default"), as
// the HF Trainer, Lightning / Fabric, torchtune and torchtitan call them. Not
// while micro-batches accumulate into them, not where an engine keeps gradient
// buffers of its own (DeepSpeed, Megatron's contiguous main_grad), not where
// DDP's gradients are views into its persistent buckets, and not with the
// optimizer run in backward (one gradient at a time already) or offloaded.
[[nodiscard]] constexpr bool grads_freed_between_steps(const TrainingSetup& t) {
    return t.framework == Framework::PyTorchAMP && !runs_deepspeed_zero(t) && t.grad_accum == 1 && t.layout.pp == 1 &&
           !(runs_torch_ddp(t) && t.ddp_bucket_view) && !t.optimizer_in_backward && t.optimizer_offload == Offload::None;
}

// The recompute setting in words ("no recompute", "selective recompute", "full
// recompute of the first 2 layer(s) per stage", ...), for reports and summaries.
[[nodiscard]] std::string recompute_words(const TrainingSetup& t);

// What surrounds the step: data pipeline, clocks, and the economics of a run.
// Zero means "not modeled / use the documented default" where noted.
struct RunOptions {
    // Data pipeline. 0 workers = pre-tokenized data that never stalls the GPUs.
    int loader_workers = 0;                  // per GPU (DataLoader num_workers)
    double worker_samples_per_s = 0;         // samples one worker prepares per second (measure yours)
    double storage_bytes_per_s = 0;          // per node; 0 = not a limit
    double bytes_per_sample = 0;             // read from storage per sample; 0 = 2 B per token
    // Sustained clock as a fraction of boost (thermal or power limits); 1 = none.
    double sustained_clock = 1.0;
    // Economics.
    double tokens_to_train = 0;              // token budget; 0 = none
    double rent_usd_per_gpu_hour = 0;        // 0 = not given
    double purchase_usd_per_gpu = 0;         // 0 = the GPU preset's price, if any
    double amortization_years = 3;           // straight-line over this period
    double electricity_usd_per_kwh = 0.12;
    double pue = 1.2;                        // facility power usage effectiveness
    double node_overhead_w_per_gpu = 0;      // CPUs, NICs, fans per GPU; 0 = default (see time.cpp)
    double utilization_power_fraction = 0;   // board power at load as a fraction of TDP; 0 = default
};

struct Scenario {
    ModelSpec model;
    ClusterSpec cluster;
    TrainingSetup setup;
    RunOptions run;
    Calibration calibration;  // fitted to measured runs (calibrate.hpp); identity by default
};

// Checks that a scenario is a possible configuration: every rule of rules.hpp
// (heads divisible by TP, GPU count = TP x PP x DP, schedules, ranges). Each
// broken rule is one diagnostic naming the key, its value and the limit.
// Empty = valid. Implemented in rules.cpp.
[[nodiscard]] std::vector<Diagnostic> validate(const Scenario& s);

}  // namespace trainplan
