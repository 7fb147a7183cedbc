#include "trainplan/memory.hpp"

#include <algorithm>
#include <cmath>

#include "trainplan/policy.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

namespace trainplan {

const MemoryDefaults& memory_defaults() {
    static const MemoryDefaults d = [] {
        // The values and their sources: data/defaults.toml [memory].
        const Policy& p = policy();
        MemoryDefaults m;
        m.cuda_context_bytes = p.cuda_context_bytes;
        m.library_workspace_bytes = p.library_workspace_bytes;
        m.communicator_bytes = p.communicator_bytes;
        m.communicator_pair_bytes = p.communicator_pair_bytes;
        m.nvls_head_bytes_2_20 = p.nvls_head_bytes_2_20;
        m.nvls_head_bytes_2_21 = p.nvls_head_bytes_2_21;
        m.nvls_head_bytes = p.nvls_head_bytes;
        m.grad_bucket_bytes = p.grad_bucket_bytes;
        return m;
    }();
    return d;
}

bool expandable_segments_on(const TrainingSetup& t) {
    return t.expandable_segments.value_or(policy().stack(t.stack).expandable_segments);
}

namespace {

// Optimizer state bytes per trainable parameter (excluding any fp32 master copy).
// state_bytes: bytes of one state element (4 for fp32 states, 2 under pure bf16).
double optimizer_state_bytes(OptimizerKind o, double state_bytes, double adafactor_per_param) {
    switch (o) {
        case OptimizerKind::AdamW: return 2 * state_bytes;      // m and v (Kingma & Ba 2015)
        case OptimizerKind::AdamW8bit: return 2.0 + 2.0 * 4 / 2048;  // bitsandbytes: 8-bit m, v + fp32 absmax per 2048-block
        case OptimizerKind::SGD: return 0;
        case OptimizerKind::SGDMomentum: return state_bytes;    // momentum buffer
        case OptimizerKind::Lion: return state_bytes;           // one momentum (Chen et al. 2023)
        case OptimizerKind::Adafactor: return adafactor_per_param;  // factored second moment (Shazeer & Stern 2018)
    }
    return 0;
}

}  // namespace

double parameter_storage_bytes(const TrainingSetup& t) {
    // torch autocast leaves the parameters fp32 and casts a copy per use; every
    // other setup stores them in the compute dtype (16-bit beside an fp32 master
    // under DeepSpeed / Megatron, fp32 under fp32 training).
    const bool mixed = t.precision == Precision::FP16Mixed || t.precision == Precision::BF16Mixed || t.precision == Precision::FP8Mixed;
    return mixed && t.framework == Framework::PyTorchAMP ? 4.0 : activation_bytes_per_elem(t.precision);
}

double parameter_gather_bytes(const TrainingSetup& t) { return t.fp8_params ? 1.0 : activation_bytes_per_elem(t.precision); }

double frozen_linear_bytes(const TrainingSetup& t) {
    if (t.method == Method::QLoRA) return qlora_bits_per_param(t.qlora) / 8.0;
    return t.fp8_params ? 1.0 : activation_bytes_per_elem(t.precision);
}

double qlora_adapter_bytes(const TrainingSetup& t) { return fp32_stream(t) ? 4.0 : 2.0; }

double gathered_bytes(const TrainingSetup& t, const StageParams& p) {
    const double frozen = t.method == Method::Full ? 0.0 : p.frozen_linear_dense + p.frozen_linear_expert;
    return frozen * frozen_linear_bytes(t) + (p.total() - p.idle - frozen) * parameter_gather_bytes(t);
}

const char* step_copies_name(const TrainingSetup& t) {
    return runs_deepspeed_zero(t) ? "gradient copies" : "AdamW foreach temporaries";
}

BytesPerParam bytes_per_trainable_param(const TrainingSetup& t) {
    BytesPerParam b;
    double state = 4;
    switch (t.precision) {
        case Precision::FP32:
            b.weights = 4; b.gradients = 4; b.master = 0;
            break;
        case Precision::BF16:
            // Pure bf16 (e.g. Lightning "bf16-true"): parameters, gradients and the
            // optimizer states all in bf16, no master copy.
            b.weights = 2; b.gradients = 2; b.master = 0; state = 2;
            break;
        case Precision::FP16Mixed:
        case Precision::BF16Mixed:
        case Precision::FP8Mixed:
            switch (t.framework) {
                case Framework::DeepSpeed:  // ZeRO paper: 2 + 2 + (4 + 8) = 16 B (K = 12)
                    b.weights = 2; b.gradients = 2; b.master = 4;
                    break;
                case Framework::Megatron:   // fp32 main grads: 2 + 4 + 12 = 18 B
                    // --grad-reduce-in-bf16 keeps the main-grad buffer in bf16
                    // (Megatron-Core DDP grad_reduce_in_fp32 = False): 16 B.
                    b.weights = 2; b.gradients = t.grad_reduce_bf16 ? 2 : 4; b.master = 4;
                    break;
                case Framework::PyTorchAMP: // fp32 params and grads; autocast caches
                    b.weights = parameter_storage_bytes(t) + 2;  // 16-bit copies of the weights for the step
                    b.gradients = 4; b.master = 0;
                    // FSDP that shards casts inside its all-gather (MixedPrecision /
                    // MixedPrecisionPolicy param_dtype): the 16-bit weights are the
                    // gathered unit, freed at reshard (a temporary, or held from
                    // forward to backward under SHARD_GRAD_OP: stage_states), not a
                    // persistent copy beside the fp32 shard.
                    if (t.fsdp != FsdpStrategy::None && t.fsdp != FsdpStrategy::NoShard) b.weights = 4;
                    break;
            }
            // Transformer Engine keeps an fp8 copy of each weight for the step --
            // the only copy with fp8_params under an engine that casts the model
            // (fp8_model_init; the fp32 master stays the optimizer's). (Embedding and
            // output layers, which stay 16-bit, are counted at the same bytes.)
            if (t.precision == Precision::FP8Mixed) {
                if (t.fp8_params && t.framework != Framework::PyTorchAMP) b.weights = 1;
                else b.weights += 1;
            }
            break;
    }
    // A bitsandbytes paged optimizer keeps 32-bit states whatever the parameters'
    // dtype (optim/optimizer.py Optimizer2State.init_state: optim_bits 32 ->
    // get_state_buffer(p, dtype=torch.float32)); its 8-bit variant is AdamW8bit.
    if (paged_optimizer_on(t)) state = 4;
    // Adafactor's factored moment is ~4(r+c) bytes per r x c matrix; for
    // transformer-sized matrices that is well under 0.01 B/param.
    b.optimizer_states = optimizer_state_bytes(t.optimizer, state, 0.002);
    return b;
}

ModelStates model_states(double params, const BytesPerParam& b, const StateDivisors& d) {
    ModelStates s;
    s.weights = params * b.weights / d.weights;
    s.gradients = params * b.gradients / d.gradients;
    s.master = params * b.master / d.optimizer;
    s.optimizer = params * b.optimizer() / d.optimizer;
    return s;
}

ModelStates model_states(double params, const TrainingSetup& t, double shard) {
    return model_states(params, bytes_per_trainable_param(t), zero_divisors(t.zero_stage, shard));
}

int layers_on_stage(std::int64_t layers, int pp, int stage) {
    const std::int64_t base = layers / pp;
    const std::int64_t extra = layers % pp;
    // The last `extra` stages take one more layer.
    return static_cast<int>(base + (stage >= pp - extra ? 1 : 0));
}

int layers_on_stage(std::int64_t layers, const ParallelLayout& lay, int stage) {
    if (!lay.split_counts_embedding && !lay.split_counts_loss) return layers_on_stage(layers, lay.pp, stage);
    const std::int64_t units = lay.split_units(layers);
    std::int64_t n = units / lay.pp;  // the rules require pp (x vp) to divide the units
    if (stage == 0 && lay.split_counts_embedding) --n;
    if (stage == lay.pp - 1 && lay.split_counts_loss) --n;
    return static_cast<int>(std::max<std::int64_t>(0, n));
}

std::int64_t lora_params_per_layer(const ModelSpec& m, const LoraConfig& l) {
    const std::int64_t r = l.rank, h = m.hidden;
    std::int64_t p = 0;
    auto add = [&](unsigned target, std::int64_t din, std::int64_t dout, std::int64_t copies = 1) {
        if (l.targets & target) p += copies * r * (din + dout);
    };
    if (m.packed_qkv) {
        // One q/k/v module: one adapter, A of r x h, B of (q + 2 kv) x r.
        if (l.targets & (kLoraQ | kLoraK | kLoraV)) p += r * (h + m.q_dim() + 2 * m.kv_dim());
    } else {
        add(kLoraQ, h, m.q_dim());
        add(kLoraK, h, m.kv_dim());
        add(kLoraV, h, m.kv_dim());
    }
    add(kLoraO, m.q_dim(), h);
    auto mlp = [&](std::int64_t ffn, std::int64_t copies) {
        if (m.gated()) add(kLoraGate, h, ffn, copies);
        add(kLoraUp, h, ffn, copies);
        add(kLoraDown, ffn, h, copies);
    };
    if (m.is_moe()) {
        mlp(m.moe.expert_ffn, m.moe.num_experts);
        mlp(m.moe.shared_expert_ffn, m.moe.shared_experts);
    } else {
        mlp(m.ffn, 1);
    }
    return p;
}

// Bits per parameter of 4-bit quantized base weights (Dettmers et al. 2023,
// Sec. 3): 4 bits + one fp32 absmax per block of 64 (0.5 bit); double
// quantization stores 8-bit absmax plus one fp32 per 256 blocks (0.127 bit).
double qlora_bits_per_param(const QLoraConfig& q) {
    // GPTQ int4 (auto-gptq): 4-bit weights, an fp16 scale and a 4-bit zero point
    // per group of input rows (group size: data/defaults.toml [qlora]).
    if (q.quant == QuantType::GPTQ) return 4.0 + (16.0 + 4.0) / policy().gptq_group_size;
    const double block = q.block_size;
    const double constants = q.double_quant ? 8.0 / block + 32.0 / (block * 256.0) : 32.0 / block;
    return 4.0 + constants;
}

bool fsdp_units_mix_frozen(const TrainingSetup& t) { return t.method == Method::LoRA && policy().stack(t.stack).fsdp_units_mix_frozen; }

bool fsdp_holds_input_grads(const TrainingSetup& t) {
    return t.fsdp != FsdpStrategy::None && t.recompute == Recompute::Full && (t.method == Method::LoRA || t.method == Method::QLoRA) &&
           !fsdp_units_mix_frozen(t) && reentrant_checkpointing(t);
}

namespace {

// One weight matrix of an op on a tensor-parallel rank, in parameters: an expert's
// matrix, not the stacked experts (gemm_groups), its TP share where TP splits it.
double matrix_params_per_rank(const OpDef& o, double tp) {
    return o.weight.params / std::max(1, o.gemm_groups) / (o.weight.tp_split ? tp : 1.0);
}

// What estimate_memory works with for every stage.
struct MemoryContext {
    const Scenario& s;
    const StepGraph& g;
    ShardPlan plan;
    BytesPerParam bpp;          // full training
    BytesPerParam adapter_bpp;  // trainable weights under LoRA / QLoRA
    // Bytes of one weight element in the compute dtype (fp32 under fp32
    // training, 16-bit otherwise): what a gathered, frozen or copied weight takes.
    double weight_compute_bpp = 0;
    double frozen_linear_bpp = 0;
    double gather_bpp = 0;  // bytes per element of a gathered (ZeRO-3 / FSDP) layer: gathered_bytes
    bool units_mix_frozen = false;  // FSDP units hold frozen weights beside adapters
    double framework_bytes = 0;
    // The allocator's reserve: a share of the allocated peak (a scenario's
    // `fragmentation` override, the calibration hook) plus the stack's share of
    // the transient bytes (data/defaults.toml [memory] reserve_fraction_*, by the
    // allocator's mode: expandable_segments_on).
    double frag_frac = 0, transient_frac = 0;
    double gathered_layer_params = 0;  // one layer's parameters per GPU, when ZeRO-3 / FSDP gathers them
};

MemoryContext make_context(const Scenario& s, const StepGraph& g) {
    const TrainingSetup& t = s.setup;
    const MemoryDefaults& def = memory_defaults();
    MemoryContext c{s, g, shard_plan(s), bytes_per_trainable_param(t), {}, 0, 0, 0, false, 0, 0, 0, 0};
    const bool qlora = t.method == Method::QLoRA;
    // Frozen base weight bytes per parameter (QLoRA: NF4 linear layers; FP8 alone
    // with fp8_params).
    c.weight_compute_bpp = activation_bytes_per_elem(t.precision);
    c.frozen_linear_bpp = frozen_linear_bytes(t);
    // FSDP units holding frozen base weights beside the adapters (use_orig_params,
    // data/defaults.toml fsdp_units_mix_frozen).
    c.units_mix_frozen = fsdp_units_mix_frozen(t);
    // QLoRA adapters under autocast: bf16 weights and grads, 32-bit paged AdamW
    // states (artidoro/qlora: paged_adamw_32bit); other optimizers per the table.
    // An engine that casts the model itself keeps its own bookkeeping for the
    // adapters as for any trainable weight (engine_casts_model: Qwen's Q-LoRA
    // scripts run through DeepSpeed, finetune_qlora_single_gpu.sh --deepspeed
    // ds_config_zero2.json).
    // LoRA adapters are not Transformer Engine modules: fp8_model_init leaves them
    // in 16 bits (NeMo's ParallelLinearAdapter), whatever fp8_params does to the base.
    BytesPerParam adapter_engine_bpp = c.bpp;
    if (t.fp8_params) {
        TrainingSetup plain = t;
        plain.fp8_params = false;
        adapter_engine_bpp = bytes_per_trainable_param(plain);
    }
    const double adapter_w = qlora_adapter_bytes(t);
    c.adapter_bpp = qlora && !engine_casts_model(t) ? BytesPerParam{adapter_w, adapter_w, 0, t.optimizer == OptimizerKind::AdamW ? 8.0 : c.bpp.optimizer_states}
                                                    : t.method == Method::Full ? c.bpp : adapter_engine_bpp;
    // (The NCCL communicators are added per stage: stage_memory.)
    c.framework_bytes = t.framework_overhead_bytes >= 0 ? t.framework_overhead_bytes : def.cuda_context_bytes + def.library_workspace_bytes;
    if (t.fragmentation_fraction >= 0) c.frag_frac = t.fragmentation_fraction;
    else c.transient_frac = expandable_segments_on(t) ? policy().reserve_fraction_expandable_segments : policy().reserve_fraction_default_segments;
    // Calibration hook (calibrate.hpp): fitted additions to the overheads.
    c.framework_bytes += s.calibration.framework_bytes;
    c.frag_frac += s.calibration.reserve_fraction;
    if (c.plan.gathers_weights) {
        // One layer's parameters (the same on every stage) and the bytes per
        // parameter its gathered unit holds.
        const StageParams layer = stage_params(g, c.plan, 1, false, false);
        c.gathered_layer_params = layer.total();
        if (layer.total() > 0) c.gather_bpp = gathered_bytes(t, layer) / layer.total();
    }
    return c;
}

// Weights, gradients, optimizer states (and master copy) of one stage, sharded
// per the plan (ZeRO paper Sec. 5; frozen LoRA bases carry weights only).
void stage_states(const MemoryContext& c, const StageParams& p, MemoryBreakdown& mem) {
    const ShardPlan& plan = c.plan;
    if (c.s.setup.method == Method::Full) {
        // Weights a full fine-tune holds without training them (an idle image
        // encoder: opgraph.cpp) keep the model's weight dtype and nothing else.
        const ModelStates dense = model_states(p.dense - p.frozen_other, c.bpp, plan.dense);
        const ModelStates experts = model_states(p.expert, c.bpp, plan.expert);
        mem.weights = dense.weights + experts.weights + p.frozen_other * parameter_storage_bytes(c.s.setup) / plan.dense.weights;
        if (c.s.setup.fsdp == FsdpStrategy::ShardGradOp) {
            // FSDP SHARD_GRAD_OP (FSDP2 reshard_after_forward=False) shards the
            // parameters at rest like FULL_SHARD but keeps every unit's gathered
            // weights, in the compute dtype, from its forward to its backward: at
            // the start of backward all of them (torch FSDP docs, ShardingStrategy).
            mem.weights = p.dense * (c.bpp.weights / plan.dense.optimizer + c.weight_compute_bpp) +
                          p.expert * (c.bpp.weights / plan.expert.optimizer + c.weight_compute_bpp);
        }
        mem.gradients = dense.gradients + experts.gradients;
        mem.optimizer = dense.optimizer + experts.optimizer;
        mem.master_weights = dense.master + experts.master;
        return;
    }
    // Frozen base: linear weights (quantized under QLoRA), the rest 16-bit (fp32
    // after PEFT's kbit preparation: fp32_stream).
    const double other_bpp = fp32_stream(c.s.setup) ? 4.0 : c.weight_compute_bpp;
    const double frozen = (p.frozen_linear_dense * c.frozen_linear_bpp + p.frozen_other * other_bpp) / plan.dense.weights +
                          p.frozen_linear_expert * c.frozen_linear_bpp / plan.expert.weights;
    const ModelStates dense = model_states(p.trainable_dense, c.adapter_bpp, plan.dense);
    const ModelStates experts = model_states(p.trainable_expert, c.adapter_bpp, plan.expert);
    // PEFT modules_to_save: a deepcopy of each module in the base's 16-bit dtype,
    // trained: 16-bit weight and gradient; optimizer states in the weight's dtype
    // under torch.optim (zeros_like(param)), with an fp32 master under DeepSpeed /
    // Megatron bookkeeping.
    const double w16 = c.weight_compute_bpp;
    const BytesPerParam copy_bpp = c.s.setup.framework == Framework::PyTorchAMP
                                       ? BytesPerParam{w16, w16, 0, optimizer_state_bytes(c.s.setup.optimizer, w16, 0.002)}
                                       : c.bpp;
    const ModelStates copies = model_states(p.module_copies, copy_bpp, plan.dense);
    mem.weights = frozen + dense.weights + experts.weights + copies.weights;
    mem.gradients = dense.gradients + experts.gradients + copies.gradients;
    mem.optimizer = dense.optimizer + experts.optimizer + copies.optimizer;
    mem.master_weights = dense.master + experts.master + copies.master;
    // FSDP units holding frozen base weights beside the adapters: the frozen linear
    // weights get gradients in their 16-bit dtype as if trained (QLoRA bases are not
    // FSDP-wrapped this way: LitGPT refuses quantization on several devices).
    if (plan.gathers_weights && c.units_mix_frozen)
        mem.gradients += p.frozen_linear_dense * c.weight_compute_bpp / plan.dense.gradients +
                         p.frozen_linear_expert * c.weight_compute_bpp / plan.expert.gradients;
}

// FSDP's no_sync() holds the full gradients of the stage, not their shard, while
// micro-batches accumulate (data/defaults.toml fsdp_no_sync).
void fsdp_no_sync_gradients(const MemoryContext& c, MemoryBreakdown& mem) {
    const TrainingSetup& t = c.s.setup;
    if (!c.plan.gathers_weights || t.grad_accum <= 1 || !policy().stack(t.stack).fsdp_no_sync) return;
    mem.gradients *= c.plan.dense.gradients;
}

// Micro-batches in flight on pipeline stage i (layer-weighted), Korthikanti et
// al. 2022, Sec. 4.2.3 and 5.
double microbatches_in_flight(const ParallelLayout& lay, int i, double micro_batches) {
    if (lay.pp <= 1) return 1;
    const double pp = lay.pp;
    switch (lay.schedule) {
        case Schedule::OneF1B: return std::min<double>(lay.pp - i, micro_batches);
        case Schedule::Interleaved: {
            // Megatron's interleaved warm-up: 2(p - i - 1) + (v - 1)p chunk
            // micro-batches, + 1 in steady state; each chunk is 1/v of the
            // stage. Stage 0: p(1 + (p-1)/(pv)) (Korthikanti Eq. 5 factor).
            const double v = lay.vp;
            const double chunks = std::min(2.0 * (pp - i - 1) + (v - 1) * pp + 1, micro_batches * v);
            return chunks / v;
        }
        case Schedule::GPipe: return micro_batches;
    }
    return 1;
}

// One stage's memory: states, offload, activations, temporaries, overheads.
StageMemory stage_memory(const MemoryContext& c, int i) {
    const Scenario& s = c.s;
    const ModelSpec& m = s.model;
    const TrainingSetup& t = s.setup;
    const ParallelLayout& lay = t.layout;
    const StepGraph& g = c.g;
    const MemoryDefaults& def = memory_defaults();
    const bool full = t.method == Method::Full;
    const bool qlora = t.method == Method::QLoRA;
    // Context parallelism: each rank keeps the activations of its seq_len / cp
    // tokens (Megatron-Core context parallel docs: "activations ... reduced by
    // CP times"); cp > 1 requires flash attention, so no s x s term remains.
    const double tp = lay.tp, sq = static_cast<double>(t.seq_len) / lay.cp, mb = static_cast<double>(t.micro_batch);
    const bool sp = lay.sequence_parallel && lay.tp > 1;

    StageMemory st;
    st.stage = i;
    st.layers = layers_on_stage(m.num_layers, lay, i);
    const bool first = i == 0, last = i == lay.pp - 1;
    MemoryBreakdown& mem = st.mem;
    stage_states(c, stage_params(g, c.plan, st.layers, first, last), mem);
    fsdp_no_sync_gradients(c, mem);

    // ---- offload: optimizer states (and fp32 gradients for the CPU step) to
    // host or NVMe (ZeRO-Offload, Ren et al. 2021); weights with ZeRO-Infinity.
    const BytesPerParam& tb = qlora ? c.adapter_bpp : c.bpp;
    double host = 0, nvme = 0;
    if (t.optimizer_offload != Offload::None) {
        const double grads32 = mem.gradients * (4.0 / std::max(1.0, tb.gradients));
        (t.optimizer_offload == Offload::CPU ? host : nvme) += mem.optimizer;
        host += grads32;  // the CPU optimizer reads fp32 gradients from host memory
        mem.optimizer = 0;
        mem.master_weights = 0;
        // ZeRO-Offload streams gradients to the host as backward produces
        // them; the GPU keeps transfer buffers only (counted under temporary).
        mem.gradients = 0;
    }
    if (t.param_offload != Offload::None) {
        (t.param_offload == Offload::CPU ? host : nvme) += mem.weights;
        mem.weights = 0;
    }
    // ---- torch DDP without gradient_as_bucket_view (training.hpp ddp_bucket_view):
    // the Reducer's flat buckets span every trainable gradient, allocated when the
    // model is wrapped and kept for the run, whatever frees the .grad tensors.
    if (runs_torch_ddp(t) && !t.ddp_bucket_view) mem.ddp_buckets = mem.gradients;
    // ---- optimizer in backward (training.hpp): each gradient is stepped and freed
    // as backward produces it, so one tensor's gradient is resident at a time: the
    // largest trainable tensor (an expert's matrix, not the stacked experts; its TP
    // and ZeRO shard).
    if (t.optimizer_in_backward) {
        double largest = 0;
        for (const OpDef& o : g.ops) {
            const WeightDef& w = o.weight;
            if (!(w.trainable || w.module_copy) || w.tied_copy) continue;
            largest = std::max(largest, matrix_params_per_rank(o, tp));
        }
        mem.gradients = std::min(mem.gradients, largest * tb.gradients / c.plan.dense.gradients);
    }
    // ---- gradients freed between steps: torch's zero_grad(set_to_none=True)
    // (training.hpp grads_freed_between_steps) drops every .grad after the step,
    // and backward makes them again layer by layer as it frees the activations.
    // At backward's start the loss head's and the first layer's gradients are
    // written while every activation still lives; the rest exist only at the step.
    if (grads_freed_between_steps(t) && mem.gradients > 0) {
        // Those gradients' bytes as the stage's are counted (stage_states: dtype,
        // shards, frozen units' gradients), for one layer and the head's site.
        MemoryBreakdown held;
        stage_states(c, stage_params(g, c.plan, std::min<double>(1, st.layers), false, last), held);
        mem.grads_at_step = std::max(0.0, mem.gradients - held.gradients);
        mem.gradients -= mem.grads_at_step;
    }
    mem.gradients += mem.ddp_buckets;

    // ---- activations: micro-batches in flight on this stage times the
    // stored bytes per layer; the embedding side per in-flight micro-batch;
    // the head side and the logits for the one micro-batch in its loss.
    st.microbatches_in_flight = microbatches_in_flight(lay, i, static_cast<double>(t.grad_accum));
    const RecomputeLayers rl = recompute_layers(t, st.layers);
    const double per_mb_layers = stored_layers_bytes(g, t, st.layers, sq, mb, tp, sp);
    mem.activations = st.microbatches_in_flight * per_mb_layers;
    if (t.activation_offload && st.layers > 0) {
        // Offloaded activations live in host memory; the GPU keeps the layer
        // being copied out (or in) and the one prefetched for backward.
        const double kept = std::min(2.0, static_cast<double>(st.layers)) * per_mb_layers / st.layers;
        const double moved = std::max(0.0, mem.activations - kept);
        mem.activations -= moved;
        host += moved;
    }
    // A GPTQ base under auto-gptq's QuantLinear (the torch-op path training takes,
    // qlinear_cuda_old) dequantizes each weight to 16-bit and multiplies with
    // torch.matmul, whose autograd keeps that weight for the input gradient until
    // the layer's backward (bitsandbytes' MatMul4Bit keeps the packed 4-bit one):
    // a layer's frozen linear weights in 16-bit, per layer that stores its
    // tensors; under full recompute only the layers rebuilt in backward hold them.
    double gptq_saved = 0;
    if (t.method == Method::QLoRA && t.qlora.quant == QuantType::GPTQ) {
        const StageParams one = stage_params(g, c.plan, 1, false, false);
        gptq_saved = (one.frozen_linear_dense + one.frozen_linear_expert) * c.weight_compute_bpp;
    }
    // The down projection's backward runs before the MLP's element-wise backward
    // (StepGraph::backward_working) and releases its weight there: one expert's,
    // in an MoE layer whose experts run backward one by one.
    double gptq_down = 0;
    if (gptq_saved > 0)
        for (const OpDef& o : g.ops)
            if (o.site == Site::Layer && o.role == OpRole::DownProj && o.weight.quantizable() && !o.weight.trainable)
                gptq_down = std::max(gptq_down, matrix_params_per_rank(o, tp) * c.weight_compute_bpp);
    const double gptq_storing = t.recompute == Recompute::Full ? st.layers - rl.checkpointed : st.layers;
    mem.activations += st.microbatches_in_flight * gptq_storing * gptq_saved;
    if (first) mem.activations += st.microbatches_in_flight * g.stored_first.bytes(sq, mb, tp, sp);
    if (last) {
        mem.activations += g.stored_last.bytes(sq, mb, tp, sp);
        mem.logits = (tp > 1 ? g.logits_tp : g.logits).bytes(sq, mb, tp, sp);
        // Liger's fused linear cross-entropy: its chunk and gradient buffers instead.
        if (fused_linear_ce_on(t)) mem.logits = fused_linear_ce_bytes(m, t, sq * mb);
    }
    // ---- model outputs the training loop holds through backward
    // (`outputs = model(batch); loss = outputs.loss; loss.backward()` keeps
    // `outputs` alive). Hugging Face LlamaForCausalLM (transformers 4.31,
    // modeling_llama.py) returns `logits = logits.float()`: fp32, b x s x V
    // (vocab-parallel: V / tp). With use_cache on, `past_key_values` holds each
    // layer's key_states and value_states (after RoPE, compute dtype, b x s x
    // kv_dim each); they live from their layer's forward to the step's end.
    // llama-recipes PR #41 (awgu) names both as held through backward; PR #165
    // (use_cache=False under FSDP) measures the K/V cache as ~4 GB for Llama-7B.
    double held_logits = 0;
    if (t.held_outputs != HeldOutputs::None) {
        const double w16 = activation_bytes_per_elem(t.precision);
        // (The 16-bit lm_head output where the model code does not upcast.)
        const double logit_bytes = m.logits_upcast ? 4.0 : w16;
        // (Liger's fused loss returns no logits while training with labels.)
        if (last && !fused_linear_ce_on(t)) held_logits = sq * mb * static_cast<double>(m.vocab) / tp * logit_bytes;
        if (t.held_outputs == HeldOutputs::LogitsKv)
            mem.activations += st.microbatches_in_flight * st.layers * 2.0 * sq * mb * static_cast<double>(m.kv_dim()) / tp * w16;
        // At the loss the held tensor is one of the loss's own copies when the
        // stack upcasts (hf-peft: .float()); it cannot be fewer bytes than it.
        mem.logits = std::max(mem.logits, held_logits);
    }

    // ---- temporary buffers
    double temp = 0;
    double gathered_ahead = 0;  // layers the host gathers ahead of the compute, given room
    if (c.plan.gathers_weights) {
        // ZeRO-3 / FSDP all-gather the current layer and prefetch the next
        // one in the compute dtype (16-bit for mixed and bf16 training, fp32
        // for fp32, the 4-bit base under QLoRA); the gradient of one layer
        // waits for its reduce-scatter. One rank shards nothing: no gather.
        const double layer = c.gathered_layer_params;
        const double w_gather = c.gather_bpp;
        if (gathers_ahead_of_compute(t) && st.layers > 2) {
            // Nothing waits for the GPU's compute but the stream's launch
            // queue: the host issues layer after layer's all-gather and
            // forward kernels until the queue is full, and each gathered layer
            // stays held until the GPU has run its forward (its buffer is freed
            // with record_stream on the compute stream, so the caching allocator
            // hands it out again only once that stream has passed).
            // Resident: the layer running plus the queue's worth of layers
            // (launch_queue_depth / forward launches per layer), at most the stage.
            // Those beyond the two in use are freed already and wait only for the
            // stream: reserved, not allocated (MemoryBreakdown::gathered_ahead),
            // and only where the device has room for them (below).
            const double per_layer = std::max(1.0, g.launches[static_cast<int>(Site::Layer)]);
            const double ahead = std::ceil(policy().launch_queue_depth / per_layer);
            gathered_ahead = std::max(0.0, std::min(static_cast<double>(st.layers), 1.0 + ahead) - 2.0) * layer * w_gather;
        }
        // Units that hold frozen base weights beside adapters (fsdp_units_mix_frozen)
        // produce the whole layer's gradient as full fine-tuning does.
        if (runs_deepspeed_zero3(t)) {
            // DeepSpeed ZeRO-3 gathers module by module, not layer by layer: the
            // current module and what it prefetches (ds_prefetch_bucket elements),
            // and at the turn to backward what __params_to_release keeps because
            // the trace reuses it within ds_max_reuse_distance fetched elements:
            // the head (its backward follows its forward) and layer L-k while the
            // fetches between its forward and its backward -- k - 1 layers each way
            // and the head twice -- stay under the distance. Its gradients go module
            // by module into the reduce bucket (reduce_bucket_size elements,
            // stage3.py __add_grad_to_ipg_bucket), reduce-scattered when it fills.
            const double module = g.largest_layer_module / (g.largest_layer_module_tp_split ? lay.tp : 1);
            const double head = last ? stage_params(g, c.plan, 0, false, true).total() : 0.0;
            double kept = head;
            if (t.ds_max_reuse_distance > 2.0 * head && layer > 0)
                kept += std::min(static_cast<double>(st.layers), std::floor((t.ds_max_reuse_distance - 2.0 * head) / (2.0 * layer)) + 1.0) * layer;
            const double gathered = std::min(static_cast<double>(st.layers) * layer + head, std::max(module, kept) + t.ds_prefetch_bucket);
            temp += gathered * w_gather + (full ? (module + std::min(layer, t.ds_reduce_bucket)) * c.bpp.gradients : 0);
        } else {
            temp += 2.0 * layer * w_gather + (full ? layer * c.bpp.gradients : c.units_mix_frozen ? layer * c.weight_compute_bpp : 0);
        }
        // FSDP keeps the root unit -- what no wrapped block holds: embeddings,
        // final norm, head -- unsharded from the end of forward through backward
        // (torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard: "Do not
        // free the root's parameters in the post-forward"; a frozen root has no
        // post-backward hook to reshard it before the step's final callback).
        if (t.fsdp != FsdpStrategy::None) {
            // (An image encoder idle on text batches is its own units, never gathered.)
            const StageParams ends = stage_params(g, c.plan, 0, first, last);
            const double root = ends.total() - ends.idle;
            temp += root * c.weight_compute_bpp * (1.0 - 1.0 / c.plan.dense.weights);
        }
    }
    if (t.optimizer_offload != Offload::None) temp += def.grad_bucket_bytes;
    // The layers rebuilt at once during backward (one, or a uniform group: all
    // they store; selective / per-op: what they regenerate for one layer). On the
    // last stage that happens after the loss's backward has freed the
    // logits-sized tensors: the two never coexist, and the caching allocator
    // hands the freed logits blocks to the recomputed layer.
    double recomputed = 0;
    if (t.recompute == Recompute::Full) recomputed = rl.working * g.stored_none.bytes(sq, mb, tp, sp);
    if (t.recompute == Recompute::Selective || t.recompute == Recompute::PerOp)
        recomputed = g.stored_none.bytes(sq, mb, tp, sp) - g.stored(t.recompute).bytes(sq, mb, tp, sp);
    // Beside the layer's stored (or recomputed) tensors its backward holds
    // gradients, also after the loss's backward: the layer output's throughout
    // (opgraph backward_working), and at two moments of their own, first the MLP's
    // (backward_working; they come once the down projection's backward has released
    // what it kept, a GPTQ weight), later eager attention's s x s gradients of the
    // probabilities and scores (attn_backward_working), when the MLP's are gone.
    const ActivationCoeffs& bw = g.backward_working;
    const double mlp_grads = std::max(0.0, ActivationCoeffs{0, bw.tensor_parallel, 0}.bytes(sq, mb, tp, sp) - gptq_down);
    recomputed += ActivationCoeffs{bw.replicated, 0, 0}.bytes(sq, mb, tp, sp) +
                  std::max(mlp_grads, g.attn_backward_working.bytes(sq, mb, tp, sp));
    if (t.recompute == Recompute::Full) recomputed += rl.working * gptq_saved;
    // FSDP1 (torch >= 2.1) gives a unit whose parameters are all frozen -- a block of
    // base weights whose adapters are wrapped in their own units (peft's
    // fsdp_auto_wrap_policy) -- a reshard-only hook on its forward inputs
    // (_runtime_utils.py _register_post_backward_reshard_only_hook, a
    // register_multi_grad_hook removed only in _finalize_params at backward's end).
    // The hook keeps each input's autograd node, and under reentrant checkpointing
    // the input is a leaf rerun in backward, whose AccumulateGrad holds it and the
    // .grad written into it: every layer's input gradient outlives its layer's
    // backward until the step's backward ends. When the first layer is rebuilt, the
    // other layers' are all held (the inputs themselves are the checkpoints, already
    // counted). Non-reentrant checkpointing reruns on saved tensors, not leaves:
    // nothing is held beyond them.
    if (fsdp_holds_input_grads(t) && st.layers > 1)
        recomputed += static_cast<double>(st.layers - 1) * g.stored_full.bytes(sq, mb, tp, sp);
    // Held logits are not freed by the loss's backward: only the rest is reused.
    temp += std::max(0.0, recomputed - (mem.logits - held_logits));
    // The part of it the freed logits' blocks hold: live again at backward's end.
    const double hidden_working = std::min(recomputed, std::max(0.0, mem.logits - held_logits));
    if (runs_deepspeed_zero12(t)) {
        // DeepSpeed ZeRO-1/2 (contiguous_gradients, default true): each backward
        // allocates its reduce bucket(s), reduce_bucket_size elements in the
        // gradient dtype, two under overlap_comm, also on one rank
        // (runtime/zero/stage_1_and_2.py, DeepSpeedZeroOptimizer.backward: ipg_buffer).
        temp += (ds_overlap_comm_on(t) ? 2.0 : 1.0) * t.ds_reduce_bucket * c.bpp.gradients;
    } else if (c.plan.dp_group.size > 1 && t.zero_stage < 3 && !runs_torch_ddp(t)) {
        temp += def.grad_bucket_bytes;
    }
    if (lay.cp > 1) {
        // Ring attention double-buffers the K/V block in flight (the one being
        // used and the one being received), 16-bit, per micro-batch.
        const double kv = 2.0 * static_cast<double>(m.kv_dim()) / tp * 2.0;
        temp += 2.0 * sq * mb * kv;
    }
    if (qlora) {
        // bitsandbytes dequantizes one weight matrix to 16-bit per matmul.
        const double h = static_cast<double>(m.hidden);
        const double ffn = static_cast<double>(m.is_moe() ? m.moe.expert_ffn : m.ffn);
        temp += std::max(h * ffn, h * static_cast<double>(m.q_dim())) / tp * 2.0;
    }
    // ---- the optimizer step. DeepSpeed's ZeRO optimizers step on fp32 copies of
    // the 16-bit gradients: each parameter group's (ZeRO-1/2) or sub-group's
    // (ZeRO-3, ds_sub_group_size) partition is flattened into one 16-bit tensor
    // and cast to fp32, `flatten(averaged_gradients).to(fp32)`, before its Adam
    // step (runtime/zero/stage_1_and_2.py step; stage3.py
    // _prepare_fp32_grad_for_sub_group): 2 + 4 B per element at once. The step runs
    // after backward has freed the activations, logits and backward buffers, and
    // the copies reuse those bytes: only what they need beyond them raises the
    // peak. (The largest trainable group is taken as the whole partition: the HF
    // Trainer's no-decay group holds only norms and biases. A ZeRO-3 sub-group
    // closes once it reaches sub_group_size, so min() is a lower bound by at most
    // one tensor. The CPU step of the offload path reads host copies instead. Mixed
    // precision only: fp32 training's flat copy, 4 B, is not counted.)
    double step_segments = 0;  // reserved beside backward's cached blocks (below)
    // The gradients made again for the step, where they raise the peak: they take
    // the blocks backward freed, not segments of their own.
    double grads_in_temp = 0;
    if (runs_deepspeed_zero(t) && t.optimizer_offload == Offload::None && tb.master > 0) {
        double group = mem.master_weights / tb.master;  // elements of this rank's partition
        if (runs_deepspeed_zero3(t)) group = std::min(group, t.ds_sub_group_size);
        mem.step_copies = group * (tb.gradients + 4.0);
        const double backward = mem.activations + mem.logits + temp;
        mem.peak_at_step = mem.step_copies > backward;
        temp += std::max(0.0, mem.step_copies - backward);
        // Allocated bytes reuse what backward freed; reserved ones need a
        // cached block at least as large as the request (the caching allocator
        // splits blocks but merges only neighbours inside one cudaMalloc
        // segment, and a request above 1 MB takes a segment of its own size when
        // no cached block fits: c10/cuda/CUDACachingAllocator.cpp get_free_block,
        // alloc_block). Backward's blocks are single tensors: a logits copy
        // (tokens x V / tp, fp32 at most), one layer's widest activation (tokens x
        // ffn / tp, 16-bit) or, without a fused attention kernel, its fp32
        // softmax (heads / tp x tokens x s). A flat copy larger than all of them
        // takes a fresh segment, which stays reserved beside the blocks it could
        // not use: the reserve grows by it (at most by what it reused).
        double largest_freed = sq * mb * static_cast<double>(m.ffn) / tp * c.weight_compute_bpp;
        if (last) largest_freed = std::max(largest_freed, std::min(mem.logits, sq * mb * static_cast<double>(m.vocab) / tp * 4.0));
        if (!fused_attention_runs(t)) largest_freed = std::max(largest_freed, mb * static_cast<double>(m.num_heads) / tp * sq * static_cast<double>(t.seq_len) * 4.0);
        for (const double request : {group * tb.gradients, group * 4.0})
            if (request > largest_freed) step_segments += request;
        step_segments = std::min(step_segments, backward);
        // (A `fragmentation` override states the allocator's slack as a share of
        // the allocated peak: 0 reproduces max_memory_allocated, save for layers
        // gathered ahead of the compute, which are no slack.)
        if (t.fragmentation_fraction >= 0) step_segments = 0;
    } else if (adamw_runs_foreach(t) && !paged_optimizer_on(t) && !t.optimizer_in_backward && t.optimizer_offload == Offload::None) {
        // torch.optim.AdamW's multi-tensor step (time.hpp adamw_runs_foreach) makes
        // one new tensor list the size of a moment, `exp_avg_sq_sqrt =
        // torch._foreach_sqrt(device_exp_avg_sqs)`, divides and shifts it in place
        // and reads it in _foreach_addcdiv_ (torch/optim/adamw.py _multi_tensor_adamw,
        // torch 2.x: every parameter of one device and dtype at once), the moments
        // and the gradients beside it. It comes after backward has freed the
        // activations, logits and backward buffers; only what it needs beyond
        // those raises the peak.
        const double states = mem.optimizer - mem.master_weights;
        mem.step_copies = states / 2.0;  // AdamW's two moments: one moment's bytes
    }
    double stranded = 0;  // freed gradients in a side stream's pool at backward's start (below)
    if (!runs_deepspeed_zero(t)) {
        // Where the peak falls: at backward's start (the activations, logits and
        // buffers), at its end (gradients freed between steps made again, beside the
        // last layer's working set, which had reused the logits' blocks), or at the
        // step (those gradients and the step's own copies).
        const double start = mem.activations + mem.logits + temp;
        const double end = mem.grads_at_step > 0 ? mem.grads_at_step + temp + hidden_working : 0.0;
        const double step = mem.grads_at_step + mem.step_copies;
        const double peak = std::max({start, end, step});
        mem.peak_at_step = step > start && step >= end;
        mem.peak_at_backward_end = end > start && end > step;
        // What the gradients add beyond the step copies' own excess is theirs.
        grads_in_temp = (peak - start) - std::max(0.0, mem.step_copies - start);
        temp += peak - start;
        // FSDP writes the sharded gradients on its own stream (FSDP1's
        // post-backward stream, FSDP2's reduce-scatter stream: the reduce-scatter
        // output they are views of), and the caching allocator hands a freed block
        // only to the stream that allocated it (CUDACachingAllocator.cpp
        // get_free_block: the pool is keyed by stream). Freed by zero_grad, they stay
        // reserved beside the next forward's activations and logits.
        if (t.fsdp != FsdpStrategy::None) stranded = std::max(0.0, start + mem.grads_at_step - peak);
    }
    mem.temporary = temp;

    // A paged optimizer's states (training.hpp paged_optimizer) live in unified
    // memory beside the caching allocator's segments: on the device, outside its
    // allocated bytes and its reserve. (A master copy is the framework's, not the
    // paged optimizer's.)
    mem.managed = paged_optimizer_on(t) ? std::max(0.0, mem.optimizer - mem.master_weights) : 0.0;
    mem.allocated = mem.weights + mem.gradients + mem.optimizer - mem.managed + mem.activations + mem.logits + mem.temporary;
    mem.framework = c.framework_bytes;
    if (t.framework_overhead_bytes < 0) {
        // NCCL buffers of every communicator this rank opens (data/defaults.toml [memory]).
        const MemoryDefaults& def = memory_defaults();
        const Communicators comms = communicators(c.s, c.plan, first, last);
        mem.nccl_nvls = comms.nvls_heads * def.nvls_head(t.nccl);
        mem.nccl_buffers = comms.pairs * def.communicator_pair_bytes + comms.groups * def.communicator_bytes + mem.nccl_nvls;
        mem.nccl_communicators = comms.total();
        mem.framework += mem.nccl_buffers;
    }
    // The caching allocator keeps freed blocks reserved: what it cannot reuse
    // grows with what it cycles through (activations, logits, buffers), not with
    // the persistent weights and states.
    const double transient = mem.activations + mem.logits + mem.temporary - grads_in_temp;
    mem.capacity = s.cluster.gpu.capacity_bytes;
    const auto reserve = [&] {
        // Three elastic parts, each taking only what the device has free beside
        // what is already held, in this order: a cudaMalloc that fails makes the
        // caching allocator return every cached block that is not split and retry
        // (CUDACachingAllocator.cpp malloc -> release_cached_blocks), so none of
        // them ever causes an out-of-memory.
        double held = mem.allocated + mem.managed + mem.framework + mem.allocated * c.frag_frac;
        const auto take = [&](double wanted) {
            const double got = std::min(wanted, std::max(0.0, mem.capacity - held));
            held += got;
            return got;
        };
        // The share of the transient bytes (a `fragmentation` override is taken
        // as stated, above).
        mem.transient_reserve = take(transient * c.transient_frac);
        mem.reserve_cut = transient * c.transient_frac - mem.transient_reserve;
        // The gradients stranded in FSDP's stream pool (above): whole segments
        // with no live block, returned before an allocation fails.
        mem.stream_pool = take(stranded);
        // The step copies' own segments, beside backward's freed blocks: after
        // backward the transient segments hold no live tensor, so their blocks
        // have merged back whole and can be returned.
        mem.step_segments = take(step_segments);
        // Layers gathered ahead: a request that finds no block makes the allocator
        // also wait for every pending stream event and return those blocks
        // (release_cached_blocks -> synchronize_and_free_events).
        mem.gathered_ahead = take(gathered_ahead);
        mem.fragmentation = mem.allocated * c.frag_frac + mem.transient_reserve + mem.stream_pool + mem.step_segments + mem.gathered_ahead;
        mem.total = held;
    };
    reserve();

    // Paged optimizer (bitsandbytes): the driver evicts unified-memory pages to
    // the host when the device runs out (CUDA programming guide, unified memory
    // oversubscription), so its states take only the room the rest leaves.
    if (mem.total > mem.capacity && mem.managed > 0) {
        const double moved = std::min(mem.managed, mem.total - mem.capacity);
        mem.paged_out = moved;
        mem.managed -= moved;
        mem.optimizer -= moved;
        host += moved;
        reserve();
    }
    mem.cpu = host;
    mem.nvme = nvme;
    const ClusterSpec& cl = s.cluster;
    if (cl.host_ram_bytes > 0) mem.host_capacity = cl.host_ram_bytes / cl.gpus_on_node();
    return st;
}

}  // namespace

MemoryEstimate estimate_memory(const Scenario& s, bool all_stages) {
    return estimate_memory(s, build_step_graph(s.model, s.setup), all_stages);
}

MemoryEstimate estimate_memory(const Scenario& s, const StepGraph& g, bool all_stages) {
    const ParallelLayout& lay = s.setup.layout;
    const MemoryContext c = make_context(s, g);
    MemoryEstimate est;
    est.total_params = std::llround(g.model_params(s.model.num_layers));
    est.trainable_params = std::llround(g.model_params(s.model.num_layers, true));
    // Which stages to evaluate: all, or first / one middle / last.
    if (all_stages || lay.pp <= 3) {
        est.stages.reserve(static_cast<size_t>(std::max(1, lay.pp)));
        for (int i = 0; i < lay.pp; ++i) est.stages.push_back(stage_memory(c, i));
    } else {
        est.stages.reserve(3);
        for (int i : {0, 1, lay.pp - 1}) est.stages.push_back(stage_memory(c, i));
    }
    est.worst = 0;
    for (size_t i = 1; i < est.stages.size(); ++i)
        if (est.stages[i].mem.total > est.stages[static_cast<size_t>(est.worst)].mem.total) est.worst = static_cast<int>(i);
    return est;
}

}  // namespace trainplan
