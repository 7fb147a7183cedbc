// Every class of bad input gets exit code 2 and a message naming the file, line,
// key, value and the constraint. Each broken fixture is paired with its message.
#include <catch2/catch.hpp>

#include "helpers.hpp"

using tp_test::cli;

namespace {

// The diagnostic line for a fixture: "<path>:<line>:<col>: error: <message>".
std::string at(const std::string& fixture, const std::string& pos, const std::string& msg) {
    return tp_test::data("bad/" + fixture) + pos + ": error: " + msg + "\n";
}

}  // namespace

TEST_CASE("broken model and config files", "[bad-input]") {
    auto [fixture, expected] = GENERATE(table<std::string, std::string>({
        {"unknown-key.toml", at("unknown-key.toml", ":4:14", "unknown key \"hiden_size\" in model preset (did you mean \"hidden_size\"?)")},
        {"malformed.toml", at("malformed.toml", ":6:1", "invalid TOML: Error while parsing array: expected comma or closing ']', saw 'f'")},
        {"kv-heads.toml", at("kv-heads.toml", ":6:16", "num_kv_heads = 6 must divide num_heads = 64")},
        {"zero-layers.toml", at("zero-layers.toml", ":3:14", "num_layers = 0 must be at least 1")},
        {"wrong-type.toml", at("wrong-type.toml", ":4:15", "hidden_size = \"4096\" must be an integer")},
        // Each key in range, the product not: q, k, v, o (one head of 4,194,304) and a gated MLP are
        // 7 h^2 per layer, by hand 100,000 x 7 x 4,194,304^2 = 1.23e19 parameters, over int64 (9.2e18);
        // refused, not printed as a negative count.
        {"too-many-params.toml", at("too-many-params.toml", ":3:14", "the model would have about 1.23e+19 parameters (num_layers = 100000, hidden_size = 4194304, ffn_hidden_size = 4194304), more than the 1e15 trainplan counts exactly")},
        {"malformed.json", at("malformed.json", ":5:1", "invalid JSON: parse error at line 5, column 1: syntax error while parsing object key - unexpected end of input; expected string literal")},
        {"unsupported.json", at("unsupported.json", ":2", "model_type = \"t5\" is not supported (decoder-only types: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3_text, gemma3 (its text_config, with the vision encoder's weights), phi3, phi, falcon, gpt2, gpt_neox, gptj, opt, bloom, mpt, starcoder2, gpt_bigcode)")},
    }));
    CAPTURE(fixture);
    const auto r = cli({"fit", tp_test::data("bad/" + fixture), "--gpu", "rtx-4090"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(expected) != std::string::npos);
    CAPTURE(r.err);
}

TEST_CASE("broken scenario files point at the key's line", "[bad-input][scenario]") {
    auto [fixture, expected] = GENERATE(table<std::string, std::string>({
        {"bad-tp.toml", at("bad-tp.toml", ":9:6", "tp = 3 must divide num_heads = 32")},
        {"bad-batch.toml", at("bad-batch.toml", ":10:16", "global_batch = 100 must be a multiple of micro_batch x dp = 3 x 8 = 24")},
        {"bad-enum.toml", at("bad-enum.toml", ":8:13", "recompute = \"sometimes\" is not one of: none, selective, full, per-op")},
        // An NCCL release written as a TOML number: named as the user wrote it, not as
        // the binary double nearest to it (2.2000000000000002).
        {"nccl-number.toml", at("nccl-number.toml", ":9:8", "nccl = 2.2 must be a string")},
        {"stack-tp.toml", at("stack-tp.toml", ":10:6",
                             "tp = 2 needs a stack that runs it (generic-eager, torchtitan, torchtitan-2025.09, torchtune, torchtune-2024.07, megatron-core, megatron-core-0.7, megatron-legacy, megatron-deepspeed); stack = \"litgpt\" "
                             "runs data parallelism (DDP, ZeRO, FSDP) only")},
    }));
    CAPTURE(fixture);
    const auto r = cli({"fit", "--scenario", tp_test::data("bad/" + fixture)});
    CHECK(r.code == 2);
    CHECK(r.err.find(expected) != std::string::npos);
    CAPTURE(r.err);
}

TEST_CASE("bad flags: unknown presets, out-of-range values, impossible layouts", "[bad-input][flags]") {
    auto [args, expected] = GENERATE(table<std::vector<std::string>, std::string>({
        {{"llama-2-7b", "--gpu", "rtx4090"},
         "error: unknown GPU preset \"rtx4090\"; did you mean \"rtx-4090\", \"rtx-3090\", \"rtx-5090\"? (run 'trainplan gpus' for the list)\n"},
        {{"lama-2-7b", "--gpu", "rtx-4090"},
         "error: unknown model preset \"lama-2-7b\"; did you mean \"llama-2-7b\", \"llama-2-70b\", \"llama-7b\"? (run 'trainplan models' for the list)\n"},
        {{"llama-2-7b", "--gpu", "rtx-4090", "--gpus", "0"}, "error: --gpus = 0 must be at least 1\n"},
        {{"llama-2-7b", "--gpu", "rtx-4090", "--zero", "4"}, "error: --zero = 4 exceeds the maximum 3\n"},
        {{"llama-2-7b", "--gpu", "rtx-4090", "--precision", "fp12"},
         "error: --precision = \"fp12\" is not one of: fp32, fp16-mixed, bf16-mixed, bf16, fp8-mixed\n"},
        {{"llama-2-7b", "--gpu", "rtx-4090", "--gpus", "4", "--tp", "3"}, "error: gpus = 4 must be a multiple of tp x pp x cp = 3\n"},
        {{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--pp", "2", "--zero", "2"},
         "error: zero = 2 cannot be combined with pp = 2 (DeepSpeed and Megatron allow only ZeRO-1 with pipeline parallelism)\n"},
        {{"gpt2", "--gpu", "rtx-4090", "--seq-len", "4096"},
         "error: seq_len = 4096 exceeds max_seq_len = 1024 of GPT-2 (124M) (learned position embeddings cannot extrapolate)\n"},
        {{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--precision", "fp8-mixed"},
         "error: precision = \"fp8-mixed\" needs FP8 tensor cores; NVIDIA A100 80GB SXM4 has none\n"},
        {{"llama-2-7b", "--gpu", "rtx-4090", "--offload-params", "cpu"},
         "error: param_offload = \"cpu\" needs zero = 3 (ZeRO-Infinity), got zero = 0\n"},
        {{"llama-2-7b", "--gpu", "rtx-4090", "--ep", "2", "--gpus", "2"},
         "error: ep = 2 needs a mixture-of-experts model; Llama-2-7B is dense\n"},
        // transformers' model code under the Trainer runs DDP / ZeRO / FSDP only;
        // torchtune adds tensor parallelism, not pipelines.
        {{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "2", "--tp", "2", "--stack", "hf-peft"},
         "error: tp = 2 needs a stack that runs it (generic-eager, torchtitan, torchtitan-2025.09, torchtune, torchtune-2024.07, megatron-core, megatron-core-0.7, megatron-legacy, megatron-deepspeed); stack = \"hf-peft\" runs "
         "data parallelism (DDP, ZeRO, FSDP) only\n"},
        {{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "2", "--pp", "2", "--stack", "torchtune"},
         "error: pp = 2 needs a stack that runs it (generic-eager, torchtitan, torchtitan-2025.09, megatron-core, megatron-core-0.7, megatron-legacy, megatron-deepspeed); stack = \"torchtune\" runs data "
         "parallelism (DDP, ZeRO, FSDP) and tensor parallelism only\n"},
        // Megatron-LM's pre-Core model code: tensor and pipeline parallelism, no context parallelism.
        {{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "4", "--tp", "2", "--cp", "2", "--stack", "megatron-legacy"},
         "error: cp = 2 needs a stack that runs it (generic-eager, torchtitan, torchtitan-2025.09, megatron-core, megatron-core-0.7); stack = \"megatron-legacy\" runs data "
         "parallelism (DDP, ZeRO, FSDP), tensor and pipeline parallelism only\n"},
        {{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--stack", "hf-peft", "--activation-offload", "on"},
         "error: activation_offload = true needs a stack that runs it (generic-eager, unsloth, torchtune, torchtune-2024.07, megatron-core, megatron-core-0.7, megatron-deepspeed, llm-foundry); stack = "
         "\"hf-peft\" has no such switch\n"},
    }));
    std::vector<std::string> full{"fit"};
    full.insert(full.end(), args.begin(), args.end());
    const auto r = cli(full);
    CAPTURE(r.err);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == expected);
}

TEST_CASE("unreadable files and unparsable numbers", "[bad-input]") {
    const auto r = cli({"fit", "no/such/model.toml", "--gpu", "rtx-4090"});
    CHECK(r.code == 2);
    CHECK(r.err == "no/such/model.toml: error: cannot read model file: No such file or directory\n");
    const auto n = cli({"fit", "llama-2-7b", "--gpu", "rtx-4090", "--gpus", "abc"});
    CHECK(n.code == 2);
    CHECK(n.err == "error: --gpus = \"abc\" must be an integer\n");
    const auto s = cli({"fit", "--scenario", "no/such/scenario.toml"});
    CHECK(s.code == 2);
    CHECK(s.err == "no/such/scenario.toml: error: cannot read scenario file: No such file or directory\n");
}
