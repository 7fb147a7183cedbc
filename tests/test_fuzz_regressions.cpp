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
