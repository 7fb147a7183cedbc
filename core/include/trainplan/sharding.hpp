// ShardPlan: one function from a scenario to how every parameter-sized state is
// divided across GPUs (TP, PP, EP, ZeRO 0-3, FSDP full / grad-op / hybrid /
// none) and which tier each process group spans. Memory and time both use it.
#pragma once

#include "trainplan/opgraph.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

// The slowest link a process group crosses.
enum class Tier {
    Local,      // a group of one rank: no communication
    IntraNode,  // NVLink / NVSwitch / PCIe / Infinity Fabric inside one node
    InterNode,  // the network between nodes
};
[[nodiscard]] const char* to_string(Tier t);

struct ProcessGroup {
    int size = 1;      // ranks
    int per_node = 1;  // of them sharing one node
    int nodes = 1;     // nodes it spans
    Tier tier = Tier::Local;
};

// Divisors of the per-GPU copy of each state, applied after the TP (and, for
// experts, EP) split of the weights: 1 = every rank of the group keeps all of it.
struct StateDivisors {
    double weights = 1, gradients = 1, optimizer = 1;  // optimizer includes the fp32 master copy
};

// ZeRO (Rajbhandari et al. 2020, Sec. 5): stage 1 shards the optimizer states
// over `shard` ranks, stage 2 also the gradients, stage 3 also the weights.
[[nodiscard]] StateDivisors zero_divisors(int zero_stage, double shard);

struct ShardPlan {
    int tp = 1, pp = 1, dp = 1, ep = 1, cp = 1;
    StateDivisors dense;   // dense, embedding and norm weights (over the shard group)
    StateDivisors expert;  // routed experts (over the shard group's expert-data-parallel part)
    // dp_group: the ranks that reduce one gradient, dp x cp (context-parallel
    // ranks hold the same weights); cp_group: the ranks one sequence is split over.
    ProcessGroup tp_group, pp_group, dp_group, ep_group, cp_group;
    // Ranks one ZeRO / FSDP shard is spread over: the data-parallel group, or
    // the data-parallel ranks of one node under FSDP HYBRID_SHARD.
    ProcessGroup shard_group;
    // Hybrid sharding: the ranks that hold the same shard on other nodes and
    // all-reduce its gradients (size 1 otherwise).
    ProcessGroup replica_group;
    int expert_shard = 1;       // expert states: shard group / EP
    bool gathers_weights = false;  // weights sharded (ZeRO-3 / FSDP full or hybrid) over > 1 rank
    bool hybrid = false;
    // What one rank holds of a weight bucket (WeightSums::Bucket): 1 / this.
    [[nodiscard]] double weight_divisor(int bucket) const {
        return bucket == WeightSums::Expert ? static_cast<double>(tp) * ep : bucket == WeightSums::TensorParallel ? tp : 1.0;
    }
};

// The scenario must be valid (validate()).
[[nodiscard]] ShardPlan shard_plan(const Scenario& s);

// NCCL communicators one rank of a pipeline stage opens, by size: a
// communicator holds its channels' buffers for the life of the process, so
// each one costs memory whether or not its traffic is large (memory.cpp).
struct Communicators {
    int pairs = 0;   // two-rank groups
    int groups = 0;  // groups of more than two ranks
    // NVLink SHARP: the GPUs of this rank's node in each communicator NCCL sets
    // NVLS up on, summed (each costs MemoryDefaults::nvls_head per such GPU).
    int nvls_heads = 0;
    [[nodiscard]] int total() const { return pairs + groups; }
};
[[nodiscard]] Communicators communicators(const Scenario& s, const ShardPlan& p, bool first, bool last);

// Parameters one GPU holds for a pipeline stage of `layers` layers (with the
// embedding side if `first`, the head side if `last`), after the TP split (and
// EP for routed experts), before ZeRO / FSDP sharding: the graph's weights,
// walked once. A tied embedding's copy counts on the last stage when pp > 1.
struct StageParams {
    double dense = 0, expert = 0;                   // all weights (dense includes embeddings and norms)
    double trainable_dense = 0, trainable_expert = 0;
    double frozen_linear_dense = 0, frozen_linear_expert = 0;  // frozen base linear layers (QLoRA: 4-bit)
    double frozen_other = 0;                        // frozen norms, embeddings, router
    double module_copies = 0;                       // trainable copies of frozen modules (PEFT modules_to_save)
    // Weights no pass uses on text batches (WeightSums::idle), all and the trainable ones.
    double idle = 0, idle_trainable = 0;
    [[nodiscard]] double total() const { return dense + expert; }
    [[nodiscard]] double trainable() const { return trainable_dense + trainable_expert; }
};
[[nodiscard]] StageParams stage_params(const StepGraph& g, const ShardPlan& p, double layers, bool first, bool last);

}  // namespace trainplan
