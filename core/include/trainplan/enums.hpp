// One table per enum: canonical name, accepted aliases and a help line. Parsing,
// printing (to_string), the allowed-values list in error messages, CLI help and
// the GUI's combo items all come from these tables; no other spelling exists.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainplan/model.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

struct EnumEntry {
    int value;            // the enumerator, as int
    const char* name;     // canonical spelling (written to files, printed)
    const char* aliases;  // other accepted spellings, comma-separated ("" for none)
    const char* help;
};

struct EnumTable {
    const char* what;  // "precision", used in messages
    std::span<const EnumEntry> entries;

    // Case-insensitive; '_' and '-' are the same. Accepts names and aliases.
    [[nodiscard]] std::optional<int> parse(std::string_view s) const;
    [[nodiscard]] const char* name(int value) const;  // "?" if not an enumerator
    // "none, selective, full" (canonical names in table order).
    [[nodiscard]] std::string allowed(const char* sep = ", ") const;
    [[nodiscard]] std::vector<std::string> names() const;
};

template <class E>
const EnumTable& enum_table();  // specialised for every enum below (enums.cpp)

template <>
const EnumTable& enum_table<Method>();
template <>
const EnumTable& enum_table<Precision>();
template <>
const EnumTable& enum_table<OptimizerKind>();
template <>
const EnumTable& enum_table<Recompute>();
template <>
const EnumTable& enum_table<RecomputeMethod>();
template <>
const EnumTable& enum_table<Offload>();
template <>
const EnumTable& enum_table<Schedule>();
template <>
const EnumTable& enum_table<QuantType>();
template <>
const EnumTable& enum_table<FsdpStrategy>();
template <>
const EnumTable& enum_table<Framework>();
template <>
const EnumTable& enum_table<Stack>();
template <>
const EnumTable& enum_table<AttentionKernel>();
template <>
const EnumTable& enum_table<HeldOutputs>();
template <>
const EnumTable& enum_table<NcclRelease>();
template <>
const EnumTable& enum_table<Activation>();
template <>
const EnumTable& enum_table<NormKind>();
template <>
const EnumTable& enum_table<PositionKind>();
template <>
const EnumTable& enum_table<LinkKind>();

template <class E>
[[nodiscard]] std::optional<E> parse_enum(std::string_view s) {
    if (auto v = enum_table<E>().parse(s)) return static_cast<E>(*v);
    return std::nullopt;
}

// LoRA target modules: a set, written "q,v" or a group ("all", "attention", "mlp").
// The module and group names are one table too (enums.cpp).
[[nodiscard]] std::optional<unsigned> parse_lora_targets(std::string_view s);
[[nodiscard]] std::string lora_targets_to_string(unsigned mask);  // "all", "attention", "q,v"
[[nodiscard]] const char* lora_targets_allowed();  // "q, k, v, o, gate, up, down (or all, attention, mlp)"

}  // namespace trainplan
