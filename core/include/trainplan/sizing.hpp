// Procurement sizing: for each candidate GPU, the fewest GPUs (and nodes) whose
// best layout trains a token budget by a deadline with a margin (memory and time
// at the pessimistic end of the model's accuracy band), renting and buying priced
// as separate options on one basis, a bill of materials, and the time/cost
// frontier; then a recommendation in plain words.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainplan/intervals.hpp"
#include "trainplan/search.hpp"

namespace trainplan {

// How renting and buying are compared. Outlay: what the job costs you if the
// hardware has no other use (rent for the run vs purchase + energy). Amortized:
// the purchase share for the run's duration over the amortization period + energy
// (assumes the hardware stays busy afterwards; see break-even utilization).
enum class CostBasis { Outlay, Amortized };
[[nodiscard]] const char* to_string(CostBasis b);

struct SizingGoal {
    double tokens = 0;            // to train
    double deadline_s = 0;        // 0 = none (then the time/cost frontier, no single pick)
    double budget_usd = 0;        // 0 = none
    int max_gpus = 16384;
    // Probability the deadline is met and memory fits, from the model's accuracy
    // band (intervals.hpp): 0.5 = the point estimate; 0.9 (default) = the P90 of
    // step time and of memory. Needs `bands` (else the point estimate is used).
    double confidence = 0.9;
    CostBasis cost_basis = CostBasis::Outlay;
    std::map<std::string, double> rent_usd_per_gpu_hour;  // by GPU preset id
    std::map<std::string, double> price_usd_per_gpu;      // by GPU preset id (else the preset's price)
};

// A sizing candidate: the cluster template a GPU comes in (GPU, GPUs per node,
// links, NICs; the GPU count is chosen here) and its node preset when one exists.
struct SizingCandidate {
    ClusterSpec cluster;
    std::string node_id, node_name;  // empty when no node preset
    double node_power_kw = 0;        // the node preset's system power, 0 = not known
};

// One GPU count on a candidate's time/cost curve.
struct FrontierPoint {
    int gpus = 0, nodes = 0;
    double train_time_s = 0, train_time_p90_s = 0;
    double rent_usd = 0, buy_outlay_usd = 0, buy_amortized_usd = 0;  // 0 when not priced
};

struct BillOfMaterials {
    int nodes = 0, gpus = 0, gpus_per_node = 0;
    std::string node;                  // node preset name, or "N-GPU server (no node preset)"
    std::string node_id;               // node preset id when the nodes are that preset
    int nics = 0;                      // compute-fabric NICs (0 on one node)
    std::string fabric, intra_node;    // link names
    double host_ram_per_node_bytes = 0;  // CPU offload / paged states (0 = none needed)
    double nvme_per_node_bytes = 0;      // NVMe offload (0 = none)
    double power_kw = 0;               // facility power while training (model: board + node overhead, x PUE)
    double node_power_kw = 0;          // nodes x the node preset's system power; 0 = not known
};

struct SizingOption {
    std::string gpu_id, gpu_name, vendor;
    bool consumer = false, p2p = true;
    bool meets = false;           // a GPU count up to max_gpus meets the deadline (at `confidence`), memory margin and budget
    std::string why_not;          // when it does not: the true reason
    int gpus = 0, nodes = 0;
    PlanCandidate best;           // its best layout at that count
    double train_time_s = 0, train_time_p10_s = 0, train_time_p90_s = 0;
    double tokens_per_s = 0, tokens_per_s_p10 = 0, tokens_per_s_p90 = 0;  // p10 is the pessimistic end
    double gpu_hours = 0, energy_kwh = 0, energy_cost_usd = 0;
    double rent_usd_per_gpu_hour = 0, rent_cost_usd = 0;  // 0 when no rent given (energy is in the rent)
    double rent_cost_p10_usd = 0, rent_cost_p90_usd = 0;
    double price_usd_per_gpu = 0, purchase_usd = 0;       // 0 when no price known
    double buy_outlay_usd = 0;    // purchase + energy of this run
    double amortized_usd = 0;     // purchase share for the run's duration
    double buy_amortized_usd = 0; // amortized + energy
    // Fraction of the amortization period the bought GPUs must be busy for buying
    // to cost less than renting (price / hours / (rent - energy per GPU-hour));
    // 0 when not known (no rent or no price), > 1 when buying never pays.
    double break_even_utilization = 0;
    std::string mode;             // "rent" or "buy": the cheaper on the goal's basis ("" when unpriced)
    double cost_usd = 0;          // that mode's cost on the goal's basis
    double headroom_bytes = 0, memory_margin_bytes = 0;  // headroom left; the margin the confidence asks for
    double time_ratio = 1, memory_ratio = 1;             // the band factors applied at `confidence`
    RatioBand time_band, memory_band;
    std::string bound;            // the bottleneck (diagnosis.hpp classify): compute | communication | memory capacity | ...
    BillOfMaterials bom;
    std::vector<FrontierPoint> frontier;  // Pareto points (time vs cost on the basis) over the GPU counts tried
};

struct SizingReport {
    SizingGoal goal;
    Scenario base;                // model and training setup
    std::int64_t global_batch = 0;
    std::vector<SizingOption> options;  // in candidate order
    int recommended = -1;         // index into options
    std::string recommendation;   // plain words
    std::vector<std::string> assumptions, risks;
};

// The band factor at `confidence` (0.5..0.99) from a P10/P90 band of measured /
// predicted, taken as log-normal: exp(ln(p90) z(c) / z(0.9)) above the median.
[[nodiscard]] double band_factor(const RatioBand& b, double confidence);

// `bands`: the residual table behind the accuracy band (nullptr: point estimates).
[[nodiscard]] SizingReport size_hardware(const Scenario& base, std::int64_t global_batch, const std::vector<SizingCandidate>& candidates,
                                         const SizingGoal& goal, unsigned threads = 0, const IntervalTable* bands = nullptr);
// Clusters without node presets (the GUI's call).
[[nodiscard]] SizingReport size_hardware(const Scenario& base, std::int64_t global_batch, const std::vector<ClusterSpec>& candidates,
                                         const SizingGoal& goal, unsigned threads = 0);

}  // namespace trainplan
