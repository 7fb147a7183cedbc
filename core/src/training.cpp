#include "trainplan/training.hpp"

#include <string>

namespace trainplan {

std::string recompute_words(const TrainingSetup& t) {
    if (t.recompute == Recompute::None) return "no recompute";
    if (t.recompute != Recompute::Full || t.recompute_layers <= 0) return std::string(to_string(t.recompute)) + " recompute";
    const std::string k = std::to_string(t.recompute_layers);
    switch (t.recompute_method) {
        case RecomputeMethod::Block: return "full recompute of the first " + k + " layer(s) per stage";
        case RecomputeMethod::Every: return "full recompute of one layer in every " + k;
        case RecomputeMethod::Uniform: break;
    }
    return "full recompute, " + k + "-layer checkpoints";
}

// The enums' to_string live with their tables in enums.cpp.

// validate() lives with the rule table in rules.cpp.

}  // namespace trainplan
