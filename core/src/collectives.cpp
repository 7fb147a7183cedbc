#include "trainplan/collectives.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "trainplan/policy.hpp"

namespace trainplan {

LinkCost link_cost(const LinkSpec& l) {
    const LinkDefaults& d = policy().link(l.kind, l.p2p);
    const double eff = l.efficiency > 0 ? l.efficiency : d.efficiency;
    const double lat = l.latency_s > 0 ? l.latency_s : d.latency_s;
    return {l.bandwidth_Bps * eff, lat, d.ring_hop_s};
}

TierCosts tier_costs(const ClusterSpec& c) {
    TierCosts t{link_cost(c.intra_node), link_cost(c.inter_node)};
    // Each GPU drives its share of the node's NICs.
    const int nics = c.nics_per_node > 0 ? c.nics_per_node : c.gpus_per_node;
    t.inter.bus_Bps *= static_cast<double>(nics) / std::max(1, c.gpus_per_node);
    return t;
}

double allreduce_bytes(double bytes, int n) { return n <= 1 ? 0 : 2.0 * (n - 1) / n * bytes; }
double allgather_bytes(double bytes, int n) { return n <= 1 ? 0 : 1.0 * (n - 1) / n * bytes; }
double reducescatter_bytes(double bytes, int n) { return allgather_bytes(bytes, n); }

namespace {
// ceil(log2(n)) for n >= 2, exactly as std::ceil(std::log2(double(n))) gives it
// for every int n >= 2 (checked exhaustively), without the libm calls.
double ceil_log2(int n) { return static_cast<double>(std::bit_width(static_cast<unsigned>(n - 1))); }
}  // namespace

double allreduce_s(double bytes, int n, const LinkCost& c) {
    if (n <= 1 || bytes <= 0) return 0;
    const double steps = std::min(2.0 * (n - 1), 2.0 * ceil_log2(n) + 2);
    return steps * c.latency_s + allreduce_bytes(bytes, n) / c.bus_Bps;
}
double allgather_s(double bytes, int n, const LinkCost& c) {
    if (n <= 1 || bytes <= 0) return 0;
    const double steps = std::min(1.0 * (n - 1), ceil_log2(n) + 1);
    return steps * c.latency_s + allgather_bytes(bytes, n) / c.bus_Bps;
}
double reducescatter_s(double bytes, int n, const LinkCost& c) { return allgather_s(bytes, n, c); }

double ring_latency_s(int per_node, int nodes, const LinkCost& intra, const LinkCost& inter) {
    const int n = per_node * nodes;
    if (n <= 1) return 0;
    const double base = nodes > 1 ? inter.latency_s : intra.latency_s;
    return base + (n - nodes) * intra.ring_hop_s + (nodes - 1) * inter.ring_hop_s;
}

double alltoall_s(double bytes, int n, const LinkCost& c) {
    if (n <= 1 || bytes <= 0) return 0;
    return c.latency_s * (n - 1) + bytes * (n - 1) / n / c.bus_Bps;
}

}  // namespace trainplan
