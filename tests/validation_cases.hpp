// The validation case files (validation/cases/*.toml in the source tree) as
// text sources, for tests that run the accuracy table or the published layouts.
#pragma once

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "helpers.hpp"

namespace tp_test {

inline std::vector<std::string> validation_case_paths() {
    std::vector<std::string> paths;
    for (const auto& e : std::filesystem::directory_iterator(std::string(TRAINPLAN_SOURCE_DIR) + "/validation/cases"))
        if (e.path().extension() == ".toml") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    return paths;
}

inline std::vector<trainplan::TextSource> validation_cases() {
    std::vector<trainplan::TextSource> files;
    for (const auto& p : validation_case_paths()) {
        std::string why;
        auto src = presets().read_file(p, why);
        if (!src) throw std::runtime_error(p + ": " + why);
        files.push_back(*src);
    }
    return files;
}

}  // namespace tp_test
