// Inputs the fuzzers found (tests/data/fuzz/<target>/), replayed by the regular
// suite: each must give a value or diagnostics -- no exception, no crash.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.hpp"

using namespace trainplan;
namespace fs = std::filesystem;

namespace {

std::vector<std::pair<std::string, std::string>> fixtures(const std::string& target) {
    std::vector<std::pair<std::string, std::string>> out;
    const fs::path dir = fs::path(tp_test::data("fuzz")) / target;
    if (!fs::is_directory(dir)) return out;
    for (const auto& e : fs::directory_iterator(dir)) {
        std::ifstream in(e.path(), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        out.emplace_back(e.path().filename().string(), ss.str());
    }
    return out;
}

}  // namespace

TEST_CASE("fuzz findings: config.json", "[fuzz]") {
    const auto files = fixtures("hf_config");
    CHECK(files.size() >= 2);
    for (const auto& [name, text] : files) {
        CAPTURE(name);
        Result<ModelSpec> r = ModelSpec{};
        CHECK_NOTHROW(r = parse_hf_config(text, name, name));
        if (!r) CHECK_FALSE(r.error().diagnostics.empty());
    }
    // The number too large for a double is named, not thrown.
    std::string why;
    const auto r = parse_hf_config(R"({"model_type": "llama", "hidden_size": 1e999})", "config.json", "x");
    REQUIRE_FALSE(r);
    CHECK(r.error().message() == "config.json: error: invalid JSON value: number overflow parsing '1e999'");
}

TEST_CASE("fuzz findings: command lines", "[fuzz]") {
    for (const auto& [name, text] : fixtures("cli")) {
        std::vector<std::string> args;
        std::string cur;
        for (char c : text) {
            if (c == '\n') { args.push_back(cur); cur.clear(); }
            else cur += c;
        }
        if (!cur.empty()) args.push_back(cur);
        CAPTURE(name);
        tp_test::CliResult r;
        CHECK_NOTHROW(r = tp_test::cli(args));
        CHECK((r.code == 0 || r.code == 1 || r.code == 2));
    }
}

TEST_CASE("fuzz findings: TOML presets and scenarios", "[fuzz]") {
    for (const auto& [name, text] : fixtures("model_toml")) CHECK_NOTHROW((void)parse_model_toml(text, name, name));
    for (const auto& [name, text] : fixtures("hardware_toml")) {
        CHECK_NOTHROW((void)parse_gpu_toml(text, name, name));
        CHECK_NOTHROW((void)parse_link_toml(text, name, name));
        CHECK_NOTHROW((void)parse_node_toml(text, name, name));
    }
    for (const auto& [name, text] : fixtures("scenario_toml")) {
        CHECK_NOTHROW((void)parse_scenario_toml(text, name));
        CHECK_NOTHROW((void)parse_goal_toml(text, name));
    }
}

TEST_CASE("fuzz findings: nesting past 64 levels is a diagnostic, not a stack overflow", "[fuzz][limits]") {
    // Issue 16 item 1: "[a.a.a...]" 40,000 levels deep crashed toml++; these
    // small seeds sit one level past the limit so the fuzzers start at its edge.
    const std::string expected = "nesting depth 65 exceeds the maximum 64";
    for (const auto& [name, text] : fixtures("scenario_toml")) {
        if (name.rfind("deep-", 0) != 0) continue;
        const auto r = parse_scenario_toml(text, name);
        REQUIRE_FALSE(r);
        CHECK(r.error().message() == name + ":1:129: error: " + expected +
                                         " (tables, dotted keys, arrays and inline tables nested inside each other)");
    }
    for (const auto& [name, text] : fixtures("model_toml")) {
        if (name.rfind("deep-", 0) != 0) continue;
        const auto r = parse_model_toml(text, name, "m");
        REQUIRE_FALSE(r);
        // "x = " then 65 '[': the 65th, at column 4 + 65 = 69, is depth 65.
        CHECK(r.error().message().find(name + ":1:69: error: " + expected) == 0);
    }
    for (const auto& [name, text] : fixtures("hf_config")) {
        if (name.rfind("deep-", 0) != 0) continue;
        const auto r = parse_hf_config(text, name, "m");
        REQUIRE_FALSE(r);
        CHECK(r.error().message().find(name + ":1:321: error: " + expected) == 0);
    }
}
