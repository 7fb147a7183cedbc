// The scenario schema: one row per scenario field (section, TOML key, CLI flag,
// type, range or allowed values, help, and how to get/set it on ScenarioInput and
// Scenario). Scenario TOML read and write, merge, the CLI flags, JSON, the copied
// command line and the GUI editor form are all generated from it; the range in a
// row is the only place that range is written. Adding a field is one row in
// schema.cpp (plus its use in the model).
//
// A sibling table holds the numeric options around a scenario (token budget,
// prices, deadline, observations) so flags and goal-file keys share one rule.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "trainplan/enums.hpp"
#include "trainplan/io.hpp"

namespace trainplan {

enum class FieldType {
    Int,          // std::int64_t
    Number,       // double, finite
    Bool,         // bool; "on"/"off" on the command line
    Enum,         // std::int64_t enumerator of `choices`
    Text,         // std::string (a preset name when `preset` is set)
    LoraTargets,  // std::int64_t bit mask, written "q,v" / "all"
};

// Int, Enum and LoraTargets hold std::int64_t; Number double; Bool bool; Text string.
using FieldValue = std::variant<std::int64_t, double, bool, std::string>;

// What a value must satisfy: its type and, for numbers, the inclusive range.
struct FieldRule {
    FieldType type = FieldType::Number;
    double lo = 0, hi = 0;
    const EnumTable* choices = nullptr;      // Enum
    std::optional<PresetKind> preset;        // Text naming a preset
};

// Checks a value against the rule; the message names `name` (key or flag), the
// value and the constraint ("--zero = 4 exceeds the maximum 3"). nullopt: valid.
[[nodiscard]] std::optional<std::string> check_value(const FieldRule& rule, const FieldValue& v, const std::string& name);
// Parses command-line text by the rule and checks it.
[[nodiscard]] Result<FieldValue> value_from_text(const FieldRule& rule, std::string_view text, const std::string& name);
// The value as command-line text ("on"/"off", enum names, shortest round-trip numbers).
[[nodiscard]] std::string value_to_text(const FieldRule& rule, const FieldValue& v);
// Shortest decimal text that reads back to exactly `v`.
[[nodiscard]] std::string shortest(double v);

struct Field {
    const char* section;  // TOML table: "hardware", "training", "parallel"
    const char* key;      // TOML key, JSON name, GUI object name stem
    const char* flag;     // CLI long flag ("--offload-optimizer")
    const char* alias;    // another spelling of the flag ("--sp") or ""
    const char* label;    // GUI label
    FieldRule rule;
    const char* help;
    // Written by the TOML writer and the copied command line. False for inputs
    // that expand into saved fields (a node preset into gpu, links, NICs; the
    // global batch into grad_accum).
    bool saved = true;
    // Its default depends on other fields (QLoRA changes precision and recompute),
    // so the copied command line always states it.
    bool contextual_default = false;
    // Shown in the GUI editor form (false for values the form derives: dp from
    // the GPU count, the accumulation from the global batch).
    bool in_form = true;

    std::optional<FieldValue> (*get)(const ScenarioInput&) = nullptr;
    void (*set)(ScenarioInput&, const FieldValue&) = nullptr;
    void (*clear)(ScenarioInput&) = nullptr;
    // The value in a resolved scenario; nullopt when the field does not apply.
    std::optional<FieldValue> (*read)(const Scenario&) = nullptr;
    // Puts the value on a scenario; nullptr when resolve_scenario applies it
    // itself (presets, derived sizes).
    void (*apply)(Scenario&, const FieldValue&) = nullptr;
};

[[nodiscard]] std::span<const Field> scenario_fields();
[[nodiscard]] const Field* field_by_key(std::string_view key);
[[nodiscard]] const Field* field_by_flag(std::string_view flag);  // "--sp" or "--sequence-parallel"
[[nodiscard]] std::vector<std::string> scenario_sections();       // in table order

// Numeric options around a scenario: flags of simulate / plan / size / advise
// and the matching goal-file keys.
struct OptionField {
    const char* key;   // goal-file key ([goal]) or the option's name
    const char* flag;  // "--deadline-days"
    FieldRule rule;
    const char* help;
};
[[nodiscard]] std::span<const OptionField> option_fields();
[[nodiscard]] const OptionField& option_field(std::string_view key);  // asserts it exists

}  // namespace trainplan
