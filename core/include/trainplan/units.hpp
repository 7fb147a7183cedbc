// Unit constants. Every quantity in core is SI: bytes, seconds, FLOP, bytes/s,
// FLOP/s, watts. Names carry the unit as a suffix (capacity_bytes, step_s).
// Conversions from GiB, GB/s or TFLOP/s happen once, when presets are parsed.
#pragma once

#include <cstdint>

namespace trainplan::units {

inline constexpr double kB = 1e3;
inline constexpr double MB = 1e6;
inline constexpr double GB = 1e9;
inline constexpr double TB = 1e12;
inline constexpr double KiB = 1024.0;
inline constexpr double MiB = 1024.0 * 1024.0;
inline constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double TFLOPS = 1e12;  // FLOP/s
inline constexpr double GBps = 1e9;     // bytes/s
inline constexpr double us = 1e-6;      // seconds

}  // namespace trainplan::units
