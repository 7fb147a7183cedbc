// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", Sec. 4-5: per-layer activation bytes for the GPT-3 175B
// shape (h = 12288, a = 96, s = 2048, 16-bit activations, dropout on).
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace trainplan;

namespace {

TrainingSetup eager_setup() {
    TrainingSetup t;
    t.flash_attention = false;  // the paper's attention stores the s x s matrices
    t.precision = Precision::FP16Mixed;
    return t;
}

}  // namespace

TEST_CASE("Korthikanti per-layer activation formulas, GPT-3 175B shape", "[activations]") {
    const ModelSpec m = tp_test::model("gpt3-175b");
    REQUIRE(m.dropout > 0);
    const LayerGraph g = build_layer_graph(m, eager_setup());
    const double s = 2048, b = 1, h = 12288, a = 96;
    const double sbh = s * b * h;
    for (double t : {1.0, 2.0, 8.0}) {
        CAPTURE(t);
        // Eq. 1 / Sec. 4.2.1: no parallelism sbh(34 + 5as/h); TP: sbh(10 + 24/t + 5as/(ht)).
        CHECK(g.stored_none.bytes(s, b, t, false) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))).epsilon(1e-12));
        // Sec. 4.2.2, TP + sequence parallel: sbh(34/t + 5as/(ht)).
        CHECK(g.stored_none.bytes(s, b, t, true) == Approx(sbh * (34 / t + 5 * a * s / (h * t))).epsilon(1e-12));
        // Sec. 5, selective recompute drops the 5as/h term.
        CHECK(g.stored_selective.bytes(s, b, t, false) == Approx(sbh * (10 + 24 / t)).epsilon(1e-12));
        CHECK(g.stored_selective.bytes(s, b, t, true) == Approx(sbh * 34 / t).epsilon(1e-12));
        // Full recompute keeps the 2sbh layer input (split by t with SP).
        CHECK(g.stored_full.bytes(s, b, t, false) == Approx(2 * sbh).epsilon(1e-12));
        CHECK(g.stored_full.bytes(s, b, t, true) == Approx(2 * sbh / t).epsilon(1e-12));
    }
    // Sec. 5: "5as/h = 80 for GPT-3" and selective recompute saves 70 % at t = 8 with SP.
    CHECK(5 * a * s / h == Approx(80));
    const double saving = 1 - g.stored_selective.bytes(s, b, 8, true) / g.stored_none.bytes(s, b, 8, true);
    CHECK(saving == Approx(0.70).margin(0.005));
}

TEST_CASE("FlashAttention stores no s x s matrices", "[activations]") {
    const ModelSpec m = tp_test::model("gpt3-175b");
    TrainingSetup t = eager_setup();
    t.flash_attention = true;
    const LayerGraph g = build_layer_graph(m, t);
    CHECK(g.stored_none.squared == 0);
    // Eager minus flash = the 5as^2b attention matrices, plus flash's fp32 log-sum-exp (4 B x a per token).
    const LayerGraph e = build_layer_graph(m, eager_setup());
    const double s = 2048, a = 96;
    CHECK(e.stored_none.bytes(s, 1, 1, false) - g.stored_none.bytes(s, 1, 1, false) == Approx(5 * a * s * s - 4 * a * s));
}

TEST_CASE("first pipeline stage holds p micro-batches of its layers (1F1B) and the interleaving factor", "[activations][pipeline]") {
    Scenario sc;
    sc.model = tp_test::model("gpt3-175b");
    sc.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    sc.setup = eager_setup();
    sc.setup.recompute = Recompute::Selective;
    const int t = 8, p = 8;
    sc.setup.layout = {t, p, 1, 1, 1, true, Schedule::OneF1B};
    sc.cluster.num_gpus = t * p;
    sc.cluster.gpus_per_node = 8;
    sc.setup.grad_accum = 64;
    REQUIRE(validate(sc).empty());
    const double s = 2048, h = 12288, L = 96;
    const double sbh = s * h;
    const MemoryEstimate est = estimate_memory(sc, true);
    // Korthikanti Eq. 6 (p > 1): first stage = L layers' worth (34 sbh / t each)
    // plus the embedding dropout masks of p micro-batches (p sbh / t).
    CHECK(est.stages[0].microbatches_in_flight == p);
    CHECK(est.stages[0].mem.activations == Approx(sbh / t * (34 * L + p)).epsilon(1e-12));
    // Stage i holds p - i micro-batches under 1F1B.
    CHECK(est.stages[3].microbatches_in_flight == p - 3);

    sc.setup.layout.schedule = Schedule::Interleaved;
    sc.setup.layout.vp = 2;
    REQUIRE(validate(sc).empty());
    const MemoryEstimate inter = estimate_memory(sc, true);
    const double v = 2;
    // Interleaving multiplies the first stage's activations by 1 + (p - 1)/(p v).
    CHECK(inter.stages[0].microbatches_in_flight == Approx(p * (1 + (p - 1) / (p * v))));
}

TEST_CASE("activations grow with micro-batch and sequence; recompute never increases them", "[activations]") {
    Scenario sc;
    sc.model = tp_test::model("llama-2-7b");
    sc.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    auto act = [&](std::int64_t mb, std::int64_t seq, Recompute r) {
        Scenario x = sc;
        x.setup.micro_batch = mb;
        x.setup.seq_len = seq;
        x.setup.recompute = r;
        return estimate_memory(x).peak().activations;
    };
    CHECK(act(2, 2048, Recompute::None) == Approx(2 * act(1, 2048, Recompute::None)));
    CHECK(act(1, 4096, Recompute::None) > act(1, 2048, Recompute::None));
    CHECK(act(1, 2048, Recompute::Selective) <= act(1, 2048, Recompute::None));
    CHECK(act(1, 2048, Recompute::Full) < act(1, 2048, Recompute::Selective));
    // Full recompute: 2sbh per layer, plus the final norm's input (the default
    // generic-eager stack's RMSNorm keeps an fp32 copy: 4sbh) and the LM head's (2sbh).
    CHECK(act(1, 2048, Recompute::Full) == Approx(2.0 * 2048 * 4096 * (32 + 1) + 4.0 * 2048 * 4096));
}
