// Policy as data: the embedded data/defaults.toml parses, every accessor
// answers from it, and an unknown architecture is named, not silently mapped.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "trainplan/policy.hpp"
#include "trainplan/time.hpp"

using namespace trainplan;

TEST_CASE("the embedded defaults parse and carry the sourced values", "[policy]") {
    const auto p = Policy::parse(embedded_defaults_toml(), "data/defaults.toml");
    REQUIRE(p.has_value());
    // FlashAttention-2: 50-73 % of peak on A100 (Dao 2023) -> 0.60; ~35 % on H100 (Shah et al. 2024).
    CHECK(p->attention("ampere", AttentionKernel::Flash2).value == 0.60);
    CHECK(p->attention("hopper", AttentionKernel::Flash2).value == 0.35);
    // FlashAttention-3 on Hopper: 75 % forward, 0.60 used for fwd + bwd.
    CHECK(p->attention("hopper", AttentionKernel::Flash3).value == 0.60);
    // MI300X: FlashAttention 2 there is ROCm/flash-attention's CK port, measured fwd + bwd at
    // 223.08 / 230.54 / 231.57 / 228.36 TFLOP/s (batch 1 / 2 / 4 / 8, d 128, 16,384 tokens;
    // ROCm/flash-attention#142): the median over the 1,307.4 TFLOP/s bf16 peak.
    const double ck_fa2 = (228.36 + 230.54) / 2 / 1307.4;
    CHECK(p->attention("cdna3", AttentionKernel::Flash2).value == Approx(ck_fa2).margin(0.002));
    // flash3 there is AITER's fmha v3 assembly at batch 1, 32/8 heads, causal 8,192 tokens,
    // d 128 (AITER op_tests/cpp/mha/README.md, PR #1270): forward 522.68, backward 436.13
    // TFLOP/s; fwd + bwd on flash-attn's 1 : 2.5 FLOP split.
    const double aiter = 3.5 / (1 / 522.68 + 2.5 / 436.13) / 1307.4;
    CHECK(p->attention("cdna3", AttentionKernel::Flash3).value == Approx(aiter).margin(0.01));
    // FlashAttention 1 reaches half of FlashAttention 2 on every architecture (Dao 2023).
    CHECK(p->attention("cdna3", AttentionKernel::Flash1).value == Approx(ck_fa2 / 2).margin(0.001));
    // DGX A100 ships 8 x HDR, DGX H100 / B200 8 x NDR.
    CHECK(default_inter_node_link_id(tp_test::gpu("a100-sxm-80gb")) == "ib-hdr");
    CHECK(default_inter_node_link_id(tp_test::gpu("h100-sxm")) == "ib-ndr");
    CHECK(default_inter_node_link_id(tp_test::gpu("b200")) == "ib-ndr");
    CHECK(default_inter_node_link_id(tp_test::gpu("rtx-4090")) == "eth-100g");
}

TEST_CASE("every GPU preset's architecture has a row in the policy table", "[policy][presets]") {
    for (const std::string& name : tp_test::presets().names(PresetKind::Gpu)) {
        CAPTURE(name);
        CHECK_FALSE(architecture_warning(tp_test::gpu(name)).has_value());
    }
}

TEST_CASE("an unknown architecture gets a warning naming the fallback", "[policy][time]") {
    GpuSpec g = tp_test::gpu("a100-sxm-80gb");
    g.id = "my-gpu";
    g.architecture = "rubin";
    const auto w = architecture_warning(g);
    REQUIRE(w.has_value());
    CHECK(w->key == "architecture");
    CHECK(w->message ==
          "GPU my-gpu: architecture = \"rubin\" is not in data/defaults.toml [attention]; using the \"ampere\" attention efficiencies");
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = g;
    const TimeEstimate te = estimate_time(s);
    REQUIRE(te.warnings.size() == 1);
    CHECK(te.warnings[0].message == w->message);
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    CHECK(estimate_time(s).warnings.empty());
}

TEST_CASE("a broken defaults file names the key and line", "[policy][bad-input]") {
    std::string text = embedded_defaults_toml();
    const std::string from = "hbm = 0.85";
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), "hbm = -1");
    const auto p = Policy::parse(text, "defaults.toml");
    REQUIRE_FALSE(p.has_value());
    const Diagnostic& d = p.error().diagnostics.at(0);
    CHECK(d.key == "efficiency.hbm");
    CHECK(d.line > 0);
    CHECK(d.to_string().find("efficiency.hbm = -1") != std::string::npos);
}

TEST_CASE("a share of a rate in the defaults file is refused outside (0, 1]", "[policy][bad-input]") {
    const std::string from = "gptq_dequant_bandwidth_share = 0.5";
    for (const std::string bad : {"1.5", "0"}) {
        std::string text = embedded_defaults_toml();
        REQUIRE(text.find(from) != std::string::npos);
        text.replace(text.find(from), from.size(), "gptq_dequant_bandwidth_share = " + bad);
        const auto p = Policy::parse(text, "defaults.toml");
        REQUIRE_FALSE(p.has_value());
        REQUIRE(p.error().diagnostics.size() == 1);  // one message, not one per check
        const Diagnostic& d = p.error().diagnostics.at(0);
        CHECK(d.key == "qlora.gptq_dequant_bandwidth_share");
        CHECK(d.line > 0);
    }
}

TEST_CASE("trainplan simulate prints the unknown-architecture warning", "[policy][cli]") {
    // tests/data/unknown-arch: the A100-80GB preset with architecture = "rubin".
    const auto r = tp_test::cli({"simulate", "llama-2-7b", "--method", "lora", "--gpu", "rubin-x", "--presets", tp_test::data("unknown-arch")});
    CHECK(r.code == 0);
    CHECK(r.err ==
          "warning: GPU rubin-x: architecture = \"rubin\" is not in data/defaults.toml [attention]; using the \"ampere\" attention "
          "efficiencies\n");
}
