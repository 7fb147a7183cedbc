// Layout search: published large-scale runs are found (or beaten) and ranked
// high; inverse queries agree with fit; determinism across thread counts.
#include <catch2/catch.hpp>

#include <set>

#include "helpers.hpp"
#include "trainplan/search.hpp"
#include "validation_cases.hpp"
#include "trainplan/validation.hpp"

using namespace trainplan;

namespace {

std::vector<PublishedRun> runs() {
    auto r = published_runs(tp_test::validation_cases(), tp_test::presets());
    REQUIRE(r);
    return *r;
}

bool wanted(const std::string& id) {
    return id.rfind("megatron2021_t1_", 0) == 0 || id == "bloom176b_main_iter85376" ||
           (id.rfind("korthikanti_", 0) == 0 && id.find("_layer_") == std::string::npos);
}

}  // namespace

TEST_CASE("plan finds the published layouts of large-scale runs, or better, in its top 10", "[search]") {
    int checked = 0;
    for (const PublishedRun& run : runs()) {
        if (!wanted(run.id)) continue;
        const Scenario& pub = run.scenario;
        const double published = estimate_time(pub).throughput.tokens_per_s;
        const PlanResult r = plan_layouts(pub, SearchSpace{}, 10, RankBy::Throughput, 2, pub.setup.global_batch());
        REQUIRE_FALSE(r.top.empty());
        bool listed = false;
        for (const auto& c : r.top) {
            const ParallelLayout& l = c.scenario.setup.layout;
            listed |= l.tp == pub.setup.layout.tp && l.pp == pub.setup.layout.pp && l.dp == pub.setup.layout.dp;
        }
        CAPTURE(run.id, pub.setup.layout.tp, pub.setup.layout.pp, pub.setup.layout.dp, published,
                r.top.front().time.throughput.tokens_per_s);
        CHECK(r.top.front().time.throughput.tokens_per_s >= published * (1 - 1e-12));
        CHECK(listed);
        ++checked;
    }
    CHECK(checked >= 19);  // 10 Table 1 rows, 9 Korthikanti runs, BLOOM
}

TEST_CASE("the search is deterministic whatever the thread count", "[search]") {
    Scenario s;
    s.model = tp_test::model("llama-2-70b");
    s.cluster.gpu = tp_test::gpu("h100-sxm");
    s.cluster.num_gpus = 64;
    s.cluster.gpus_per_node = 8;
    auto a = plan_layouts(s, SearchSpace{}, 10, RankBy::Throughput, 1, 256);
    auto b = plan_layouts(s, SearchSpace{}, 10, RankBy::Throughput, 2, 256);
    auto c = plan_layouts(s, SearchSpace{}, 10, RankBy::Throughput, 7, 256);
    REQUIRE(a.top.size() == b.top.size());
    REQUIRE(a.top.size() == c.top.size());
    CHECK(a.evaluated == c.evaluated);
    CHECK(a.feasible == c.feasible);
    for (size_t i = 0; i < a.top.size(); ++i) {
        CHECK(a.top[i].time.throughput.tokens_per_s == b.top[i].time.throughput.tokens_per_s);
        CHECK(a.top[i].scenario.setup.layout.tp == c.top[i].scenario.setup.layout.tp);
        CHECK(a.top[i].scenario.setup.micro_batch == c.top[i].scenario.setup.micro_batch);
    }
    // Every listed layout is valid, fits, and uses the global batch asked for.
    for (const auto& x : a.top) {
        CHECK(validate(x.scenario).empty());
        CHECK(x.memory.fits());
        CHECK(x.scenario.setup.global_batch() == 256);
    }
}

TEST_CASE("inverse queries: largest micro-batch and sequence, fewest GPUs", "[search]") {
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.setup.method = Method::LoRA;
    const std::int64_t mb = max_micro_batch(s);
    REQUIRE(mb >= 1);
    s.setup.micro_batch = mb;
    CHECK(estimate_memory(s).peak().fits());
    s.setup.micro_batch = mb + 1;
    CHECK_FALSE(estimate_memory(s).peak().fits());
    s.setup.micro_batch = 1;
    const std::int64_t seq = max_seq_len(s);
    s.setup.seq_len = seq;
    CHECK(estimate_memory(s).peak().fits());
    s.setup.seq_len = seq + 1;
    CHECK_FALSE(estimate_memory(s).peak().fits());

    // Full fine-tune of Llama-2-13B on 80 GB cards: 16 B/param x 13.0 B = 208 GB of
    // model states, so at least 3 cards even sharded; powers of two below a node.
    Scenario f;
    f.model = tp_test::model("llama-2-13b");
    f.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    f.cluster.gpus_per_node = 8;
    SearchSpace no_offload;
    no_offload.vary_offload = false;
    PlanCandidate best;
    const int n = min_gpus(f, no_offload, 0, 1024, &best, 2, 64);
    CHECK(n == 4);  // ZeRO-3: 208 GB / 4 = 52 GB per card (+ activations); / 2 = 104 GB does not fit
    CHECK(best.memory.fits());
    // With ZeRO-Offload the optimizer states and gradients leave the GPU: 2 B/param
    // of weights sharded over 2 cards (13 GB each) fits.
    CHECK(min_gpus(f, SearchSpace{}, 0, 1024, &best, 2, 64) == 2);
    CHECK(best.scenario.setup.optimizer_offload == Offload::CPU);
}
