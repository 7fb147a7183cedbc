#include "trainplan/sharding.hpp"

#include <algorithm>

namespace trainplan {

const char* to_string(Tier t) {
    switch (t) {
        case Tier::Local: return "local";
        case Tier::IntraNode: return "intra-node";
        case Tier::InterNode: return "inter-node";
    }
    return "?";
}

StateDivisors zero_divisors(int zero_stage, double shard) {
    const double d = std::max(1.0, shard);
    return {zero_stage >= 3 ? d : 1.0, zero_stage >= 2 ? d : 1.0, zero_stage >= 1 ? d : 1.0};
}

namespace {

// `size` ranks of one process group, `per_node` of them in one node (shard_plan
// gives the rank order that decides both).
ProcessGroup group(int size, int per_node, bool crosses_nodes) {
    ProcessGroup g;
    g.size = std::max(1, size);
    g.per_node = std::clamp(per_node, 1, g.size);
    g.nodes = (g.size + g.per_node - 1) / g.per_node;
    g.tier = g.size <= 1 ? Tier::Local : crosses_nodes ? Tier::InterNode : Tier::IntraNode;
    return g;
}

}  // namespace

ShardPlan shard_plan(const Scenario& s) {
    const ParallelLayout& lay = s.setup.layout;
    const TrainingSetup& t = s.setup;
    const int gpn = std::max(1, s.cluster.gpus_per_node);
    const bool multi_node = s.cluster.num_nodes() > 1;
    ShardPlan p;
    p.tp = lay.tp;
    p.pp = lay.pp;
    p.dp = lay.dp;
    p.ep = lay.ep;
    p.cp = lay.cp;

    // Placement: the rank order every framework we model builds its groups in,
    // TP fastest, then CP, then DP, with PP outermost: Megatron-Core's
    // RankGenerator order "tp-cp-ep-dp-pp" (parallel_state.py; before Core the
    // data-parallel groups were range(start + j, end, tp) inside each pipeline
    // stage's block of world/pp ranks, the pipeline groups range(i, world,
    // world/pp)); Megatron-DeepSpeed's PipeModelDataParallelTopology axes
    // ['pipe', 'data', 'model'] (last fastest); torchtitan's device mesh
    // ["pp", "dp_replicate", "dp_shard", "cp", "tp"]. So the ranks of one
    // replica that share a node are its TP x CP slice and the other data-
    // parallel replicas of the same stage, and the pipeline's neighbours sit
    // tp x cp x dp ranks apart: on another node once that block fills one.
    const int tcp = lay.tp * lay.cp;
    const int replicas = tcp * lay.dp;  // ranks of one pipeline stage
    p.tp_group = group(lay.tp, std::min(lay.tp, gpn), lay.tp > gpn);
    const int cp_per_node = std::max(1, std::min(lay.cp, gpn / lay.tp));
    p.cp_group = group(lay.cp, cp_per_node, tcp > gpn);
    const int dp_per_node = std::max(1, std::min(lay.dp, gpn / std::max(1, tcp)));
    p.pp_group = group(lay.pp, std::max(1, gpn / replicas), replicas * lay.pp > gpn && multi_node);
    // The CP ranks of one replica hold the same weights and reduce their
    // gradients together with the data-parallel ranks: gradients (and the
    // ZeRO / distributed-optimizer / FSDP shards) span dp x cp ranks
    // (Megatron-Core's data-parallel group "with CP"; torchtitan shards FSDP
    // over dp_shard x cp).
    p.dp_group = group(lay.dp * lay.cp, dp_per_node * cp_per_node, replicas > gpn && multi_node);
    p.ep_group = group(lay.ep, std::max(1, gpn / lay.tp), lay.ep * lay.tp > gpn);

    // ZeRO / FSDP shard group; hybrid sharding keeps the shard inside the node
    // and replicates it across nodes (PyTorch FSDP HYBRID_SHARD).
    const int grad_per_node = p.dp_group.per_node;
    p.hybrid = t.fsdp == FsdpStrategy::HybridShard && p.dp_group.size > grad_per_node;
    if (p.hybrid) {
        p.shard_group = group(grad_per_node, grad_per_node, false);
        p.replica_group = group(p.dp_group.size / grad_per_node, 1, true);
    } else {
        p.shard_group = p.dp_group;
    }
    const int shard = t.zero_stage >= 1 ? p.shard_group.size : 1;
    p.expert_shard = std::max(1, shard / std::max(1, lay.ep));
    p.dense = zero_divisors(t.zero_stage, shard);
    p.expert = zero_divisors(t.zero_stage, p.expert_shard);
    p.gathers_weights = t.zero_stage >= 3 && shard > 1;
    return p;
}

// Which process groups see a collective, per rank:
//  - the world group: every launcher and engine runs at least a barrier on it
//    (torch.distributed's default group, whose communicator PyTorch creates at
//    the first collective);
//  - one per parallel dimension of more than one rank (tp, cp, pp, dp or, under
//    hybrid sharding, the shard and replica groups, ep). An engine other than
//    Megatron runs a dimension that spans every rank on the world group itself
//    (DDP, FSDP and DeepSpeed default to it); Megatron builds each dimension
//    with its own new_group (megatron/core/parallel_state.py
//    initialize_model_parallel), and pipeline send / receive go through the
//    pipeline group's communicator (batch_isend_irecv);
//  - Megatron also averages the loss over a data-parallel group of its own on
//    the last stage (a second new_group beside the one "with context
//    parallelism" that reduces the gradients), and all-reduces tied word
//    embeddings over a group of the first and last stages when pp > 1
//    (finalize_model_grads: _allreduce_word_embedding_grads).
// Read in Megatron-LM core_v0.6.0 (parallel_state.py, training/utils.py,
// distributed/finalize_model_grads.py).
Communicators communicators(const Scenario& s, const ShardPlan& p, bool first, bool last) {
    Communicators c;
    const int world = s.cluster.num_gpus;
    // NCCL, and AMD's RCCL, which keeps NCCL's per-channel buffers; Gaudi's HCCL
    // and the XLA collectives of TPUs have no such figure: none counted.
    const std::string& vendor = s.cluster.gpu.vendor;
    if (world <= 1 || (vendor != "nvidia" && vendor != "amd")) return c;
    const bool megatron = s.setup.framework == Framework::Megatron;
    // NVLink SHARP on a multicast switch (training.hpp NcclRelease): more than two
    // GPUs of the node in the communicator; NCCL 2.20 only on single-node ones.
    const NcclRelease nccl = s.setup.nccl;
    const bool nvls = vendor == "nvidia" && s.cluster.intra_node.nvls && nccl != NcclRelease::NvlsOff;
    auto add = [&](const ProcessGroup& g) {
        if (g.size <= 1) return;
        (g.size == 2 ? c.pairs : c.groups) += 1;
        if (nvls && g.per_node > 2 && (g.nodes == 1 || nccl != NcclRelease::V2_20)) c.nvls_heads += g.per_node;
    };
    const int gpn = std::max(1, std::min(world, s.cluster.gpus_per_node));
    add(group(world, gpn, world > gpn));
    auto dimension = [&](const ProcessGroup& g) {
        if (g.size < world || megatron) add(g);
    };
    dimension(p.tp_group);
    dimension(p.cp_group);
    dimension(p.pp_group);
    dimension(p.ep_group);
    if (p.hybrid) {
        dimension(p.shard_group);
        dimension(p.replica_group);
    } else {
        dimension(p.dp_group);
    }
    if (megatron) {
        // The loss-averaging data-parallel group: the dp ranks of dp_group (which
        // also spans the context-parallel ranks).
        if (last && p.dp > 1) {
            const int cp_local = std::max(1, p.cp_group.per_node);
            const int per_node = std::max(1, p.dp_group.per_node / cp_local);
            add(group(p.dp, per_node, p.dp > per_node));
        }
        if (p.pp > 1 && (first || last) && s.model.tied_embeddings) add(group(2, 1, true));  // first and last stage
    }
    return c;
}

StageParams stage_params(const StepGraph& g, const ShardPlan& p, double layers, bool first, bool last) {
    StageParams sp;
    const double count[3] = {first ? 1.0 : 0.0, layers, last ? 1.0 : 0.0};  // Site::First, Layer, Last
    for (int site = 0; site < 3; ++site) {
        if (count[site] == 0) continue;
        const WeightSums& w = g.weights[site];
        for (int b = 0; b < 3; ++b) {
            const double k = count[site] / p.weight_divisor(b);
            double& all = b == WeightSums::Expert ? sp.expert : sp.dense;
            (b == WeightSums::Expert ? sp.trainable_expert : sp.trainable_dense) += k * w.trainable[b];
            (b == WeightSums::Expert ? sp.frozen_linear_expert : sp.frozen_linear_dense) += k * w.frozen_linear[b];
            sp.frozen_other += k * w.frozen_other[b];
            sp.module_copies += k * w.copies[b];
            sp.idle += k * (w.idle[b] + w.idle_trainable[b]);
            sp.idle_trainable += k * w.idle_trainable[b];
            all += k * (w.trainable[b] + w.frozen_linear[b] + w.frozen_other[b] + w.copies[b]);
        }
        // Megatron keeps a copy of tied word embeddings on the last stage.
        if (w.tied_copy > 0 && p.pp > 1) {
            const double copy = count[site] * w.tied_copy / p.tp;
            sp.dense += copy;
            (w.tied_copy_trainable ? sp.trainable_dense : sp.frozen_other) += copy;
        }
    }
    return sp;
}

}  // namespace trainplan
