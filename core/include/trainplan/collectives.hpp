// Collective costs on one tier of the cluster (NCCL ring / tree formulas):
// what one rank moves and how long it takes at the tier's bus bandwidth.
#pragma once

#include "trainplan/hardware.hpp"

namespace trainplan {

// Achievable bus bandwidth and per-step latency of one link.
struct LinkCost {
    double bus_Bps = 0;
    double latency_s = 0;
    double ring_hop_s = 0;  // per step of a ring (see ring_latency_s)
};

// The link's own efficiency and latency where the preset gives them, else the
// defaults per link kind (policy data, see policy.hpp).
[[nodiscard]] LinkCost link_cost(const LinkSpec& l);

// The two tiers of a cluster: between GPUs of one node, and between nodes as one
// GPU sees it (its share of the node's NICs).
struct TierCosts {
    LinkCost intra, inter;
};
[[nodiscard]] TierCosts tier_costs(const ClusterSpec& c);

// Bytes one rank sends (= receives) in a ring collective over n ranks on a
// message of `bytes` (NCCL: all-reduce 2(n-1)/n S; all-gather and
// reduce-scatter (n-1)/n S of the gathered / reduced size S; all-to-all (n-1)/n S).
[[nodiscard]] double allreduce_bytes(double bytes, int n);
[[nodiscard]] double allgather_bytes(double bytes, int n);
[[nodiscard]] double reducescatter_bytes(double bytes, int n);

// Times: latency per ring step (log-scaled like NCCL's trees on large groups)
// plus the bytes above at the bus bandwidth.
[[nodiscard]] double allreduce_s(double bytes, int n, const LinkCost& c);
[[nodiscard]] double allgather_s(double bytes, int n, const LinkCost& c);
[[nodiscard]] double reducescatter_s(double bytes, int n, const LinkCost& c);
// Latency of one ring all-gather or reduce-scatter over `per_node` x `nodes`
// ranks. NCCL runs these two collectives as rings only (src/graph/tuning.cc
// skips every other algorithm for them; PAT, NCCL 2.23+, only with one GPU per
// node): nRanks - 1 steps, nNodes - 1 of them across the network, each adding
// its hop latency to the collective's base latency.
[[nodiscard]] double ring_latency_s(int per_node, int nodes, const LinkCost& intra, const LinkCost& inter);
// All-to-all (MoE dispatch / combine): n - 1 pairwise exchanges of S/n each.
[[nodiscard]] double alltoall_s(double bytes, int n, const LinkCost& c);

}  // namespace trainplan
