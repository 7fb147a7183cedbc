// Scenario and goal TOML: parse, resolve against the shipped presets, evaluate.
#include <string_view>

#include "fuzz_common.hpp"
#include "trainplan/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    using namespace trainplan;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto goal = parse_goal_toml(text, "goal.toml");
    if (!goal) fuzz::require(!goal.error().diagnostics.empty());
    auto in = parse_scenario_toml(text, "scenario.toml");
    if (!in) {
        fuzz::require(!in.error().diagnostics.empty());
        return 0;
    }
    // Model files named in the scenario are not read while fuzzing.
    if (in->model && in->model->find('/') != std::string::npos) return 0;
    auto s = resolve_scenario(*in, fuzz::presets());
    if (!s) {
        fuzz::require(!s.error().diagnostics.empty());
        return 0;
    }
    if (s->cluster.num_gpus > 4096 || s->setup.seq_len > (1 << 20)) return 0;  // valid, but slow to enumerate per input
    fuzz::evaluate(*s);
    const FitReport fr = check_fit(*s, 3);
    for (const auto& r : fr.remedies) fuzz::require(r.memory.fits());
    return 0;
}
