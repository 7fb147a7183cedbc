// Hugging Face config.json import: the real configs' key names give exact counts.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace trainplan;

TEST_CASE("config.json of several families gives the published parameter counts", "[hf]") {
    auto [file, expected] = GENERATE(table<std::string, std::int64_t>({
        {"llama-2-7b.config.json", 6'738'415'616},     // Touvron et al. 2023
        {"mixtral-8x7b.config.json", 46'702'792'704},  // Mistral AI model card
        {"qwen2.5-7b.config.json", 7'615'616'512},     // Qwen2.5 model card ("7.61B")
        {"gpt2.config.json", 124'439'808},             // GPT-2 small, tied embeddings
    }));
    CAPTURE(file);
    std::string text, why;
    REQUIRE(trainplan::app::read_text_file(tp_test::data("hf/" + file), text, why));
    auto m = parse_hf_config(text, file, file);
    REQUIRE(m);
    CHECK(count_params(*m).total == expected);
}

TEST_CASE("fit accepts a config.json as MODEL", "[hf][cli]") {
    const auto r = tp_test::cli({"fit", tp_test::data("hf/llama-2-7b.config.json"), "--gpu", "rtx-4090"});
    CHECK(r.code == 1);
    CHECK(r.out.find("weights            13.48 GB") != std::string::npos);
}
