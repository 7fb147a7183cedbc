// Exact parameter counts of the reference models (design.md, "Modeling reference").
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace trainplan;

TEST_CASE("parameter counts of the reference models are exact", "[params]") {
    // Published counts (model cards / papers), not the code's output.
    auto [name, expected] = GENERATE(table<std::string, std::int64_t>({
        {"llama-2-7b", 6'738'415'616},
        {"llama-2-13b", 13'015'864'320},
        {"llama-2-70b", 68'976'648'192},
        {"llama-3-8b", 8'030'261'248},
        {"llama-3-70b", 70'553'706'496},
        {"llama-3.1-405b", 405'853'388'800},
        {"mistral-7b", 7'241'732'096},
        {"mixtral-8x7b", 46'702'792'704},
        {"qwen2.5-7b", 7'615'616'512},
        {"qwen3-8b", 8'190'735'360},
        {"qwen3-32b", 32'762'123'264},  // card: 32.8B; by hand: 64 x (5120 x 18432 + 3 x 5120 x 25600 + 10,496) + 2 x 151,936 x 5120 + 5120
        {"gpt3-175b", 174'604'259'328},
    }));
    CAPTURE(name);
    CHECK(count_params(tp_test::model(name)).total == expected);
}

TEST_CASE("hand-derived pieces of the Llama-2-7B count", "[params]") {
    const ParamCounts c = count_params(tp_test::model("llama-2-7b"));
    // attention 4 h^2 with h = 4096; SwiGLU MLP 3 h ffn with ffn = 11008; two RMSNorms.
    CHECK(c.attention == 4LL * 4096 * 4096);
    CHECK(c.mlp == 3LL * 4096 * 11008);
    CHECK(c.layer_norms == 2 * 4096);
    CHECK(c.embedding == 32000LL * 4096);
    CHECK(c.lm_head == 32000LL * 4096);
}

TEST_CASE("Mixtral-8x7B active parameters per token", "[params]") {
    // Mistral AI: "12.9B active parameters" -- two of eight experts per layer.
    const ParamCounts c = count_params(tp_test::model("mixtral-8x7b"));
    const std::int64_t expert = 3LL * 4096 * 14336;
    CHECK(c.active == c.total - 32LL * 6 * expert);
    CHECK(c.active == Approx(12.9e9).epsilon(0.01));
}

TEST_CASE("size shorthand builds an approximate Llama-shaped model of that size", "[params]") {
    for (auto [s, n] : std::vector<std::pair<std::string, double>>{{"7b", 7e9}, {"13b", 13e9}, {"70b", 70e9}, {"350m", 350e6}}) {
        auto m = model_from_shorthand(s);
        REQUIRE(m);
        CHECK(m->approximate);
        CHECK(static_cast<double>(count_params(*m).total) == Approx(n).epsilon(0.06));
    }
    CHECK_FALSE(is_size_shorthand("llama"));
    CHECK_FALSE(is_size_shorthand("b"));
}
