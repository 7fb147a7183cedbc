// ZeRO paper Table 1 (Rajbhandari et al. 2020) and the Megatron distributed
// optimizer bytes-per-parameter table: model-state memory per GPU.
#include <catch2/catch.hpp>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "trainplan/units.hpp"

using namespace trainplan;

TEST_CASE("ZeRO Table 1 model states within 0.5 %", "[memory][zero]") {
    const toml::table doc = toml::parse_file(tp_test::data("published-memory.toml"));
    int checked = 0;
    for (const toml::node& n : *doc["case"].as_array()) {
        const toml::table& c = *n.as_table();
        const std::string id = c["id"].value_or(std::string());
        if (id.rfind("zero_t1_", 0) != 0) continue;
        TrainingSetup t;
        t.precision = Precision::FP16Mixed;  // fp16 params + grads, fp32 master, m, v (K = 12)
        t.framework = Framework::DeepSpeed;
        t.optimizer = OptimizerKind::AdamW;
        t.zero_stage = static_cast<int>(c["zero_stage"].value_or(0));
        const double params = c["n_params"].value_or(0.0);
        const double dp = c["dp"].value_or(1.0);
        const double expected_gb = c["model_states_per_gpu_gb"].value_or(0.0);
        const double got_gb = model_states(params, t, dp).total() / units::GB;
        CAPTURE(id, expected_gb, got_gb);
        CHECK(got_gb == Approx(expected_gb).epsilon(0.005));
        ++checked;
    }
    // 3 models x (baseline + 3 stages x 6 DP degrees)
    CHECK(checked == 3 * (1 + 3 * 6));
}

TEST_CASE("Megatron distributed optimizer bytes per parameter", "[memory][zero]") {
    // NVIDIA/Megatron-LM docs, dist_optimizer.md: bf16 params + fp32 main grads:
    // 6 + 12/d (18 undistributed); fp32 params + fp32 grads: 8 + 8/d (16).
    for (double d : {1.0, 8.0, 64.0}) {
        TrainingSetup t;
        t.precision = Precision::BF16Mixed;
        t.framework = Framework::Megatron;
        t.zero_stage = d > 1 ? 1 : 0;
        CHECK(model_states(1.0, t, d).total() == Approx(d > 1 ? 6 + 12 / d : 18.0));
        t.precision = Precision::FP32;
        CHECK(model_states(1.0, t, d).total() == Approx(d > 1 ? 8 + 8 / d : 16.0));
    }
}

TEST_CASE("bytes per parameter of the other optimizers", "[memory]") {
    TrainingSetup t;  // bf16-mixed, DeepSpeed convention: 2 + 2 + 4 master
    t.optimizer = OptimizerKind::SGDMomentum;
    CHECK(bytes_per_trainable_param(t).total() == Approx(2 + 2 + 4 + 4));
    t.optimizer = OptimizerKind::Lion;
    CHECK(bytes_per_trainable_param(t).total() == Approx(2 + 2 + 4 + 4));
    t.optimizer = OptimizerKind::SGD;
    CHECK(bytes_per_trainable_param(t).total() == Approx(2 + 2 + 4));
    t.optimizer = OptimizerKind::AdamW8bit;  // 8-bit m and v: 2 B (+ block constants)
    CHECK(bytes_per_trainable_param(t).optimizer_states == Approx(2.0).epsilon(0.01));
    t.optimizer = OptimizerKind::AdamW;
    t.precision = Precision::FP32;
    CHECK(bytes_per_trainable_param(t).total() == Approx(16));
}

TEST_CASE("DeepSpeed ZeRO-3 keeps the head and the last layers gathered at the turn to backward (stage3_max_reuse_distance)", "[zero][zero3][memory]") {
    // partitioned_param_coordinator.py __params_to_release: after a module's forward its
    // parameters stay gathered where the trace fetches them again within
    // stage3_max_reuse_distance elements. Llama-2-7B: a layer is 4 x 4096^2 + 3 x 4096 x
    // 11008 + 2 x 4096 = 202,383,360 parameters, the head 32000 x 4096 + 4096 =
    // 131,076,096. Layer L-k's backward comes after k - 1 layers forward, the head forward
    // and backward, and k - 1 layers backward: kept while 2 (k - 1) x 202.4 M + 2 x 131.1 M
    // < 1e9, so k = 1, 2 -- two layers, 404,766,720 parameters, 809,533,440 B in bf16 more
    // than with the distance at 0 (where only the head, whose backward follows at once,
    // is kept; the 45.1 M-parameter MLP matrix being gathered is the larger of the two).
    auto temporary = [](const char* reuse) {
        const auto r = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--zero", "3", "--framework", "deepspeed",
                                     "--seq-len", "4096", "--micro-batch", "4", "--recompute", "full", "--ds-max-reuse-distance", reuse, "--json"});
        return nlohmann::json::parse(r.out)["memory"]["temporary_bytes"].get<double>();
    };
    CHECK(temporary("1e9") - temporary("0") == Approx(809533440.0));
    // 4e8 keeps one layer (2 x 131.1 M = 262.2 M fetched before the last layer's reuse).
    CHECK(temporary("1e9") - temporary("4e8") == Approx(404766720.0));
}
