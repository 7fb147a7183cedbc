// Shared test helpers: presets from the source tree, in-process CLI runs.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"
#include "trainplan/app/presets.hpp"
#include "trainplan/io.hpp"
#include "trainplan/memory.hpp"

namespace tp_test {

inline trainplan::app::FilePresets& presets() {
    static trainplan::app::FilePresets p({TRAINPLAN_SOURCE_DIR});
    return p;
}

inline trainplan::ModelSpec model(const std::string& name) {
    auto m = trainplan::load_model(presets(), name, "model");
    if (!m) throw std::runtime_error(m.error().message());
    return *m;
}

inline trainplan::GpuSpec gpu(const std::string& name) {
    auto g = trainplan::load_gpu(presets(), name, "gpu");
    if (!g) throw std::runtime_error(g.error().message());
    return *g;
}

struct CliResult {
    int code = 0;
    std::string out, err;
};

inline CliResult cli(const std::vector<std::string>& args) {
    std::vector<std::string> full{"trainplan"};
    full.insert(full.end(), args.begin(), args.end());
    std::ostringstream out, err;
    CliResult r;
    r.code = trainplan::cli::run(full, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
}

// `trainplan COMMAND ARGS... --json`: requires an answer (exit 0, or 1 = "does
// not fit", which is an answer too) and returns the parsed output.
inline nlohmann::json cli_json(const std::string& command, std::vector<std::string> args) {
    args.insert(args.begin(), command);
    args.push_back("--json");
    const CliResult r = cli(args);
    INFO(r.err);
    REQUIRE((r.code == 0 || r.code == 1));
    return nlohmann::json::parse(r.out);
}

inline std::string data(const std::string& rel) { return std::string(TRAINPLAN_TEST_DATA) + "/" + rel; }

}  // namespace tp_test
