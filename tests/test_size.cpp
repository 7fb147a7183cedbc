// Procurement sizing: the report's numbers agree with `simulate` for the chosen
// layouts; reports are written atomically; bad goals are rejected.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kGoal{"size", "llama-3-8b", "--tokens", "1e12", "--deadline-days", "30", "--seq-len", "8192",
                                     "--candidates", "rtx-4090,a100-sxm-40gb,a100-sxm-80gb,h100-sxm", "--rent", "h100-sxm=2.5"};

json size_json() {
    auto args = kGoal;
    args.insert(args.end(), {"--format", "json"});
    const auto r = tp_test::cli(args);
    INFO(r.err);
    REQUIRE((r.code == 0 || r.code == 1));
    return json::parse(r.out);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("size: Llama-3-8B, 1T tokens, 30 days -- every candidate's numbers agree with simulate", "[size]") {
    const json rep = size_json();
    REQUIRE(rep["candidates"].size() == 4);
    int met = 0;
    for (const auto& c : rep["candidates"]) {
        if (!c["meets"].get<bool>()) continue;
        ++met;
        const auto& l = c["layout"];
        const std::vector<std::string> args{
            "simulate", "llama-3-8b", "--gpu", c["gpu"].get<std::string>(), "--gpus", std::to_string(c["gpus"].get<int>()),
            "--seq-len", "8192", "--tp", std::to_string(l["tp"].get<int>()), "--pp", std::to_string(l["pp"].get<int>()),
            "--vp", std::to_string(l["vp"].get<int>()), "--schedule", l["schedule"].get<std::string>(),
            "--micro-batch", std::to_string(l["micro_batch"].get<int>()), "--grad-accum", std::to_string(l["grad_accum"].get<int>()),
            "--zero", std::to_string(l["zero"].get<int>()), "--recompute", l["recompute"].get<std::string>(),
            "--offload-optimizer", l["optimizer_offload"].get<std::string>(), "--tokens", "1e12", "--json"};
        std::vector<std::string> full = args;
        if (l["sequence_parallel"].get<bool>()) full.push_back("--sp");
        // Searched since issue 14: parameter offload, FSDP strategy, TP / parameter-gather overlap.
        full.insert(full.end(), {"--offload-params", l["param_offload"].get<std::string>(), "--fsdp", l["fsdp"].get<std::string>(),
                                 "--tp-comm-overlap", l["tp_comm_overlap"].get<bool>() ? "on" : "off"});
        // The node preset the sizing used for this GPU, if any, gives the links.
        if (c["gpu"] == "rtx-4090") full.insert(full.end(), {"--node", "8x-rtx-4090", "--inter-node", "eth-100g"});
        if (c["gpu"] == "h100-sxm") full.insert(full.end(), {"--node", "dgx-h100"});
        if (c["gpu"] == "a100-sxm-80gb") full.insert(full.end(), {"--node", "dgx-a100-80gb"});
        if (c["gpu"] == "a100-sxm-40gb") full.insert(full.end(), {"--node", "dgx-a100-40gb"});
        const auto r = tp_test::cli(full);
        CAPTURE(c["gpu"].get<std::string>(), r.err);
        REQUIRE(r.code == 0);
        const json sim = json::parse(r.out);
        CHECK(sim["throughput"]["tokens_per_s"].get<double>() == Approx(c["tokens_per_s"].get<double>()).epsilon(1e-9));
        CHECK(sim["cost"]["train_time_s"].get<double>() == Approx(c["train_time_s"].get<double>()).epsilon(1e-9));
        CHECK(sim["cost"]["gpu_hours"].get<double>() == Approx(c["gpu_hours"].get<double>()).epsilon(1e-9));
        CHECK(sim["memory"]["total_bytes"].get<double>() == Approx(c["memory_total_bytes"].get<double>()).epsilon(1e-9));
        // Meets the deadline: 30 days.
        CHECK(c["train_time_s"].get<double>() <= 30 * 86400.0);
    }
    CHECK(met >= 3);
    // H100 has a rent: rent = $2.5 x GPU-hours.
    for (const auto& c : rep["candidates"])
        if (c["gpu"] == "h100-sxm" && c["meets"].get<bool>())
            CHECK(c["rent_cost_usd"].get<double>() == Approx(2.5 * c["gpu_hours"].get<double>()));
    CHECK_FALSE(rep["recommendation"].get<std::string>().empty());
}

TEST_CASE("size writes reports atomically in every format", "[size][files]") {
    const fs::path dir = fs::temp_directory_path() / ("trainplan-size-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const char* ext : {"md", "html", "json", "csv"}) {
        const fs::path out = dir / (std::string("report.") + ext);
        auto args = kGoal;
        args.insert(args.end(), {"-o", out.string()});
        const auto r = tp_test::cli(args);
        CAPTURE(ext, r.err);
        CHECK((r.code == 0 || r.code == 1));
        const std::string text = slurp(out);
        CHECK_FALSE(text.empty());
        if (std::string(ext) == "html") {
            CHECK(text.rfind("<!DOCTYPE html>", 0) == 0);
            CHECK(text.find("<svg") != std::string::npos);
            CHECK(text.find("Time to train") != std::string::npos);
            CHECK(text.find("Where the step time goes") != std::string::npos);
            CHECK(text.find("</html>") != std::string::npos);
        }
        if (std::string(ext) == "json") CHECK_NOTHROW(json::parse(text));
    }
    // Only the four reports: no temporary files left behind.
    int files = 0;
    for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
    CHECK(files == 4);

    // A directory that does not exist: exit 2, a message naming the path, no file.
    auto args = kGoal;
    const std::string bad = (dir / "missing" / "report.html").string();
    args.insert(args.end(), {"-o", bad});
    const auto r = tp_test::cli(args);
    CHECK(r.code == 2);
    CHECK(r.err == "error: cannot write report: " + bad + ": directory " + (dir / "missing").string() + " does not exist\n");
    fs::remove_all(dir);
}

TEST_CASE("size rejects a bad goal with the constraint named", "[size][bad-input]") {
    auto r = tp_test::cli({"size", "llama-3-8b", "--deadline-days", "30"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: size needs --tokens (the token budget to train) or a goal file\n");
    r = tp_test::cli({"size", "llama-3-8b", "--tokens", "1e12", "--rent", "h100-sxm"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --rent = \"h100-sxm\" must be GPU=USD (e.g. h100-sxm=2.5)\n");
    r = tp_test::cli({"size", "llama-3-8b", "--tokens", "1e12", "--candidates", "h100"});
    CHECK(r.code == 2);
    CHECK(r.err.find("unknown GPU preset \"h100\"") != std::string::npos);
}

TEST_CASE("a goal file drives size like the flags", "[size][scenario]") {
    const auto r = tp_test::cli({"size", "--goal", tp_test::data("scenarios/goal-llama3-8b.toml"), "--format", "json"});
    INFO(r.err);
    REQUIRE((r.code == 0 || r.code == 1));
    const json rep = json::parse(r.out);
    CHECK(rep["goal"]["tokens"].get<double>() == 1e12);
    CHECK(rep["goal"]["deadline_s"].get<double>() == 30 * 86400.0);
    CHECK(rep["candidates"].size() == 2);
}
