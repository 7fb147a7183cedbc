#include "trainplan/memory.hpp"

#include <algorithm>
#include <cmath>

#include "trainplan/units.hpp"

namespace trainplan {

const MemoryDefaults& memory_defaults() {
    static const MemoryDefaults d = [] {
        MemoryDefaults m;
        // ~400 MB for the CUDA context of a PyTorch process with CUDA >= 11.7 lazy
        // module loading (ptrblck, pytorch/pytorch#109888 and #107667: "~300MB").
        m.cuda_context_bytes = 400 * units::MiB;
        // cuBLAS workspace, CUBLAS_WORKSPACE_CONFIG default ":4096:8" = 8 x 4 MiB.
        m.library_workspace_bytes = 32 * units::MiB;
        // NCCL: NCCL_BUFFSIZE = 4 MiB per channel and direction; a ring over
        // NVLink opens up to 16-32 channels. Estimate, override per scenario.
        m.communicator_bytes = 256 * units::MiB;
        // PyTorch caching allocator: reserved exceeds allocated by the blocks it
        // cannot reuse; 5 % is our default estimate (override with
        // fragmentation_fraction; 0 reproduces torch.cuda.max_memory_allocated()).
        m.fragmentation_fraction = 0.05;
        // torch.nn.parallel.DistributedDataParallel bucket_cap_mb = 25; two
        // buckets in flight while the all-reduce overlaps backward.
        m.grad_bucket_bytes = 2 * 25 * units::MB;
        return m;
    }();
    return d;
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
                    b.weights = 2; b.gradients = 4; b.master = 4;
                    break;
                case Framework::PyTorchAMP: // fp32 params and grads; autocast caches
                    b.weights = 4 + 2;      // 16-bit copies of the weights for the step
                    b.gradients = 4; b.master = 0;
                    break;
            }
            // Transformer Engine keeps an fp8 copy of each weight for the step.
            if (t.precision == Precision::FP8Mixed) b.weights += 1;
            break;
    }
    // Adafactor's factored moment is ~4(r+c) bytes per r x c matrix; for
    // transformer-sized matrices that is well under 0.01 B/param.
    b.optimizer_states = optimizer_state_bytes(t.optimizer, state, 0.002);
    return b;
}

ModelStates model_states(double params, const TrainingSetup& t, double shard) {
    const BytesPerParam b = bytes_per_trainable_param(t);
    ModelStates s;
    const double d = std::max(1.0, shard);
    s.weights = params * b.weights / (t.zero_stage >= 3 ? d : 1.0);
    s.gradients = params * b.gradients / (t.zero_stage >= 2 ? d : 1.0);
    s.master = params * b.master / (t.zero_stage >= 1 ? d : 1.0);
    s.optimizer = params * b.optimizer() / (t.zero_stage >= 1 ? d : 1.0);
    return s;
}

int layers_on_stage(std::int64_t layers, int pp, int stage) {
    const std::int64_t base = layers / pp;
    const std::int64_t extra = layers % pp;
    // The last `extra` stages take one more layer.
    return static_cast<int>(base + (stage >= pp - extra ? 1 : 0));
}

std::int64_t lora_params_per_layer(const ModelSpec& m, const LoraConfig& l) {
    const std::int64_t r = l.rank, h = m.hidden;
    std::int64_t p = 0;
    auto add = [&](unsigned target, std::int64_t din, std::int64_t dout, std::int64_t copies = 1) {
        if (l.targets & target) p += copies * r * (din + dout);
    };
    add(kLoraQ, h, m.q_dim());
    add(kLoraK, h, m.kv_dim());
    add(kLoraV, h, m.kv_dim());
    add(kLoraO, m.q_dim(), h);
    const std::int64_t ffn = m.is_moe() ? m.moe.expert_ffn : m.ffn;
    const std::int64_t copies = m.is_moe() ? m.moe.num_experts + m.moe.shared_experts : 1;
    if (m.gated()) {
        add(kLoraGate, h, ffn, copies);
        add(kLoraUp, h, ffn, copies);
    } else {
        add(kLoraUp, h, ffn, copies);
    }
    add(kLoraDown, ffn, h, copies);
    return p;
}

namespace {

// Bits per parameter of 4-bit quantized base weights (Dettmers et al. 2023,
// Sec. 3): 4 bits + one fp32 absmax per block of 64 (0.5 bit); double
// quantization stores 8-bit absmax plus one fp32 per 256 blocks (0.127 bit).
double qlora_bits_per_param(const QLoraConfig& q) {
    const double block = q.block_size;
    const double constants = q.double_quant ? 8.0 / block + 32.0 / (block * 256.0) : 32.0 / block;
    return 4.0 + constants;
}

struct StageParams {
    double weight_bytes = 0;   // before ZeRO-3 sharding of weights
    double dense_trainable = 0;   // trainable params replicated over the full DP group
    double expert_trainable = 0;  // trainable expert params (sharded over dp / ep)
    double frozen_bytes = 0;      // frozen base weights (LoRA/QLoRA)
    double largest_layer_params = 0;
};

}  // namespace

MemoryEstimate estimate_memory(const Scenario& s, bool all_stages) {
    return estimate_memory(s, build_layer_graph(s.model, s.setup), all_stages);
}

MemoryEstimate estimate_memory(const Scenario& s, const LayerGraph& g, bool all_stages) {
    const ModelSpec& m = s.model;
    const TrainingSetup& t = s.setup;
    const ParallelLayout& lay = t.layout;
    const MemoryDefaults& def = memory_defaults();
    const ParamCounts pc = count_params(m);

    const double tp = lay.tp, pp = lay.pp, ep = lay.ep;
    const double sq = static_cast<double>(t.seq_len);
    const double mb = static_cast<double>(t.micro_batch);
    const double micro_batches = static_cast<double>(t.grad_accum);
    const bool sp = lay.sequence_parallel && lay.tp > 1;
    const double act_b = activation_bytes_per_elem(t.precision);
    const BytesPerParam bpp = bytes_per_trainable_param(t);
    const bool full = t.method == Method::Full;
    const bool qlora = t.method == Method::QLoRA;

    // ZeRO shard group: the data-parallel group, or the ranks of one node under
    // FSDP hybrid sharding.
    double shard = lay.dp;
    if (t.fsdp == FsdpStrategy::HybridShard) {
        const int per_node_replica = std::max(1, s.cluster.gpus_per_node / std::max(1, lay.tp * lay.pp));
        shard = std::min<double>(lay.dp, per_node_replica);
    }
    const double expert_shard = std::max(1.0, shard / ep);

    // Frozen base weight bytes per parameter.
    const double frozen_linear_bpp = qlora ? qlora_bits_per_param(t.qlora) / 8.0 : (t.precision == Precision::FP32 ? 4.0 : 2.0);
    const double frozen_other_bpp = t.precision == Precision::FP32 ? 4.0 : 2.0;
    // QLoRA adapters: bf16 weights and grads, 32-bit paged AdamW states
    // (artidoro/qlora: paged_adamw_32bit); other optimizers per the table.
    BytesPerParam adapter_bpp = bpp;
    if (qlora) {
        adapter_bpp = {2, 2, 0, t.optimizer == OptimizerKind::AdamW ? 8.0 : bpp.optimizer_states};
    }
    const BytesPerParam& tb = qlora ? adapter_bpp : bpp;

    const double lora_layer = full ? 0 : static_cast<double>(lora_params_per_layer(m, t.lora));
    const double layer_linear_dense = static_cast<double>(pc.attention + pc.mlp + pc.shared_experts);
    const double layer_experts = static_cast<double>(pc.experts);
    const double layer_small = static_cast<double>(pc.layer_norms + pc.router);

    MemoryEstimate est;
    est.total_params = pc.total;
    est.trainable_params = full ? pc.total : static_cast<std::int64_t>(lora_layer * static_cast<double>(m.num_layers));

    // Which stages to evaluate: all, or first / one middle / last.
    std::vector<int> stage_ids;
    if (all_stages || lay.pp <= 3) {
        for (int i = 0; i < lay.pp; ++i) stage_ids.push_back(i);
    } else {
        stage_ids = {0, 1, lay.pp - 1};
    }

    const double framework_bytes =
        t.framework_overhead_bytes >= 0
            ? t.framework_overhead_bytes
            : def.cuda_context_bytes + def.library_workspace_bytes + (s.cluster.num_gpus > 1 ? def.communicator_bytes : 0);
    const double frag_frac = t.fragmentation_fraction >= 0 ? t.fragmentation_fraction : def.fragmentation_fraction;

    const ActivationCoeffs& coeffs = t.recompute == Recompute::Full        ? g.stored_full
                                     : t.recompute == Recompute::Selective ? g.stored_selective
                                                                           : g.stored_none;
    const double layer_act_mb = coeffs.bytes(sq, mb, tp, sp);          // one layer, one micro-batch
    const double layer_act_full = g.stored_none.bytes(sq, mb, tp, sp);  // without recompute
    const double h = static_cast<double>(m.hidden);
    const double rep_div = sp ? tp : 1.0;

    for (int i : stage_ids) {
        StageMemory st;
        st.stage = i;
        st.layers = layers_on_stage(m.num_layers, lay.pp, i);
        const double L = st.layers;
        const bool first = i == 0, last = i == lay.pp - 1;

        // ---- parameters on this GPU (TP splits matrices and the vocabulary;
        // norms stay replicated; EP splits the experts).
        double dense_params = L * (layer_linear_dense / tp + layer_small);
        double expert_params = L * layer_experts / (tp * ep);
        double emb_params = 0;
        if (first) emb_params += static_cast<double>(pc.embedding) / tp + static_cast<double>(pc.positions);
        if (last) {
            emb_params += static_cast<double>(pc.lm_head) / tp + static_cast<double>(pc.final_norm);
            // Megatron keeps a copy of tied word embeddings on the last stage.
            if (m.tied_embeddings && lay.pp > 1) emb_params += static_cast<double>(m.vocab * m.hidden) / tp;
        }

        MemoryBreakdown& mem = st.mem;
        if (full) {
            const ModelStates dense = model_states(dense_params + emb_params, t, shard);
            const ModelStates experts = model_states(expert_params, t, expert_shard);
            mem.weights = dense.weights + experts.weights;
            mem.gradients = dense.gradients + experts.gradients;
            mem.optimizer = dense.optimizer + experts.optimizer;
            mem.master_weights = dense.master + experts.master;
        } else {
            // Frozen base: linear weights (quantized under QLoRA), the rest 16-bit.
            const double linear = L * (layer_linear_dense / tp + layer_experts / (tp * ep));
            const double other = L * layer_small + emb_params;
            double frozen = linear * frozen_linear_bpp + other * frozen_other_bpp;
            if (t.zero_stage >= 3) frozen /= shard;
            const double adapters = L * lora_layer / tp;
            const double z = std::max(1.0, shard);
            mem.weights = frozen + adapters * tb.weights / (t.zero_stage >= 3 ? z : 1.0);
            mem.gradients = adapters * tb.gradients / (t.zero_stage >= 2 ? z : 1.0);
            mem.optimizer = adapters * tb.optimizer() / (t.zero_stage >= 1 ? z : 1.0);
            mem.master_weights = adapters * tb.master / (t.zero_stage >= 1 ? z : 1.0);
        }

        // ---- offload: optimizer states (and fp32 gradients for the CPU step) to
        // host or NVMe (ZeRO-Offload, Ren et al. 2021); weights with ZeRO-Infinity.
        double host = 0, nvme = 0;
        if (t.optimizer_offload != Offload::None) {
            const double moved = mem.optimizer;
            const double grads32 = mem.gradients * (4.0 / std::max(1.0, tb.gradients));
            (t.optimizer_offload == Offload::CPU ? host : nvme) += moved;
            host += grads32;  // the CPU optimizer reads fp32 gradients from host memory
            mem.optimizer = 0;
            mem.master_weights = 0;
            // ZeRO-Offload streams gradients to the host as backward produces
            // them; the GPU keeps transfer buffers only (counted under temporary).
            mem.gradients = 0;
        }
        double gathered_weights = 0;
        const double layer_params_tp = (layer_linear_dense / tp + layer_experts / (tp * ep) + layer_small);
        if (t.zero_stage >= 3) {
            // ZeRO-3 / FSDP all-gather the current layer and prefetch the next
            // one in 16-bit; the gradient of one layer waits for its reduce-scatter.
            // Gathered in the compute dtype: 16-bit for mixed and bf16 training,
            // fp32 for fp32 training; QLoRA gathers the 4-bit base.
            const double w16 = full ? (t.precision == Precision::FP32 ? 4.0 : 2.0) : frozen_linear_bpp;
            gathered_weights = 2 * layer_params_tp * w16 + (full ? layer_params_tp * bpp.gradients : 0);
        }
        if (t.param_offload != Offload::None) {
            (t.param_offload == Offload::CPU ? host : nvme) += mem.weights;
            mem.weights = 0;
        }

        // ---- activations: micro-batches in flight on this stage times the
        // stored bytes per layer (Korthikanti et al. 2022, Sec. 4.2.3 and 5).
        double in_flight = 1;  // micro-batch equivalents of this stage's layers
        if (lay.pp > 1) {
            switch (lay.schedule) {
                case Schedule::OneF1B:
                    in_flight = std::min<double>(lay.pp - i, micro_batches);
                    break;
                case Schedule::Interleaved: {
                    // Megatron's interleaved warm-up: 2(p - i - 1) + (v - 1)p chunk
                    // micro-batches, + 1 in steady state; each chunk is 1/v of the
                    // stage. Stage 0: p(1 + (p-1)/(pv)) (Korthikanti Eq. 5 factor).
                    const double v = lay.vp;
                    const double chunks = std::min(2.0 * (pp - i - 1) + (v - 1) * pp + 1, micro_batches * v);
                    in_flight = chunks / v;
                    break;
                }
                case Schedule::GPipe:
                    in_flight = micro_batches;
                    break;
            }
        }
        st.microbatches_in_flight = in_flight;
        mem.activations = in_flight * L * layer_act_mb;
        if (first) {
            // Embedding dropout mask (1 B per element; Korthikanti's "p sbh/t"
            // term) and, for BLOOM-style models, the embedding norm input.
            double per_tok = (m.dropout > 0 ? h * 1.0 : 0) + (m.embedding_norm ? h * act_b : 0);
            mem.activations += in_flight * sq * mb * per_tok / rep_div;
        }
        if (last) {
            // Final norm input and the LM-head input (its output), one micro-batch.
            mem.activations += sq * mb * (m.final_norm ? 2 : 1) * h * act_b / rep_div;
            // Logits in the activation dtype plus the fp32 copy the softmax /
            // cross-entropy works on, vocabulary split by TP.
            mem.logits = sq * mb * static_cast<double>(m.vocab) / tp * (act_b + 4.0);
        }

        // ---- temporary buffers
        double temp = gathered_weights;
        if (t.optimizer_offload != Offload::None) temp += def.grad_bucket_bytes;
        if (t.recompute == Recompute::Full) temp += layer_act_full;  // one layer recomputed during backward
        if (t.recompute == Recompute::Selective) temp += g.stored_none.bytes(sq, mb, tp, sp) - g.stored_selective.bytes(sq, mb, tp, sp);
        if (lay.dp > 1 && t.zero_stage < 3) temp += def.grad_bucket_bytes;
        if (qlora) {
            // bitsandbytes dequantizes one weight matrix to 16-bit per matmul.
            const double ffn = static_cast<double>(m.is_moe() ? m.moe.expert_ffn : m.ffn);
            temp += std::max(h * ffn, h * static_cast<double>(m.q_dim())) / tp * 2.0;
        }
        mem.temporary = temp;

        mem.allocated = mem.weights + mem.gradients + mem.optimizer + mem.activations + mem.logits + mem.temporary;
        mem.framework = framework_bytes;
        mem.fragmentation = mem.allocated * frag_frac;
        mem.total = mem.allocated + mem.framework + mem.fragmentation;
        mem.capacity = s.cluster.gpu.capacity_bytes;

        // Paged optimizer (bitsandbytes): states live in unified memory and are
        // evicted to the host when the device runs out.
        if (qlora && t.qlora.paged_optimizer && mem.total > mem.capacity && mem.optimizer > 0) {
            const double over = mem.total - mem.capacity;
            const double moved = std::min(mem.optimizer, over / (1.0 + frag_frac));
            mem.paged_out = moved;
            mem.optimizer -= moved;
            host += moved;
            mem.allocated -= moved;
            mem.fragmentation = mem.allocated * frag_frac;
            mem.total = mem.allocated + mem.framework + mem.fragmentation;
        }
        mem.cpu = host;
        mem.nvme = nvme;
        est.stages.push_back(st);
    }
    est.worst = 0;
    for (size_t i = 1; i < est.stages.size(); ++i)
        if (est.stages[i].mem.total > est.stages[static_cast<size_t>(est.worst)].mem.total) est.worst = static_cast<int>(i);
    return est;
}

}  // namespace trainplan
