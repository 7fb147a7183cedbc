// The scenario flags shared by fit / simulate / plan / size / advise: created by
// looping over the schema (core/include/trainplan/schema.hpp), checked by the
// same rule as the same key in a scenario file, merged over --scenario.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainplan/app/presets.hpp"
#include "trainplan/io.hpp"
#include "trainplan/schema.hpp"

namespace trainplan::cli {

using namespace trainplan::app;

struct ScenarioFlags {
    std::string model;
    std::string scenario_file;
    std::string calibration_file;  // --calibration profile.toml (trainplan calibrate -o)
    std::vector<std::string> preset_dirs;
    std::map<std::string, std::string> values;  // schema key -> the flag's text as given
    // Scenario-file tables read elsewhere: a validation case's [measured] (so `simulate
    // --scenario validation/cases/X.toml` runs a case directly); goal files set their own.
    std::vector<std::string> extra_sections{"measured"};

    [[nodiscard]] bool has(const std::string& key) const { return values.count(key) > 0; }
};

void add_scenario_flags(CLI::App& app, ScenarioFlags& f, bool model_required);

// The flags as a ScenarioInput (each value checked by its schema rule; errors
// name the flag, the value and the constraint).
Result<ScenarioInput> flags_to_input(const ScenarioFlags& f);

// Reads --scenario (if any), applies the flags over it, resolves presets.
// `deferred_global_batch`: when non-null, the global batch (file or flag) is not
// checked against the given layout but handed back (the layout search splits it).
Result<Scenario> build_scenario(const ScenarioFlags& f, FilePresets& presets, std::int64_t* deferred_global_batch = nullptr);

// ---- numeric options around a scenario (schema.hpp option_fields: one rule
// for the flag and the goal-file key)
CLI::Option* add_option_field(CLI::App& app, const char* key, std::optional<double>& out, const char* group);
// The value if given, checked by the rule; a violation is added to `errs`.
std::optional<double> checked_option(const char* key, const std::optional<double>& v, std::vector<Diagnostic>& errs);

// `--rent GPU=USD` / `--price GPU=USD` (repeatable): each amount checked by the
// option's rule, each GPU id against the GPU presets (did you mean).
void parse_priced(const std::vector<std::string>& items, const char* key, PresetLookup& presets,
                  std::map<std::string, double>& out, std::vector<Diagnostic>& errs);
// Checks the GPU ids of a priced table (a goal file's [rent] / [price]).
void check_priced_ids(const std::map<std::string, double>& table, const std::string& file, const std::string& section, PresetLookup& presets,
                      std::vector<Diagnostic>& errs);

}  // namespace trainplan::cli
