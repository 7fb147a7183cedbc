// Hugging Face config.json import: the real configs' key names give exact counts.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "trainplan/time.hpp"

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
        // Gemma3ForConditionalGeneration (model card / safetensors totals: 12.2B, 27.4B),
        // the SigLIP encoder and projector included.
        {"gemma-3-12b.config.json", 12'187'325'040},
        {"gemma-3-27b.config.json", 27'432'406'640},
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

TEST_CASE("a Gemma 3 multimodal config.json: the decoder from text_config with its class defaults, the SigLIP encoder's weights", "[hf]") {
    const ModelSpec m = import_config("gemma-3-12b.config.json");
    // text_config leaves these to Gemma3TextConfig: head_dim 256 (not 3840 / 16),
    // vocab 262,208, tied embeddings, a global layer every 6.
    CHECK(m.head_dim == 256);
    CHECK(m.vocab == 262'208);
    CHECK(m.tied_embeddings);
    CHECK(m.qk_norm);
    CHECK(m.norms_per_layer == 4);
    CHECK(m.sliding_window == 1024);
    CHECK(m.sliding_window_global_every == 6);
    CHECK(m.max_seq_len == 131'072);
    REQUIRE(m.has_vision());
    CHECK(m.vision.num_layers == 27);
    CHECK(m.vision.hidden == 1152);
    CHECK_FALSE(m.vision.head);  // vision_use_head: false
    // By hand (transformers modeling_siglip.py): a layer is two LayerNorms (4 x 1152),
    // q, k, v, out with biases (4 x (1152^2 + 1152)) and fc1, fc2 with biases
    // (2 x 1152 x 4304 + 4304 + 1152) = 15,239,504; 27 of them; the 14 x 14 x 3 patch
    // convolution with bias (678,528), 64^2 learned positions (4,718,592) and the
    // post-LayerNorm (2,304): 416,866,032, the Gemma 3 report's 417M vision encoder
    // (Gemma Team 2025, Table 1). The projector: an RMSNorm (1,152) and 1152 x 3840.
    const ParamCounts pc = count_params(m);
    CHECK(pc.vision == 27LL * 15'239'504 + 678'528 + 4'718'592 + 2'304 + 1'152 + 1152LL * 3840);
    CHECK(pc.vision - 1'152 - 1152LL * 3840 == 416'866'032);
    // Table 1's 12B non-embedding count, 10,759M: 48 layers of 224,148,992 and the final norm.
    CHECK(pc.non_embedding - pc.vision == 48LL * 224'148'992 + 3840);
    CHECK((pc.non_embedding - pc.vision) / 1'000'000 == 10'759);
    // The shipped preset and the import are two records of one checkpoint.
    CHECK(pc.total == count_params(tp_test::model("gemma-3-12b")).total);
    CHECK(count_params(tp_test::model("gemma-3-12b")).vision == pc.vision);
}

TEST_CASE("layer_types in a config.json decides which layers attend globally", "[hf]") {
    // transformers 4.53+ writes the list out (and _sliding_window_pattern); 62
    // layers with every sixth global: 10 full_attention entries -> period 6.
    std::string kinds;
    for (int i = 0; i < 62; ++i) kinds += std::string(i ? ", " : "") + ((i + 1) % 6 == 0 ? "\"full_attention\"" : "\"sliding_attention\"");
    const std::string text = R"({"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504, "num_attention_heads": 32,
        "num_key_value_heads": 16, "head_dim": 128, "num_hidden_layers": 62, "vocab_size": 262208, "sliding_window": 1024,
        "_sliding_window_pattern": 6, "layer_types": [)" + kinds + "]}";
    auto m = parse_hf_config(text, "t.json", "t");
    REQUIRE(m);
    CHECK(m->sliding_window == 1024);
    CHECK(m->sliding_window_global_every == 6);
    // A Qwen3 config whose layers all attend fully keeps no window.
    std::string all_full;
    for (int i = 0; i < 4; ++i) all_full += std::string(i ? ", " : "") + "\"full_attention\"";
    auto q = parse_hf_config(R"({"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_hidden_layers": 4, "vocab_size": 100, "sliding_window": 16, "layer_types": [)" + all_full + "]}", "q.json", "q");
    REQUIRE(q);
    CHECK(q->sliding_window == 0);
    // A list of the wrong length is refused at its key.
    auto bad = parse_hf_config(R"({"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_hidden_layers": 4, "vocab_size": 100, "sliding_window": 16, "layer_types": ["full_attention"]})", "b.json", "b");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message().find("layer_types lists 1 layers, num_hidden_layers = 4") != std::string::npos);
}

TEST_CASE("Gemma 3's idle vision encoder adds its weights and nothing else", "[hf][memory]") {
    // The same scenario with and without the encoder: the difference is the encoder
    // and projector's 421,290,864 parameters (above) in the weight dtype, no
    // gradient, optimizer state or activation, no time.
    const std::int64_t vision = 27LL * 15'239'504 + 678'528 + 4'718'592 + 2'304 + 1'152 + 1152LL * 3840;
    auto pair = [](Method method, Framework fw, int zero) {
        Scenario s;
        s.model = tp_test::model("gemma-3-12b");
        s.cluster.gpu = tp_test::gpu("h100-sxm");
        s.setup.method = method;
        s.setup.framework = fw;
        s.setup.zero_stage = zero;
        s.setup.seq_len = 2048;
        Scenario text = s;
        text.model.vision = VisionSpec{};
        return std::pair{estimate_memory(s), estimate_memory(text)};
    };
    for (Method method : {Method::LoRA, Method::QLoRA}) {
        CAPTURE(static_cast<int>(method));
        const auto [with, without] = pair(method, Framework::PyTorchAMP, 0);
        const MemoryBreakdown& a = with.peak();
        const MemoryBreakdown& b = without.peak();
        CHECK(a.weights - b.weights == Approx(vision * 2.0).epsilon(1e-12));  // frozen, 16-bit
        CHECK(a.gradients == b.gradients);
        CHECK(a.optimizer == b.optimizer);
        CHECK(a.activations == b.activations);
        CHECK(with.trainable_params == without.trainable_params);
    }
    {
        // Full fine-tune under torch autocast: the model is fp32, the encoder too; no
        // gradient reaches it, so AdamW never makes its state.
        const auto [with, without] = pair(Method::Full, Framework::PyTorchAMP, 0);
        CHECK(with.peak().weights - without.peak().weights == Approx(vision * 4.0).epsilon(1e-12));
        CHECK(with.peak().gradients == without.peak().gradients);
        CHECK(with.peak().optimizer == without.peak().optimizer);
        CHECK(with.trainable_params == without.trainable_params);
    }
    {
        // DeepSpeed builds its partitions for every parameter that requires grad.
        const auto [with, without] = pair(Method::Full, Framework::DeepSpeed, 1);
        CHECK(with.trainable_params - without.trainable_params == vision);
        CHECK(with.peak().optimizer > without.peak().optimizer);
    }
    Scenario s;
    s.model = tp_test::model("gemma-3-12b");
    s.cluster.gpu = tp_test::gpu("h100-sxm");
    s.setup.method = Method::LoRA;
    Scenario text = s;
    text.model.vision = VisionSpec{};
    CHECK(estimate_time(s).time.step_s == estimate_time(text).time.step_s);
}

TEST_CASE("fit says how much of a Gemma 3 checkpoint is its idle vision encoder", "[hf][cli]") {
    const auto r = tp_test::cli({"fit", tp_test::data("hf/gemma-3-12b.config.json"), "--gpu", "h100-sxm", "--method", "lora"});
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("params: 12.19 B total (421.3 M in the vision encoder and projector: weights only, text batches)") != std::string::npos);
    const auto j = tp_test::cli_json("fit", {"gemma-3-4b", "--gpu", "rtx-4090", "--method", "qlora"});
    CHECK(j["model"]["params"] == 4'300'079'472LL);  // the checkpoint's count
    CHECK(j["model"]["vision_params"] == 27LL * 15'239'504 + 678'528 + 4'718'592 + 2'304 + 1'152 + 1152LL * 2560);
    // A preset whose image is smaller than one patch is refused at its key.
    const auto bad = parse_model_toml("name = \"x\"\nnum_layers = 2\nhidden_size = 64\nnum_heads = 4\nffn_hidden_size = 128\n"
                                      "vocab_size = 100\nmax_seq_len = 64\n[vision]\nnum_layers = 1\nhidden_size = 32\n"
                                      "ffn_hidden_size = 64\npatch_size = 14\nimage_size = 10\n",
                                      "tiny.toml", "tiny");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message().find("image_size = 10 must be at least patch_size = 14") != std::string::npos);
    CHECK(bad.error().message().find("tiny.toml:13:") != std::string::npos);  // at [vision] image_size
    // A bad vision_config value is located in vision_config, not at text_config's
    // key of the same name (line 31 of the 12B file is vision_config's hidden_size).
    std::string text, why;
    REQUIRE(trainplan::app::read_text_file(tp_test::data("hf/gemma-3-12b.config.json"), text, why));
    const std::string key = "\"hidden_size\": 1152";
    REQUIRE(text.find(key) != std::string::npos);
    text.replace(text.find(key), key.size(), "\"hidden_size\": -3");
    const auto neg = parse_hf_config(text, "g.json", "g");
    REQUIRE_FALSE(neg);
    CHECK(neg.error().message().find("g.json:31: error: hidden_size = -3 must be at least 1") != std::string::npos);
}
