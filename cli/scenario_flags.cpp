#include "scenario_flags.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <set>
#include "trainplan/calibrate.hpp"

namespace trainplan::cli {

void add_scenario_flags(CLI::App& app, ScenarioFlags& f, bool model_required) {
    auto* m = app.add_option("model", f.model,
                             "Model: preset name (trainplan models), size shorthand (7b, 13b, 70b), a model TOML file, "
                             "or a Hugging Face config.json");
    if (model_required) m->required(false);  // may come from --scenario
    app.add_option("--scenario", f.scenario_file, "Scenario TOML file; flags override its values");
    app.add_option("--calibration", f.calibration_file, "Calibration profile from `trainplan calibrate -o` (fitted efficiency factors)");
    app.add_option("--presets", f.preset_dirs, "Extra preset directory (holds models/ and hardware/); repeatable");

    const std::map<std::string, const char*> groups{{"hardware", "Hardware"}, {"training", "Training"}, {"parallel", "Parallel layout"}};
    for (const Field& field : scenario_fields()) {
        std::string names = field.flag;
        if (*field.alias) names = std::string(field.alias) + "," + names;
        std::string help = field.help;
        if (field.rule.type == FieldType::Enum) help += ": " + field.rule.choices->allowed(" | ");
        const std::string key = field.key;
        auto* opt = app.add_option_function<std::string>(names, [&f, key](const std::string& v) { f.values[key] = v; }, help);
        // A bare boolean flag (--sp) means on.
        if (field.rule.type == FieldType::Bool) opt->expected(0, 1);
        switch (field.rule.type) {
            case FieldType::Int: opt->type_name(fmt::format("INT in [{}, {}]", shortest(field.rule.lo), shortest(field.rule.hi))); break;
            case FieldType::Number: opt->type_name(fmt::format("NUM in [{}, {}]", shortest(field.rule.lo), shortest(field.rule.hi))); break;
            case FieldType::Bool: opt->type_name("[on|off]"); break;
            case FieldType::Enum: opt->type_name("NAME"); break;
            case FieldType::LoraTargets: opt->type_name("LIST"); break;
            case FieldType::Text: opt->type_name(field.rule.preset ? "PRESET" : "TEXT"); break;
        }
        opt->group(groups.at(field.section));
    }
}

namespace {

Diagnostic unknown_id(const std::string& flag, const std::string& value, const std::string& id, PresetKind kind, PresetLookup& presets,
                      const std::string& what) {
    std::string msg = flag + " = \"" + value + "\": unknown " + to_string(kind) + " preset \"" + id + "\"" + what;
    const auto near = closest_names(id, presets.names(kind));
    if (!near.empty()) {
        msg += "; did you mean ";
        for (size_t i = 0; i < near.size(); ++i) msg += (i ? ", \"" : "\"") + near[i] + "\"";
        msg += "?";
    }
    return {"", 0, 0, flag, msg};
}

}  // namespace

Result<ScenarioInput> flags_to_input(const ScenarioFlags& f) {
    std::vector<Diagnostic> errs;
    ScenarioInput in;
    if (!f.model.empty()) in.model = f.model;
    for (const Field& field : scenario_fields()) {
        auto it = f.values.find(field.key);
        if (it == f.values.end()) continue;
        std::string text = it->second;
        if (field.rule.type == FieldType::Bool && text.empty()) text = "on";
        auto v = value_from_text(field.rule, text, field.flag);
        if (!v) {
            for (const auto& d : v.error().diagnostics) errs.push_back(d);
            continue;
        }
        field.set(in, *v);
    }
    if (!errs.empty()) return Error(errs);
    return in;
}

Result<Scenario> build_scenario(const ScenarioFlags& f, FilePresets& presets, std::int64_t* deferred_global_batch) {
    ScenarioInput merged;
    if (!f.scenario_file.empty()) {
        std::string text, why;
        if (!read_text_file(f.scenario_file, text, why))
            return Diagnostic{f.scenario_file, 0, 0, "--scenario", "cannot read scenario file: " + why};
        auto parsed = parse_scenario_toml(text, f.scenario_file, f.extra_sections);
        if (!parsed) return parsed.error();
        merged = *parsed;
    }
    auto flags = flags_to_input(f);
    if (!flags) return flags.error();
    // Flags win over the scenario file; a key set by a flag is reported as the flag.
    merged.merge(*flags);
    if (deferred_global_batch) {
        *deferred_global_batch = merged.global_batch.value_or(0);
        merged.global_batch.reset();
        if (*deferred_global_batch > 0) merged.grad_accum.reset();
    }
    auto resolved = resolve_scenario(merged, presets);
    if (resolved) {
        if (f.calibration_file.empty()) return resolved;
        // Calibration hook: the fitted profile rides in the scenario (calibrate.hpp).
        std::string text, why;
        if (!read_text_file(f.calibration_file, text, why))
            return Diagnostic{f.calibration_file, 0, 0, "--calibration", "cannot read calibration profile: " + why};
        auto cal = parse_calibration_toml(text, f.calibration_file);
        if (!cal) return cal.error();
        resolved->calibration = *cal;
        return resolved;
    }
    // Every error says where to change it. What no flag set was left to the
    // scenario file (a missing model or GPU, a default that does not fit the
    // rest): the error names that file; without one, a default is named as such
    // with the flag that sets it.
    Error e = resolved.error();
    for (Diagnostic& d : e.diagnostics) {
        // The diagnostic names a schema key, or (after the resolver located it) its flag.
        const Field* field = nullptr;
        for (const Field& r : scenario_fields())
            if (d.key == r.key || d.key == r.flag) field = &r;
        const std::string key = field ? field->key : d.key;
        if (!d.file.empty() || key.empty() || f.has(key) || (key == "model" && !f.model.empty())) continue;
        if (!f.scenario_file.empty()) {
            d.file = f.scenario_file;
            continue;
        }
        const std::string flag = field ? field->flag : "--" + key;
        if (key != "model" && d.message.find(flag) == std::string::npos) d.message += " (the default; " + flag + " sets it)";
    }
    return e;
}

CLI::Option* add_option_field(CLI::App& app, const char* key, std::optional<double>& out, const char* group) {
    const OptionField& o = option_field(key);
    auto* opt = app.add_option(o.flag, out, o.help);
    opt->type_name(fmt::format("{} in [{}, {}]", o.rule.type == FieldType::Int ? "INT" : "NUM", shortest(o.rule.lo), shortest(o.rule.hi)));
    if (group) opt->group(group);
    return opt;
}

std::optional<double> checked_option(const char* key, const std::optional<double>& v, std::vector<Diagnostic>& errs) {
    if (!v) return std::nullopt;
    const OptionField& o = option_field(key);
    FieldValue value = *v;
    if (o.rule.type == FieldType::Int) {
        if (!(std::isfinite(*v) && std::floor(*v) == *v && std::fabs(*v) < 9e15)) {
            errs.push_back({"", 0, 0, o.flag, std::string(o.flag) + " = " + shortest(*v) + " must be an integer"});
            return std::nullopt;
        }
        value = static_cast<std::int64_t>(*v);
    }
    if (auto msg = check_value(o.rule, value, o.flag)) {
        errs.push_back({"", 0, 0, o.flag, *msg});
        return std::nullopt;
    }
    return v;
}

void parse_priced(const std::vector<std::string>& items, const char* key, PresetLookup& presets, std::map<std::string, double>& out,
                  std::vector<Diagnostic>& errs) {
    const OptionField& o = option_field(key);
    const std::string flag = o.flag;
    const auto ids = presets.names(PresetKind::Gpu);
    for (const auto& item : items) {
        const auto eq = item.find('=');
        if (eq == std::string::npos || eq == 0) {
            errs.push_back({"", 0, 0, flag, fmt::format("{} = \"{}\" must be GPU=USD (e.g. h100-sxm=2.5)", flag, item)});
            continue;
        }
        const std::string id = item.substr(0, eq);
        auto v = value_from_text(o.rule, item.substr(eq + 1), flag + " " + id);
        if (!v) {
            for (const auto& d : v.error().diagnostics) errs.push_back({"", 0, 0, flag, d.message});
            continue;
        }
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
            errs.push_back(unknown_id(flag, item, id, PresetKind::Gpu, presets, ""));
            continue;
        }
        out[id] = std::get<double>(*v);
    }
}

void check_priced_ids(const std::map<std::string, double>& table, const std::string& file, const std::string& section,
                      PresetLookup& presets, std::vector<Diagnostic>& errs) {
    const auto ids = presets.names(PresetKind::Gpu);
    for (const auto& [id, v] : table) {
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
        std::string msg = "[" + section + "] " + id + ": unknown GPU preset \"" + id + "\"";
        const auto near = closest_names(id, ids);
        if (!near.empty()) msg += "; did you mean \"" + near.front() + "\"?";
        errs.push_back({file, 0, 0, section + "." + id, msg});
    }
}

}  // namespace trainplan::cli
