// The accuracy table: published measurements (with their sources) against the
// model's predictions. Each case is a complete scenario file (the sections
// `trainplan simulate --scenario` reads) plus a [measured] table holding the
// published figure and the convention it was measured in (MFU vs HFU and the
// FLOP formula, allocated vs reserved vs device memory), so the comparison is
// like with like and nothing in code keys on case ids. The format is described
// in validation/README.md. Used by `trainplan validate` and the tests.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainplan/io.hpp"

namespace trainplan {

// What a case compares, in the source's convention.
enum class CaseMetric {
    PeakMemory,         // GB per GPU; convention: allocated | reserved | device
    OutOfMemory,        // the run was reported to run out of memory (a verdict)
    FitsUnder,          // the run fit under `value` GB per GPU (a verdict)
    StepTime,           // s per optimizer step (iteration)
    LayerTime,          // ms: one layer's forward + backward (+ recompute) with its TP collectives
    TokensPerSPerGpu,   // tokens/s per GPU
    TokensPerS,         // tokens/s, whole job
    TflopsPerGpu,       // achieved TFLOP/s per GPU under `flop_formula`
    Mfu,                // % of peak under `flop_formula`
    Hfu,                // % of peak, recompute counted (executed FLOPs)
};

// How the source counts memory.
enum class MemoryConvention {
    Allocated,  // torch.cuda.max_memory_allocated: tensors only
    Reserved,   // torch.cuda.max_memory_reserved: tensors + caching-allocator slack
    Active,     // memory_stats()["active_bytes.all.peak"]: tensors + blocks freed but awaiting a stream
    Device,     // nvidia-smi / whole device: + CUDA context and framework workspace
};

// How the source counts FLOPs for TFLOP/s and MFU.
enum class FlopFormula {
    None,
    PaLM,          // "6N+12Lhs": 6 x matmul params (layers + LM head) + 12 L (n_heads d_head) s (PaLM App. B)
    StatedParams,  // "6P+12Lhs": 6 x the source's own parameter count `params` + 12 L h s
    StatedParams6, // "6P": 6 x `params`, attention not counted
    MegatronEq3,   // "megatron-eq3": 96 B s l h^2 (1 + s/6h + V/16lh), recompute counted (Narayanan et al. 2021)
};

// One case as written in its file.
struct ValidationCase {
    std::string id, file;
    int line = 0;                  // of the [measured] table
    std::string kind;              // memory | throughput
    CaseMetric metric = CaseMetric::StepTime;
    std::string metric_name;       // as spelled in the file
    std::optional<double> value;
    std::string unit;
    MemoryConvention memory = MemoryConvention::Device;
    FlopFormula flops = FlopFormula::None;
    std::optional<double> params, peak_tflops;
    std::string stack;
    std::vector<std::string> regimes;
    std::string source, source_locator, confidence;
    std::string collection;        // "reference" (shared/validation) | "grown" (issue 11)
    std::string missing_mechanism; // why the model cannot count it yet (never "outlier")
    std::string missing_input;     // configuration the source does not give
    std::vector<std::string> assumed;
    std::optional<ScenarioInput> scenario;  // absent for cases left out without one
};

// Parses case files (one case per file). Rejects missing or unknown [measured]
// keys, unknown metrics, conventions, stacks and regimes with file:line.
[[nodiscard]] Result<std::vector<ValidationCase>> load_validation_cases(const std::vector<TextSource>& case_files);

// A published figure that was read and is not counted: its source does not give
// the exact configuration a case needs (validation/README.md, "Read and not
// counted"). Kept in validation/unusable.toml so validate reports them on a line
// of their own instead of counting them as left-out cases.
struct UnusableCase {
    std::string id;
    std::string source, source_locator;
    std::string metric, unit;
    double value = 0;
    std::string lacks;  // what the source does not give (short, grouped in validate's output)
    std::string notes;
};

// Parses the list ([[case]] tables: id, source, source_locator, metric, value,
// unit, lacks, notes); unknown or missing keys are reported with file:line.
[[nodiscard]] Result<std::vector<UnusableCase>> load_unusable_cases(const TextSource& file);

// The accepted spellings (for messages and the README).
[[nodiscard]] const std::vector<std::string>& validation_stacks();
[[nodiscard]] const std::vector<std::string>& validation_regimes();

struct ValidationRow {
    std::string id;
    std::string kind;        // memory | throughput (throughput, MFU and step-time cases)
    std::string metric;      // what is compared, in the source's convention
    std::string unit;
    double published = 0;
    double predicted = 0;
    double error = 0;        // (predicted - published) / published
    bool counted = false;    // enters the statistics
    bool verdict = false;    // a fits / does-not-fit check instead of a number
    bool verdict_ok = false;
    // A published step time or throughput of a whole model is also a verdict the
    // source did not write down: the run ran, so it fit. `ran`: such a row (not a
    // per-layer timing); `ran_fits`: the model's peak fits the card too.
    bool ran = false;
    bool ran_fits = false;
    double ran_peak_gb = 0, ran_capacity_gb = 0;
    std::string note;        // why left out, or the assumptions made
    std::string source;
    std::string stack, collection;
    std::vector<std::string> regimes;
    std::string missing_mechanism, missing_input;
};

struct ValidationStats {
    int count = 0;
    double median = 0, p90 = 0, worst = 0;  // of |error|
    double bias = 0;                        // median signed error (+ = over-predicted)
};

// Statistics of one group of cases (a stack, a regime, a collection).
struct ValidationGroup {
    std::string name;
    ValidationStats memory, throughput;
    int left_out = 0;
};

struct ValidationReport {
    std::vector<ValidationRow> rows;
    ValidationStats memory, throughput;      // the reference collection (the budgets apply here)
    ValidationStats grown_memory, grown_throughput;  // cases added for issue 11, reported separately
    ValidationStats all_memory, all_throughput;      // every counted case, both collections (issue 11's targets)
    std::vector<ValidationGroup> by_stack, by_regime;  // every counted case
    int verdicts = 0, verdicts_failed = 0;
    int ran = 0, ran_not_fitting = 0;  // counted runs that ran; those predicted not to fit
    // Budgets (the reference collection): memory median <= 5 %, worst <= 15 %;
    // throughput median <= 10 %, 90th percentile <= 20 %.
    [[nodiscard]] bool within_bounds() const;
};

// The scenario of each throughput case the tool can express (for layout-search
// checks against published runs).
struct PublishedRun {
    std::string id;
    Scenario scenario;
};
[[nodiscard]] Result<std::vector<PublishedRun>> published_runs(const std::vector<TextSource>& case_files, PresetLookup& lookup);

// The model's figure for one counted case, in the case's own metric and
// convention (what run_validation compares); nullopt for verdict cases.
// Used by the calibration cross-validation (calibrate.hpp).
[[nodiscard]] std::optional<double> predict_case(const ValidationCase& c, const Scenario& s);

// Evaluates every case file. GPUs and models are looked up through `lookup`.
[[nodiscard]] Result<ValidationReport> run_validation(const std::vector<TextSource>& case_files, PresetLookup& lookup);

}  // namespace trainplan
