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

// `size` ranks placed `stride` apart in the rank order (Megatron: TP innermost,
// then PP, then DP), `per_node` of them in one node.
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

    // Placement: TP inside a node first, then PP, then DP (Megatron order).
    const int mp = lay.tp * lay.pp;
    p.tp_group = group(lay.tp, std::min(lay.tp, gpn), lay.tp > gpn);
    p.pp_group = group(lay.pp, std::max(1, gpn / lay.tp), mp > gpn);
    const int dp_per_node = std::max(1, std::min(lay.dp, gpn / std::max(1, mp)));
    p.dp_group = group(lay.dp, dp_per_node, mp * lay.dp > gpn && multi_node);
    p.ep_group = group(lay.ep, std::max(1, gpn / lay.tp), lay.ep * lay.tp > gpn);

    // ZeRO / FSDP shard group; hybrid sharding keeps the shard inside the node
    // and replicates it across nodes (PyTorch FSDP HYBRID_SHARD).
    p.hybrid = t.fsdp == FsdpStrategy::HybridShard && lay.dp > dp_per_node;
    if (p.hybrid) {
        p.shard_group = group(dp_per_node, dp_per_node, false);
        p.replica_group = group(lay.dp / dp_per_node, 1, true);
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

StageParams stage_params(const StepGraph& g, const ShardPlan& p, double layers, bool first, bool last) {
    StageParams sp;
    const double tp = p.tp, ep = p.ep;
    for (const OpDef& o : g.ops) {
        const WeightDef& w = o.weight;
        const double copies = o.site == Site::Layer ? layers : o.site == Site::First ? (first ? 1.0 : 0.0) : (last ? 1.0 : 0.0);
        if (copies == 0) continue;
        double params = w.params;
        // Megatron keeps a copy of tied word embeddings on the last stage.
        if (w.tied_copy && p.pp > 1) params += o.gemm_k * o.gemm_n;
        if (params == 0) continue;
        const bool expert = w.shard == ShardClass::Expert;
        const double local = copies * params / (w.tp_split ? tp : 1.0) / (expert ? ep : 1.0);
        (expert ? sp.expert : sp.dense) += local;
        if (w.trainable) (expert ? sp.trainable_expert : sp.trainable_dense) += local;
        else if (w.quantizable()) (expert ? sp.frozen_linear_expert : sp.frozen_linear_dense) += local;
        else sp.frozen_other += local;
    }
    return sp;
}

}  // namespace trainplan
