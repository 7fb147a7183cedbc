// Limits every input text is held to before a parser sees it: a size and a
// nesting depth. toml++ and nlohmann/json recurse per nesting level (a header
// [a.a.a....] 40,000 levels deep overflowed the stack), so the depth is checked
// by a flat scan first. The front ends read at most kMaxInputBytes from a file.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "trainplan/result.hpp"

namespace trainplan {

// No preset, scenario, goal, validation table or config.json comes near these:
// the largest shipped input (tests/data/published-throughput.toml) is 260 kB,
// the deepest nesting 4 levels.
inline constexpr std::size_t kMaxInputBytes = 4u << 20;  // 4 MiB
inline constexpr int kMaxNestingDepth = 64;

enum class InputFormat { Toml, Json };

// nullopt when the text is within the limits; otherwise a diagnostic naming the
// file, the line and column where the limit is crossed, and the limit.
[[nodiscard]] std::optional<Diagnostic> check_input_limits(std::string_view text, const std::string& filename, InputFormat format);

}  // namespace trainplan
