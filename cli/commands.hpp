// Subcommands: each has an options struct, a setup_* that registers its flags
// and a run_* that maps them onto core calls and prints.
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>

#include "scenario_flags.hpp"
#include "trainplan/app/candidates.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/advisor.hpp"
#include "trainplan/sizing.hpp"

namespace trainplan::cli {

// The front-end library (presets, formatting, reports, candidates) is used unqualified here.
using namespace trainplan::app;

struct FitOptions {
    ScenarioFlags scenario;
    bool json = false;
    bool all_stages = false;
    int max_remedies = 6;
};
void setup_fit(CLI::App& app, FitOptions& o);
int run_fit(const FitOptions& o, std::ostream& out, std::ostream& err);

struct ListOptions {
    std::vector<std::string> preset_dirs;
    bool json = false;
};
void setup_list(CLI::App& app, ListOptions& o);
int run_models(const ListOptions& o, std::ostream& out, std::ostream& err);
int run_gpus(const ListOptions& o, std::ostream& out, std::ostream& err);
int run_links(const ListOptions& o, std::ostream& out, std::ostream& err);
int run_nodes(const ListOptions& o, std::ostream& out, std::ostream& err);

struct SimulateOptions {
    ScenarioFlags scenario;
    std::optional<double> tokens, amortize_years, electricity, pue, worker_samples, storage_gb_s, sustained_clock, loader_workers;
    std::vector<std::string> rent, price;  // GPU=USD, or a bare USD for the scenario's GPU
    bool json = false, csv = false;
};
void setup_simulate(CLI::App& app, SimulateOptions& o);
int run_simulate(const SimulateOptions& o, std::ostream& out, std::ostream& err);
Result<Scenario> simulate_scenario(const SimulateOptions& o, FilePresets& presets, std::int64_t* deferred_global_batch = nullptr,
                                   bool require_worker_rate = true);

struct PlanOptions {
    SimulateOptions sim;
    int top = 10;
    std::string rank = "throughput";
    unsigned threads = 0;
    bool fixed_layout = false, tp_across_nodes = false, tp_within_node = false;
    bool pareto = false, exhaustive = false;
    std::optional<double> min_headroom_gb;
    bool q_max_mb = false, q_max_seq = false, q_min_gpus = false;
    std::optional<double> target_tps, max_gpus;
    bool json = false, csv = false;
};
void setup_plan(CLI::App& app, PlanOptions& o);
int run_plan(const PlanOptions& o, std::ostream& out, std::ostream& err);

struct SizeOptions {
    ScenarioFlags scenario;
    std::string goal_file, output, format;
    std::optional<double> tokens, deadline_days, budget, electricity, pue, amortize, max_gpus, confidence;
    std::string cost_basis;
    std::vector<std::string> candidates, rent, price;
    unsigned threads = 0;
};
void setup_size(CLI::App& app, SizeOptions& o);
int run_size(const SizeOptions& o, std::ostream& out, std::ostream& err);

struct AdviseOptions {
    SimulateOptions sim;
    std::optional<double> step_s, tokens_per_s, util, peak_gb, temp, clock;
    bool swings = false, oom = false;
    std::string storage;
    int max_remedies = 8;
};
void setup_advise(CLI::App& app, AdviseOptions& o);
int run_advise(const AdviseOptions& o, std::ostream& out, std::ostream& err);

struct ValidateOptions {
    std::vector<std::string> preset_dirs;
    std::vector<std::string> case_files;
    bool json = false;
    bool all = false;
    bool calibration_cv = false;  // --calibration-cv
    std::string write_residuals;  // --write-residuals FILE
    std::string unusable;         // --unusable FILE (default: the packaged validation/unusable.toml)
};
void setup_validate(CLI::App& app, ValidateOptions& o);
int run_validate(const ValidateOptions& o, std::ostream& out, std::ostream& err);

// The presets a command reads; a user preset shadowing a shipped one, or a
// preset file that cannot be read, is noted on `err` once.
inline FilePresets command_presets(const std::vector<std::string>& dirs, std::ostream& err) {
    return FilePresets(dirs, [&err](const std::string& note) { err << note << '\n'; });
}
// `calibrate` (cmd_calibrate.cpp); named apart from core's
// trainplan::CalibrateOptions (the fit's options) stays unambiguous.
struct CalibrateCommandOptions {
    ScenarioFlags scenario;  // the scenario of logs given without a run file
    std::vector<std::string> runs, logs;
    std::string log_format = "auto", output;
    bool json = false;
};
void setup_calibrate(CLI::App& app, CalibrateCommandOptions& o);
int run_calibrate(const CalibrateCommandOptions& o, std::ostream& out, std::ostream& err);

// The shipped residual table (validation/residuals.tsv under the preset roots) behind the
// P10-P90 bands; nullopt when none is found or it does not parse.
std::optional<IntervalTable> packaged_residuals(FilePresets& presets);

// Prints diagnostics and returns exit code 2.
int report_error(const Error& e, std::ostream& err);

}  // namespace trainplan::cli
