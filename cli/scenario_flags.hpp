// The scenario flags shared by fit / simulate / plan: one options struct, one
// setup function, one conversion onto core's ScenarioInput.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "trainplan/app/presets.hpp"
#include "trainplan/io.hpp"

namespace trainplan::cli {

using namespace trainplan::app;

struct ScenarioFlags {
    std::string model;
    std::string scenario_file;
    std::string calibration_file;  // --calibration profile.toml (trainplan calibrate -o)
    std::vector<std::string> preset_dirs;
    std::optional<std::string> gpu, node, intra_node, inter_node;
    std::optional<std::int64_t> gpus, gpus_per_node, nics_per_node;
    std::optional<std::string> method, precision, optimizer, framework, fsdp, offload_optimizer, offload_params,
        recompute, flash_attention, attention_kernel, schedule, lora_targets, quant, double_quant, paged_optimizer;
    std::optional<std::int64_t> lora_rank, zero, seq_len, micro_batch, grad_accum, global_batch, tp, pp, dp, ep, vp;
    std::optional<double> lora_alpha, lora_dropout, framework_overhead_gib, fragmentation;
    // Scenario-file tables read elsewhere: a validation case's [measured] (so `simulate
    // --scenario validation/cases/X.toml` runs a case directly); goal files set their own.
    std::vector<std::string> extra_sections{"measured"};
    bool sequence_parallel = false;
    bool tp_comm_overlap = false;
};

void add_scenario_flags(CLI::App& app, ScenarioFlags& f, bool model_required);

// Reads --scenario (if any), applies the flags over it, resolves presets.
// `deferred_global_batch`: when non-null, the global batch (file or flag) is not
// checked against the given layout but handed back (the layout search splits it).
Result<Scenario> build_scenario(const ScenarioFlags& f, FilePresets& presets, std::int64_t* deferred_global_batch = nullptr);

}  // namespace trainplan::cli
