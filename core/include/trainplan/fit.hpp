// "Will it fit, and if not, what would make it fit?"
#pragma once

#include <string>
#include <vector>

#include "trainplan/memory.hpp"

namespace trainplan {

struct Remedy {
    std::string title;         // e.g. "QLoRA (NF4) + full recompute"
    std::vector<std::string> changes;  // one line per changed setting, "recompute: none -> full"
    std::string cost;          // what it costs in plain words
    bool changes_result = false;  // trains something different (adapters, smaller batch)
    int rank_cost = 0;         // ordering key: lower is cheaper
    int extra_gpus = 0;
    Scenario scenario;         // the changed scenario
    MemoryBreakdown memory;    // its worst stage
    double step_s = 0;         // simulated step time of the changed scenario
    double slowdown = 0;       // time per token relative to the original, - 1
};

struct FitReport {
    MemoryEstimate estimate;
    bool fits = false;
    std::vector<Remedy> remedies;  // only those that fit, cheapest first
    double step_s = 0;             // the scenario as given (even if it does not fit)
};

// Evaluates the scenario and, when it does not fit, searches single changes and
// small combinations, each re-evaluated through the memory and time models.
// Ranked by simulated step time (result-changing ones are marked); more GPUs
// (money) last.
[[nodiscard]] FitReport check_fit(const Scenario& s, int max_remedies = 6);

}  // namespace trainplan
