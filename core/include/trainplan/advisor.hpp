// Diagnosis and remedies: which bottleneck a scenario has (from the model and,
// where given, what the user observed) and what each well-known remedy would
// buy, every one re-simulated through the memory and time models.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainplan/time.hpp"

namespace trainplan {

enum class Storage { Unknown, HDD, SataSSD, NVMe, Network };
[[nodiscard]] const char* to_string(Storage s);
[[nodiscard]] double storage_read_bytes_per_s(Storage s);  // per node, documented estimates

// What the user saw on the running job (all optional).
struct Observations {
    std::optional<double> step_s;
    std::optional<double> tokens_per_s;
    std::optional<double> gpu_util_pct;       // average utilization
    bool util_swings = false;                 // utilization swinging between ~0 and 100 %
    std::optional<double> peak_memory_bytes;
    bool oom = false;
    std::optional<double> gpu_temp_c;
    std::optional<double> sm_clock_mhz;       // sustained clock under load
    std::optional<int> loader_workers;
    Storage storage = Storage::Unknown;
};

enum class Bottleneck { Memory, Compute, MemoryBandwidth, Communication, PipelineBubble, DataPipeline, Thermal, Offload };
[[nodiscard]] const char* to_string(Bottleneck b);

struct Diagnosis {
    Bottleneck bottleneck = Bottleneck::Compute;
    std::string headline;               // one sentence
    std::vector<std::string> evidence;  // the numbers that show it
    std::string observation_gap;        // what the observed vs predicted gap points to (if observations given)
};

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
    double speedup = 1;           // tokens/s relative to the scenario as it is (or as it runs, observed)
};

// Alternatives the advisor may propose (presets resolved by the caller).
struct AdviceContext {
    std::vector<LinkSpec> intra_links;  // faster GPU-to-GPU links the current GPU can use
    std::vector<LinkSpec> inter_links;  // faster node-to-node fabrics to try
    std::vector<std::pair<GpuSpec, LinkSpec>> gpus;  // other GPUs to try, each with its GPU-to-GPU link
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
