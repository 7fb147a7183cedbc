// Human and JSON rendering shared by the commands (formatting lives with the
// front ends, not in core).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "trainplan/fit.hpp"
#include "trainplan/memory.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/time.hpp"

namespace trainplan::app {

// User text made safe for a terminal: control characters (C0, DEL, the C1 range
// U+0080-U+009F) and bytes that are not UTF-8 become visible escapes ("\n",
// "\t", "\x1b", "\u009b", "\xff"). With keep_lines, newline and tab pass
// through (whole documents); otherwise one line of text stays one line.
std::string printable(std::string_view text, bool keep_lines = false);

// "13.48 GB" (decimal; the unit users compare with vendor figures).
std::string gb(double bytes);
std::string count(std::int64_t n);  // "6.74 B", "124 M"

// What the peak holds that is given back before an out-of-memory (MemoryBreakdown::
// firm), as "1.20 GB of layers gathered ahead and ..."; empty
// when nothing: the headroom counts it as free, and fit and the GUI say so.
std::string given_back_text(const MemoryBreakdown& m);
// What "needs" means wherever memory is shown as MemoryBreakdown::firm (fit's
// remedies, plan's tables, the GUI's plan table): the words after "needs = ".
inline constexpr std::string_view kNeedsMeaning =
    "memory per GPU without the allocator's cached blocks and layers gathered ahead (they give way before an out-of-memory)";
// How the run's caching allocator maps memory: "expandable segments" or "default segments".
std::string allocator_segments(const TrainingSetup& t);

// One line describing the scenario's setup.
std::string describe_setup(const Scenario& s);
// "tp8 pp2 dp64 v12 sp cp2 ovl act>host": the layout and the searched settings
// that change the step but have no column of their own (plan's table, the GUI's).
std::string layout_text(const Scenario& s);
// The data-parallel sharding as the run's engine names it: "DDP", "ZeRO-2" (DeepSpeed),
// "dist-opt" (Megatron's distributed optimizer), "FSDP full" / "FSDP grad-op" (FSDP1),
// "FSDP2 full" / "FSDP2 grad-op" (torchtitan's, torchtune's); "-" for one rank without
// ZeRO. (Hybrid sharding is the layout's "hsdp".)
std::string sharding_text(const TrainingSetup& t);
std::string describe_hardware(const Scenario& s);
// "params: 6.74 B total, 6.74 B trainable" (MoE: active per token; an image encoder:
// its share, idle on text batches); `trainable` as the memory estimate counts it.
std::string describe_params(const Scenario& s, std::int64_t trainable);

nlohmann::json memory_json(const MemoryBreakdown& m);
nlohmann::json scenario_json(const Scenario& s);

// The P10-P90 band beside each figure of `j` (issue 13), one writer for every
// command: time.step_s, throughput.tokens_per_s and .mfu (rates take their P10
// from the step's P90), and cost.train_time_s / .rent_cost_usd where `j` has a
// cost block; intervals.time names the regime. Nothing for an empty band.
void add_time_band(nlohmann::json& j, const TimeEstimate& t, const RatioBand& band);
// memory.total_bytes_p10 / _p90 and intervals.memory.
void add_memory_band(nlohmann::json& j, double total_bytes, const RatioBand& band);

// The `trainplan fit` command line that reproduces a scenario.
std::string command_line(const Scenario& s, const std::string& model_ref, const std::string& command = "fit");

}  // namespace trainplan::app
