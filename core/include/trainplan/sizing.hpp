// Procurement sizing: for each candidate GPU, the fewest GPUs (and nodes) whose
// best layout trains a token budget by a deadline, with time, energy and cost;
// then a recommendation in plain words.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainplan/search.hpp"

namespace trainplan {

struct SizingGoal {
    double tokens = 0;            // to train
    double deadline_s = 0;        // 0 = none (then the fewest GPUs that fit)
    double budget_usd = 0;        // 0 = none
    int max_gpus = 16384;
    std::map<std::string, double> rent_usd_per_gpu_hour;  // by GPU preset id
    std::map<std::string, double> price_usd_per_gpu;      // by GPU preset id (else the preset's price)
};

struct SizingOption {
    std::string gpu_id, gpu_name;
    bool meets = false;           // a GPU count up to max_gpus meets the deadline (and budget)
    std::string why_not;          // when it does not
    int gpus = 0, nodes = 0;
    PlanCandidate best;           // its best layout at that count
    double train_time_s = 0, gpu_hours = 0, energy_kwh = 0, energy_cost_usd = 0;
    double rent_usd_per_gpu_hour = 0, rent_cost_usd = 0;  // 0 when no rent given
    double price_usd_per_gpu = 0, purchase_usd = 0;       // 0 when no price known
    double amortized_usd = 0;     // purchase share for the run's duration
    double headroom_bytes = 0;
    std::string bound;            // the bottleneck (diagnosis.hpp classify): compute | communication | memory capacity | ...
};

struct SizingReport {
    SizingGoal goal;
    Scenario base;                // model and training setup
    std::vector<SizingOption> options;  // in candidate order
    int recommended = -1;         // index into options
    std::string cost_basis;       // "rent" or "purchase"
    std::string recommendation;   // plain words
};

// `candidates`: one cluster template per GPU (GPU, GPUs per node, links, NICs);
// the GPU count is chosen here. The base scenario supplies model and setup.
[[nodiscard]] SizingReport size_hardware(const Scenario& base, std::int64_t global_batch, const std::vector<ClusterSpec>& candidates,
                                         const SizingGoal& goal, unsigned threads = 0);

}  // namespace trainplan
