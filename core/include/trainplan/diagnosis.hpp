// Diagnosis: the one bottleneck classifier (used by advise, size and the GUI),
// and the reconciliation of the model's view with what a user observed.
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

    // The job runs (something was measured on it) and did not stop with an OOM.
    [[nodiscard]] bool reports_running() const {
        return !oom && (step_s || tokens_per_s || gpu_util_pct || util_swings || peak_memory_bytes || gpu_temp_c || sm_clock_mhz);
    }
    // The GPUs visibly wait: utilization swings, or averages below kIdleUtilPct.
    [[nodiscard]] bool gpus_idle() const;
};

enum class Bottleneck { Memory, Compute, MemoryBandwidth, Communication, PipelineBubble, DataPipeline, Thermal, Offload };
[[nodiscard]] const char* to_string(Bottleneck b);

// The thresholds, defined once. A share of the step (or of compute time) above
// the threshold names that part the bottleneck; they are checked in this order,
// the first that holds wins. Chosen so that the seed reports (../shared/seeds)
// read as their authors describe them: a loader stall of a tenth of the step is
// already what people notice as "utilization swinging"; exposed communication
// of a fifth is where practitioners report disappointing multi-GPU scaling.
struct BottleneckThresholds {
    static constexpr double kMemoryHeadroom = 0.03;     // of capacity: closer than this is "memory"
    static constexpr double kThermal = 0.08;            // clock-loss share of the step
    static constexpr double kDataStall = 0.10;          // loader stall share
    static constexpr double kOffload = 0.25;            // CPU optimizer + PCIe share
    static constexpr double kCommunication = 0.20;      // exposed communication share
    static constexpr double kBubble = 0.15;             // pipeline bubble share
    static constexpr double kMemoryBoundCompute = 0.40; // element-wise (HBM-bound) share of compute time
    static constexpr double kLowMfu = 0.30;             // below: "the GEMMs are small or the layout is wrong"
    static constexpr double kHostWait = 0.25;           // GPU waiting on the host's issue share: "host-bound"
    static constexpr double kIdleUtilPct = 80;          // observed utilization below this: GPUs wait
    static constexpr double kModelAgrees = 1.15;        // observed within this factor of the model: it explains the run
};

// The bottleneck of a scenario as the model sees it (memory first, then the
// time breakdown in the order of BottleneckThresholds).
[[nodiscard]] Bottleneck classify(const Scenario& s, const MemoryBreakdown& m, const TimeBreakdown& t);

struct Diagnosis {
    Bottleneck bottleneck = Bottleneck::Compute;
    std::string headline;               // one sentence
    std::vector<std::string> evidence;  // the numbers that show it
    // What the observed vs predicted gap points to (when observations are given);
    // starts "Your observation disagrees with the model: " when they contradict.
    std::string observation_gap;
    bool disagrees = false;             // an observation contradicts the model
};

// `s`: the scenario as it runs (observed mechanisms such as clocks applied);
// `m`, `t`: its memory and time; `as_given_tokens_per_s`: the model for the
// scenario as entered; `observed_tokens_per_s`: 0 when nothing was measured.
[[nodiscard]] Diagnosis diagnose(const Scenario& s, const MemoryBreakdown& m, const TimeEstimate& t, const Observations& obs,
                                 double as_given_tokens_per_s, double observed_tokens_per_s);

}  // namespace trainplan
