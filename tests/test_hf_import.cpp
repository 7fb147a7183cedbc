// Hugging Face config.json import: the real configs' key names give exact counts.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace trainplan;

namespace {
// One of the real config.json files under tests/data/hf, imported.
ModelSpec import_config(const std::string& file) {
    std::string text, why;
    REQUIRE(trainplan::app::read_text_file(tp_test::data("hf/" + file), text, why));
    auto m = parse_hf_config(text, file, file);
    REQUIRE(m);
    return *m;
}
}  // namespace

TEST_CASE("config.json of several families gives the published parameter counts", "[hf]") {
    auto [file, expected] = GENERATE(table<std::string, std::int64_t>({
        {"llama-2-7b.config.json", 6'738'415'616},     // Touvron et al. 2023
        {"mixtral-8x7b.config.json", 46'702'792'704},  // Mistral AI model card
        {"qwen2.5-7b.config.json", 7'615'616'512},     // Qwen2.5 model card ("7.61B")
        {"qwen3-8b.config.json", 8'190'735'360},      // Qwen3 model card ("8.2B", 6.95B non-embedding); QK-norm included
        {"gemma-2-9b.config.json", 9'241'705'984},   // Gemma Team 2024, Table 1: 917,504,000 embedding + 8,324,201,984 non-embedding
        {"gemma-3-1b.config.json", 999'885'952},      // by hand: 262,144 x 1,152 + 26 x 26,842,112 + 1,152 (card: 1B)
        {"gpt2.config.json", 124'439'808},             // GPT-2 small, tied embeddings
    }));
    CAPTURE(file);
    CHECK(count_params(import_config(file)).total == expected);
}

TEST_CASE("fit accepts a config.json as MODEL", "[hf][cli]") {
    const auto r = tp_test::cli({"fit", tp_test::data("hf/llama-2-7b.config.json"), "--gpu", "rtx-4090"});
    CHECK(r.code == 1);
    CHECK(r.out.find("weights            13.48 GB") != std::string::npos);
}

TEST_CASE("a Qwen3 config.json turns on the per-head QK RMSNorm", "[hf]") {
    // transformers' Qwen3Attention: q_norm and k_norm = Qwen3RMSNorm(head_dim), one
    // 128-wide scale each per layer; the config has no key for them, model_type says it.
    const ModelSpec m = import_config("qwen3-8b.config.json");
    CHECK(m.qk_norm);
    CHECK(count_params(m).layer_norms == 2 * 4096 + 2 * 128);
    // The model card's non-embedding count, 6.95B: 36 layers of
    // 4096 x (4096 + 2 x 1024 + 4096) + 3 x 4096 x 12288 + 8,448 norm weights, and the final norm.
    CHECK(count_params(m).non_embedding == 36LL * (4096LL * 10240 + 3LL * 4096 * 12288 + 8448) + 4096);
}

TEST_CASE("a Gemma 2 config.json carries its logit soft-caps", "[hf]") {
    const ModelSpec m = import_config("gemma-2-9b.config.json");
    CHECK(m.final_logit_softcap == 30.0);
    CHECK(m.attn_logit_softcap == 50.0);
    CHECK_FALSE(m.qk_norm);
    CHECK(m.sliding_window == 4096);  // alternating with global layers
    CHECK(m.sliding_window_global_every == 2);
}

TEST_CASE("a Gemma 3 config.json: QK-norm, four norms per layer, no soft-caps", "[hf]") {
    const ModelSpec m = import_config("gemma-3-1b.config.json");
    CHECK(m.qk_norm);
    CHECK(m.norms_per_layer == 4);
    CHECK(m.tied_embeddings);
    CHECK(m.final_logit_softcap == 0);  // null in the config
    CHECK(m.sliding_window == 512);  // one global layer in sliding_window_pattern = 6
    CHECK(m.sliding_window_global_every == 6);
    // Per layer by hand: q 1152 x 1024, k and v 1152 x 256, o 1024 x 1152; GeGLU
    // 3 x 1152 x 6912; four 1152-wide norms and two 256-wide QK-norms.
    CHECK(count_params(m).per_layer == 1152LL * 1024 * 2 + 1152LL * 256 * 2 + 3LL * 1152 * 6912 + 4 * 1152 + 2 * 256);
}
