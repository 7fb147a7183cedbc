// What the package ships (presets, the hub id map, validation data) must be
// readable on a user's machine: no path of a development machine, and every
// numbered citation next to a figure points into that file's `source` list.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> shipped_files() {
    const fs::path root = TRAINPLAN_SOURCE_DIR;
    std::vector<fs::path> out{root / "tests/data/published-memory.toml", root / "tests/data/published-throughput.toml"};
    for (const char* dir : {"models", "hardware", "data"})
        for (const auto& e : fs::recursive_directory_iterator(root / dir))
            if (e.is_regular_file()) out.push_back(e.path());
    return out;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("shipped data names no path of a development machine", "[presets][package]") {
    const auto files = shipped_files();
    REQUIRE(files.size() > 100);
    for (const auto& f : files) {
        const std::string text = slurp(f);
        CAPTURE(f.string());
        for (const char* bad : {"/work/", "/home/", "/root/", "shared/docs", "shared/data", "shared/validation"})
            CHECK(text.find(bad) == std::string::npos);
    }
}

TEST_CASE("hardware figures cite numbers that exist in their source list", "[presets][package]") {
    const std::regex cite(R"(source ((?:\[\d+\],?)+))"), num(R"(\[(\d+)\])"), listed(R"(\| \[(\d+)\] |"\[(\d+)\] )");
    int figures = 0;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(TRAINPLAN_SOURCE_DIR) / "hardware")) {
        if (e.path().extension() != ".toml") continue;
        const std::string text = slurp(e.path());
        CAPTURE(e.path().string());
        // The numbered entries of `source = "[1] ... | [2] ..."`, in order from 1.
        std::istringstream lines(text);
        std::string line, source;
        while (std::getline(lines, line))
            if (line.rfind("source = ", 0) == 0) source = line;
        REQUIRE_FALSE(source.empty());
        int count = 0;
        for (auto it = std::sregex_iterator(source.begin(), source.end(), listed); it != std::sregex_iterator(); ++it) {
            const int n = std::stoi((*it)[1].matched ? (*it)[1].str() : (*it)[2].str());
            CHECK(n == count + 1);
            count = n;
        }
        std::istringstream again(text);
        while (std::getline(again, line)) {
            if (line.rfind("source = ", 0) == 0) continue;
            for (auto c = std::sregex_iterator(line.begin(), line.end(), cite); c != std::sregex_iterator(); ++c) {
                const std::string refs = (*c)[1];
                for (auto n = std::sregex_iterator(refs.begin(), refs.end(), num); n != std::sregex_iterator(); ++n) {
                    CAPTURE(line);
                    const int k = std::stoi((*n)[1]);
                    CHECK(k >= 1);
                    CHECK(k <= count);
                    ++figures;
                }
            }
        }
    }
    CHECK(figures > 400);
}
