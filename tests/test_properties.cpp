// Invariants over randomly generated valid scenarios (fixed seed: the same
// scenarios every run), and extreme but valid inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "helpers.hpp"
#include "trainplan/fit.hpp"
#include "trainplan/search.hpp"
#include "trainplan/time.hpp"

using namespace trainplan;

namespace {

const std::vector<std::string> kModels{"gpt2", "llama-3.2-1b", "llama-2-7b", "mistral-7b", "qwen2.5-7b", "llama-2-13b",
                                       "mixtral-8x7b", "llama-3-70b", "gpt3-175b", "phi-3-mini", "gemma-2-9b", "falcon-40b"};
const std::vector<std::string> kGpus{"rtx-4090", "a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "rtx-a6000", "mi300x"};

// A random valid scenario: powers of two for GPUs and parallel sizes that divide
// the model, a global batch that splits evenly.
Scenario random_scenario(std::mt19937& rng) {
    auto pick = [&](const auto& v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
    auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; };
    for (;;) {
        Scenario s;
        s.model = tp_test::model(pick(kModels));
        s.cluster.gpu = tp_test::gpu(pick(kGpus));
        const int gpus = 1 << std::uniform_int_distribution<int>(0, 6)(rng);
        s.cluster.num_gpus = gpus;
        s.cluster.gpus_per_node = std::min(gpus, 8);
        s.cluster.intra_node = *load_link(tp_test::presets(), "nvlink3", "l");
        s.cluster.inter_node = *load_link(tp_test::presets(), "ib-hdr", "l");
        TrainingSetup& t = s.setup;
        t.layout.tp = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
        t.layout.pp = 1 << std::uniform_int_distribution<int>(0, 2)(rng);
        if (gpus % (t.layout.tp * t.layout.pp)) continue;
        t.layout.dp = gpus / (t.layout.tp * t.layout.pp);
        t.layout.sequence_parallel = t.layout.tp > 1 && coin();
        t.method = pick(std::vector<Method>{Method::Full, Method::Full, Method::LoRA, Method::QLoRA});
        t.precision = t.method == Method::QLoRA ? Precision::BF16 : pick(std::vector<Precision>{Precision::BF16Mixed, Precision::FP16Mixed, Precision::BF16, Precision::FP32});
        t.optimizer = pick(std::vector<OptimizerKind>{OptimizerKind::AdamW, OptimizerKind::AdamW8bit, OptimizerKind::SGDMomentum, OptimizerKind::Lion});
        t.recompute = pick(std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full});
        t.flash_attention = coin();
        t.seq_len = 256 << std::uniform_int_distribution<int>(0, 5)(rng);
        t.micro_batch = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
        t.grad_accum = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
        t.zero_stage = t.layout.pp > 1 ? std::uniform_int_distribution<int>(0, 1)(rng) : std::uniform_int_distribution<int>(0, 3)(rng);
        if (s.model.position == PositionKind::Learned) t.seq_len = std::min(t.seq_len, s.model.max_seq_len);
        if (validate(s).empty()) return s;
    }
}

bool finite(const MemoryBreakdown& m) {
    for (double v : {m.weights, m.gradients, m.optimizer, m.activations, m.logits, m.temporary, m.framework, m.fragmentation, m.total, m.cpu})
        if (!std::isfinite(v) || v < 0) return false;
    return true;
}

bool finite(const TimeEstimate& e) {
    const TimeBreakdown& t = e.time;
    for (double v : {t.step_s, t.compute_s, t.communication_s, t.bubble_s, t.optimizer_s, t.offload_s, t.data_s, e.throughput.tokens_per_s,
                     e.throughput.mfu, e.throughput.hfu, e.cost.power_w})
        if (!std::isfinite(v) || v < 0) return false;
    return t.step_s > 0;
}

}  // namespace

TEST_CASE("invariants over 400 random valid scenarios", "[properties]") {
    std::mt19937 rng(20261129);
    for (int i = 0; i < 400; ++i) {
        const Scenario s = random_scenario(rng);
        CAPTURE(i, s.model.id, s.cluster.gpu.id, s.cluster.num_gpus, s.setup.layout.tp, s.setup.layout.pp, s.setup.layout.dp,
                to_string(s.setup.method), to_string(s.setup.precision), to_string(s.setup.recompute), s.setup.zero_stage,
                s.setup.seq_len, s.setup.micro_batch);
        const MemoryBreakdown m = estimate_memory(s).peak();
        const TimeEstimate te = estimate_time(s);
        REQUIRE(finite(m));
        REQUIRE(finite(te));
        // Twice the gradient accumulation amortises the once-per-step costs (optimizer
        // step, gradient reduction, pipeline fill) over twice the tokens: throughput
        // never drops, and the per-micro-batch compute is the same work.
        {
            Scenario x = s;
            x.setup.grad_accum *= 2;
            const TimeEstimate tx = estimate_time(x);
            CHECK(tx.throughput.tokens_per_s >= te.throughput.tokens_per_s * (1 - 1e-9));
            CHECK(tx.time.compute_s == Approx(2 * te.time.compute_s).epsilon(1e-9));
        }
        // Higher ZeRO stages never need more memory per GPU (same everything else).
        if (s.setup.layout.pp == 1 && s.setup.layout.dp > 1) {
            double prev = 1e300;
            for (int z = 0; z <= 3; ++z) {
                Scenario x = s;
                x.setup.zero_stage = z;
                // DeepSpeed's ZeRO-1/2 gradient bucket is not sharding, and on a
                // LoRA run it can outweigh what ZeRO-1 saves (5e8 elements by
                // default): shrunk to one element here, tested on its own in test_stacks.
                x.setup.ds_reduce_bucket = 1;
                // ZeRO-3's all-gathers on a stream of their own (overlap_comm,
                // DeepSpeed's stage-3 default) let the host gather layers ahead of
                // the compute, which can outweigh what sharding saves: off here,
                // tested on its own in test_stacks.
                x.setup.ds_overlap_comm = false;
                // Nor does it keep what the trace reuses soon or prefetch by the bucket:
                // DeepSpeed's default stage3_max_reuse_distance (1e9 elements) keeps a
                // small model's every layer gathered at the turn to backward, and its
                // stage3_prefetch_bucket_size (5e7) is more than GPT-2's whole layers.
                x.setup.ds_max_reuse_distance = 0;
                x.setup.ds_prefetch_bucket = 0;
                const double mem = estimate_memory(x).peak().total;
                CHECK(mem <= prev * (1 + 1e-12));
                prev = mem;
            }
        }
        // Recompute never increases the stored activations.
        {
            Scenario x = s;
            double prev = 1e300;
            for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
                x.setup.recompute = r;
                const double act = estimate_memory(x).peak().activations;
                CHECK(act <= prev * (1 + 1e-12));
                prev = act;
            }
        }
        // More micro-batch never lowers activations.
        {
            Scenario x = s;
            const double a1 = estimate_memory(x).peak().activations;
            x.setup.micro_batch *= 2;
            CHECK(estimate_memory(x).peak().activations >= a1);
        }
        // LoRA never needs more than full fine-tuning -- without LoRA dropout. With
        // dropout every adapted module keeps its own dropped copy of its input for
        // the A-matrix gradient (PEFT applies lora_dropout per module), and in
        // activation-heavy runs those copies can outweigh what freezing the base
        // saves; the extra is exactly those tensors.
        if (s.setup.method == Method::Full) {
            Scenario x = s;
            x.setup.method = Method::LoRA;
            x.setup.lora.dropout = 0;
            const MemoryBreakdown l = estimate_memory(x).peak();
            // Model states never grow; activations grow by exactly the adapter
            // tensors (rank-r A outputs kept for B's gradient) -- which, with ZeRO-3
            // over many GPUs, can match what the frozen base saves -- less what the
            // trained norm weights keep for their own gradients under full training
            // (an eager RMSNorm's normalized input: StackConventions::norm_weight_saved_bytes).
            CHECK(l.weights + l.gradients + l.optimizer <= m.weights + m.gradients + m.optimizer);
            const auto gl = build_layer_graph(x.model, x.setup), gf = build_layer_graph(s.model, s.setup);
            double adapter = 0;
            for (const auto& tensor : gl.tensors)
                if (tensor.name.find("lora_") != std::string::npos) adapter += tensor.elems_per_token * tensor.bytes_per_elem;
            for (const auto& tensor : gf.tensors)
                if (tensor.name.find("_norm_normed") != std::string::npos) adapter -= tensor.elems_per_token * tensor.bytes_per_elem;
            auto per_token = [&](const LayerGraph& g) {
                const ActivationCoeffs& c = s.setup.recompute == Recompute::Full ? g.stored_full
                                            : s.setup.recompute == Recompute::Selective ? g.stored_selective : g.stored_none;
                return c.replicated + c.tensor_parallel;
            };
            if (s.setup.recompute != Recompute::Full) CHECK(per_token(gl) - per_token(gf) == Approx(adapter).margin(1e-9));
            Scenario y = x;
            y.setup.lora.dropout = 0.05;
            const auto gx = build_layer_graph(x.model, x.setup), gy = build_layer_graph(y.model, y.setup);
            double copies = 0;
            for (const auto& tensor : gy.tensors)
                if (tensor.name.find("lora_drop") != std::string::npos) copies += tensor.elems_per_token * tensor.bytes_per_elem;
            CHECK(gy.stored_none.replicated + gy.stored_none.tensor_parallel - gx.stored_none.replicated - gx.stored_none.tensor_parallel ==
                  Approx(copies));
        }
    }
}

TEST_CASE("memory per GPU never grows as DP grows under ZeRO-3", "[properties]") {
    Scenario s;
    s.model = tp_test::model("llama-2-13b");
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.setup.zero_stage = 3;
    double prev = 1e300;
    for (int dp = 1; dp <= 1024; dp *= 2) {
        s.cluster.num_gpus = dp;
        s.cluster.gpus_per_node = std::min(dp, 8);
        s.setup.layout.dp = dp;
        const double mem = estimate_memory(s).peak().total;
        CHECK(mem <= prev);
        prev = mem;
    }
}

TEST_CASE("extreme but valid inputs are answered with finite numbers", "[properties][extreme]") {
    auto run = [](std::vector<std::string> args) {
        const auto r = tp_test::cli(args);
        INFO(r.err);
        CHECK((r.code == 0 || r.code == 1));
        CHECK(r.out.find("nan") == std::string::npos);
        CHECK(r.out.find("inf") == std::string::npos);
        return r;
    };
    // A one-layer model.
    run({"simulate", tp_test::data("extreme/one-layer.toml"), "--gpu", "rtx-4090", "--json"});
    // A ten-trillion-parameter model on 100,000 GPUs.
    run({"simulate", "10t", "--gpu", "h100-sxm", "--gpus", "100000", "--gpus-per-node", "8", "--tp", "8", "--pp", "50",
         "--zero", "1", "--global-batch", "25000", "--json"});
    run({"fit", "10t", "--gpu", "h100-sxm", "--json"});
    // A million-token sequence.
    run({"fit", "llama-3-8b", "--gpu", "h100-sxm", "--seq-len", "1048576", "--recompute", "full", "--json"});
    run({"simulate", "llama-3-8b", "--gpu", "h100-sxm", "--seq-len", "1048576", "--json"});
    // A vocabulary of a million.
    run({"simulate", tp_test::data("extreme/vocab-1m.toml"), "--gpu", "a100-sxm-80gb", "--json"});
    // The layout search at 100,000 GPUs.
    run({"plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "100000", "--gpus-per-node", "8", "--global-batch", "100000", "--top", "3", "--json"});
}

TEST_CASE("out-of-range inputs are rejected with the limit named", "[properties][bad-input]") {
    auto bad = [](std::vector<std::string> args, const std::string& message) {
        const auto r = tp_test::cli(args);
        CAPTURE(r.err);
        CHECK(r.code == 2);
        CHECK(r.err == message);
    };
    bad({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--seq-len", "100000000"}, "error: --seq-len = 100000000 exceeds the maximum 16777216\n");
    bad({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "2000000"}, "error: --gpus = 2000000 exceeds the maximum 1048576\n");
    bad({"fit", "200t", "--gpu", "h100-sxm"}, "error: size shorthand \"200t\" must be between 1m and 100t parameters\n");
    bad({"fit", tp_test::data("bad/huge-vocab.toml"), "--gpu", "h100-sxm"},
        tp_test::data("bad/huge-vocab.toml") + ":8:14: error: vocab_size = 100000000 exceeds the maximum 16777216\n");
}
