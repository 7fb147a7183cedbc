// Did-you-mean ranked by intent: same name up to punctuation, then prefix, then
// family, then edit distance; and suggestions for mistyped flags and commands.
#include <catch2/catch.hpp>

#include <regex>

#include "helpers.hpp"

using trainplan::closest_names;

TEST_CASE("preset suggestions prefer prefix and family over edit distance", "[suggest]") {
    const auto gpus = tp_test::presets().names(trainplan::PresetKind::Gpu);
    // a10, b100 and b200 are one edit from "a100"; what the user meant is an A100.
    CHECK(closest_names("a100", gpus) == std::vector<std::string>{"a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-40gb"});
    CHECK(closest_names("h100", gpus) == std::vector<std::string>{"h100-nvl", "h100-sxm", "h100-pcie"});
    // Another card of the RTX family, nearest number first.
    CHECK(closest_names("rtx4080", gpus) == std::vector<std::string>{"rtx-4090", "rtx-3090", "rtx-5090"});
    CHECK(closest_names("RTX4090", gpus).front() == "rtx-4090");
    CHECK(closest_names("mi300", gpus).front() == "mi300x");
    const auto models = tp_test::presets().names(trainplan::PresetKind::Model);
    CHECK(closest_names("llama-2-14b", models).front() == "llama-2-13b");
    CHECK(closest_names("qwen2.5", models).size() == 3);
    CHECK(closest_names("qwen2.5", models).front().rfind("qwen2.5-", 0) == 0);
    // Another TPU generation: the TPU presets (same family prefix).
    CHECK(closest_names("tpu-v5p", gpus) == std::vector<std::string>{"tpu-v3", "tpu-v4"});
    // Nothing close: no suggestion rather than a random one.
    CHECK(closest_names("trainium2", gpus).empty());
}

TEST_CASE("--gpu a100 suggests the A100 presets", "[suggest][cli]") {
    const auto r = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a100"});
    CHECK(r.code == 2);
    CHECK(r.err ==
          "error: unknown GPU preset \"a100\"; did you mean \"a100-sxm-40gb\", \"a100-sxm-80gb\", \"a100-pcie-40gb\"? "
          "(run 'trainplan gpus' for the list)\n");
}

TEST_CASE("mistyped flags and commands get suggestions", "[suggest][cli]") {
    auto [args, expected] = GENERATE(table<std::vector<std::string>, std::string>({
        {{"fit", "llama-2-7b", "--gpu", "rtx-4090", "--methd", "qlora"},
         "error: unknown flag \"--methd\" for 'trainplan fit'; did you mean \"--method\"?\n"
         "(run 'trainplan fit --help' for its flags)\n"},
        {{"simulate", "llama-2-7b", "--gpu=rtx-4090", "--micro-bach=2"},
         "error: unknown flag \"--micro-bach\" for 'trainplan simulate'; did you mean \"--micro-batch\"?\n"
         "(run 'trainplan simulate --help' for its flags)\n"},
        {{"--versoin"}, "error: unknown flag \"--versoin\"; did you mean \"--version\"?\n(run 'trainplan --help' for the commands)\n"},
        {{"fitt", "llama-2-7b"},
         "error: unknown command \"fitt\"; did you mean \"fit\"?\n(run 'trainplan --help' for the commands)\n"},
    }));
    CAPTURE(args);
    const auto r = tp_test::cli(args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == expected);
}

TEST_CASE("--version prints the project version", "[cli]") {
    const auto r = tp_test::cli({"--version"});
    CHECK(r.code == 0);
    CHECK(std::regex_match(r.out, std::regex(R"(trainplan \d+\.\d+\.\d+\n)")));
}
