// advise: the diagnosis (diagnosis.hpp) of a scenario as it runs, and what each
// well-known remedy (moves.hpp) would buy, every one pre-checked by the rules and
// re-simulated through the memory and time models. Only remedies that help are
// kept: those that make a scenario fit that does not, or that are at least 2 %
// faster than the scenario as it runs (model against model, so an observed
// shortfall the model does not explain never inflates a remedy).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainplan/diagnosis.hpp"

namespace trainplan {

struct Advice {
    std::string title;
    std::vector<std::string> changes;
    std::string assumption;       // what the estimate assumes
    bool changes_result = false;  // trains something different (adapters, another global batch)
    int extra_gpus = 0;
    std::string hardware_change;  // new GPU / link, when the remedy is hardware
    Scenario scenario;            // the changed scenario, as simulated
    MemoryBreakdown memory;
    TimeEstimate time;
    bool fixes_memory = false;    // the scenario as given does not fit; this does
    double speedup = 1;           // predicted tokens/s relative to the model of the scenario as it runs
};

// Alternatives the advisor may propose (presets resolved by the caller).
struct AdviceContext {
    std::vector<LinkSpec> intra_links;  // faster GPU-to-GPU links the current GPU can use
    std::vector<LinkSpec> inter_links;  // faster node-to-node fabrics to try
    std::vector<std::pair<GpuSpec, LinkSpec>> gpus;  // other GPUs to try, each with its GPU-to-GPU link
    LinkSpec fabric;  // the GPU's default node-to-node link, for a remedy that grows past one node
};

struct AdviceReport {
    Diagnosis diagnosis;
    MemoryBreakdown memory;
    TimeEstimate time;                  // the scenario as given, with observed effects applied
    double observed_tokens_per_s = 0;   // 0 when not observed
    std::vector<Advice> remedies;       // best first
};

// `s` must be valid. Observations adjust the scenario where they are mechanisms
// the model has (clocks, loader rate); the rest is compared with the prediction.
[[nodiscard]] AdviceReport advise(const Scenario& s, const Observations& obs, const AdviceContext& ctx, int max_remedies = 8);

}  // namespace trainplan
