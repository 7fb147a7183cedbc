// Calibration to a user's own cluster: what measured runs say (parsers for the
// logs users already have), and a bounded nonlinear least-squares fit of the
// model's efficiency factors to them (Eigen), with standard errors, the
// parameters the runs cannot identify held at their defaults (and why), and the
// residuals before and after. Parsers take text; the front ends read files.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainplan/calibration.hpp"
#include "trainplan/io.hpp"
#include "trainplan/result.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

// ---- what a run measured (any subset), with where it was read.
struct Measured {
    std::optional<double> step_s;                // seconds per optimizer step (iteration)
    std::optional<double> tokens_per_s;          // whole job
    std::optional<double> tokens_per_s_per_gpu;  // per GPU (torchtitan "tps", torchtune)
    std::optional<double> samples_per_s;         // whole job (Hugging Face Trainer)
    std::optional<double> peak_allocated_bytes;  // torch.cuda.max_memory_allocated
    std::optional<double> peak_reserved_bytes;   // torch.cuda.max_memory_reserved
    std::optional<double> device_bytes;          // whole device (nvidia-smi)
    std::string format;                          // run-file | megatron | hf-trainer | torchtitan | torchtune | memory-summary
    std::string file;
    int line = 0;          // first line the figures came from
    int samples = 0;       // log lines the time figure is the median of
    void merge(const Measured& o);  // figures set in `o` win
    [[nodiscard]] bool empty() const;
};

enum class LogFormat { Auto, Megatron, HfTrainer, Torchtitan, Torchtune, MemorySummary };
[[nodiscard]] const char* to_string(LogFormat f);
[[nodiscard]] std::optional<LogFormat> parse_log_format(std::string_view name);
// Which format a text is in, from its first recognisable line; nullopt = none.
[[nodiscard]] std::optional<LogFormat> detect_log_format(std::string_view text);

// One log (or trainer_state.json / memory_summary() dump). Per-iteration time
// figures are the median over the logged iterations, the first one (warm-up)
// left out when there are three or more; memory figures are the maximum.
// Errors name file:line, the key and what was expected.
[[nodiscard]] Result<Measured> parse_run_log(std::string_view text, const std::string& filename, LogFormat f = LogFormat::Auto);

// A run file: the scenario sections (as in --scenario files) plus [measured]
// with step_time_s, tokens_per_s, tokens_per_s_per_gpu, samples_per_s,
// peak_allocated_gib, peak_reserved_gib, device_memory_gib (any, at least one
// unless a log is named), name, and log / log_format naming a log file
// relative to the run file, which the front end reads and merges under these.
struct RunFile {
    ScenarioInput scenario;
    Measured measured;
    std::string name;
    std::string log, log_format;
    int log_line = 0;
};
[[nodiscard]] Result<RunFile> parse_run_file(std::string_view text, const std::string& filename);

// ---- the fit.
struct MeasuredRun {
    std::string name;
    Scenario scenario;
    Measured measured;
};

// One compared figure: a measured value and how to predict it under a calibration.
struct Observation {
    std::string run, metric;  // for the residual table
    double measured = 0;
    std::function<double(const Calibration&)> predict;
    // What the figure depends on (for the reasons a parameter is held).
    bool time = false, reserved = false, device = false, multi_node = false, multi_gpu_node = false;
};
// The observations of measured runs (one per figure a run has).
[[nodiscard]] std::vector<Observation> observations(const std::vector<MeasuredRun>& runs);

enum class CalParam { Gemm, Hbm, Attention, IntraLink, InterLink, Reserve, Framework };
inline constexpr int kCalParams = 7;
[[nodiscard]] const char* to_string(CalParam p);  // the profile key

struct FittedParam {
    CalParam param = CalParam::Gemm;
    std::string key;         // profile key
    double value = 0;        // fitted (or held) value in the profile's unit
    double start = 0;
    double stderr_ = 0;      // NaN when the fit has no residual degrees of freedom to estimate it
    bool fitted = false;
    bool at_bound = false;   // fitted value sits on its bound (the standard error then means little)
    std::string held_reason; // why not fitted
};

struct Residual {
    std::string run, metric;
    double measured = 0, before = 0, after = 0;  // predictions before / after
    [[nodiscard]] double error_before() const { return (before - measured) / measured; }
    [[nodiscard]] double error_after() const { return (after - measured) / measured; }
};

struct CalibrationFit {
    Calibration calibration;
    std::vector<FittedParam> params;
    std::vector<Residual> residuals;
    std::vector<double> singular_values;  // of the scaled Jacobian of the fitted parameters
    int rank = 0;
    int iterations = 0;
    double rms_log_before = 0, rms_log_after = 0;  // of ln(predicted / measured)
};

struct CalibrateOptions {
    Calibration start;            // fit from here (identity = the defaults)
    // A parameter is held when the runs' predictions move less than this per
    // unit of its (log-)value, or when its column adds no rank (collinear).
    double min_sensitivity = 0.003;
    double max_condition = 1e3;
    int max_iterations = 100;
};

// Bounded Levenberg-Marquardt on ln(predicted / measured) over the identifiable
// parameters (multipliers in log space, bounded to [0.1, 3]; reserve fraction
// [-0.05, 2]; framework [-1, 64] GiB). Errors when there is no observation.
[[nodiscard]] Result<CalibrationFit> calibrate(const std::vector<Observation>& obs, const CalibrateOptions& opt = {});
[[nodiscard]] Result<CalibrationFit> calibrate(const std::vector<MeasuredRun>& runs, const CalibrateOptions& opt = {});

// ---- the profile file ([calibration] multipliers, framework_gib; [calibration.stderr]).
[[nodiscard]] std::string calibration_to_toml(const CalibrationFit& fit, int runs);
[[nodiscard]] Result<Calibration> parse_calibration_toml(std::string_view text, const std::string& filename);

}  // namespace trainplan

namespace trainplan {

struct ValidationCase;

// ---- cross-validation on the project's validation cases: for each source with
// two or more counted cases, calibrate on half of them (alternate cases in id
// order within each kind, time and memory) and predict the other half.
struct CvSource {
    std::string source;
    int train = 0, test = 0;
    std::vector<std::string> fitted;   // "key value" of each parameter fitted on the training half
    double median_before = 0, median_after = 0;  // |error| on the held-back half
};
struct CrossValidation {
    std::vector<CvSource> sources;
    int held_back = 0;
    double median_before = 0, median_after = 0;  // |error| over every held-back case
    double p90_before = 0, p90_after = 0;
    int improved = 0, worsened = 0;              // held-back cases whose |error| fell / rose
};
[[nodiscard]] Result<CrossValidation> calibration_cross_validation(const std::vector<TextSource>& case_files, PresetLookup& lookup);

}  // namespace trainplan
