// Candidate hardware the front ends offer (read from the preset files).
#pragma once

#include <string>
#include <vector>

#include "trainplan/advisor.hpp"
#include "trainplan/io.hpp"
#include "trainplan/sizing.hpp"

namespace trainplan::app {

// The cluster a sizing candidate GPU comes in (its 8-GPU node preset if there is
// one, else 8 per node on its own links) and the default candidates: every GPU
// preset with a price (or a rent/price given in the goal).
// `invalid`: where the diagnostics of preset files that exist but do not parse go
// (they are left out of the answer; a front end must report them, not drop them).
Result<ClusterSpec> sizing_candidate_cluster(PresetLookup& presets, const std::string& gpu_id, std::vector<Diagnostic>* invalid = nullptr);
// The same with the node preset's name and power (the bill of materials).
Result<SizingCandidate> sizing_candidate(PresetLookup& presets, const std::string& gpu_id, std::vector<Diagnostic>* invalid = nullptr);
std::vector<std::string> priced_gpu_candidates(PresetLookup& presets, const SizingGoal& goal, std::vector<Diagnostic>* invalid = nullptr);

// Hardware alternatives advise may propose for a scenario (links the GPU can use, other GPUs).
AdviceContext advice_context(PresetLookup& presets, const Scenario& s, std::vector<Diagnostic>* invalid = nullptr);

}  // namespace trainplan::app
