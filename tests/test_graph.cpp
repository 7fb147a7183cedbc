// The step graph: its weights against count_params for every model preset, the
// ops selective recompute repeats, where the tied copy and the logits live.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "trainplan/sharding.hpp"

using namespace trainplan;

TEST_CASE("for every model preset the graph's weights sum exactly to count_params", "[graph][params]") {
    const auto names = tp_test::presets().names(PresetKind::Model);
    REQUIRE(names.size() >= 20);
    for (const std::string& name : names) {
        CAPTURE(name);
        const ModelSpec m = tp_test::model(name);
        const ParamCounts pc = count_params(m);
        TrainingSetup t;
        const StepGraph full = build_step_graph(m, t);
        // Exact: integers well under 2^53.
        CHECK(full.model_params(m.num_layers) == static_cast<double>(pc.total));
        // A full fine-tune trains all of it but an image encoder, which text
        // batches leave idle (opgraph.cpp).
        CHECK(full.model_params(m.num_layers, true) == static_cast<double>(pc.total - pc.vision));
        for (Method method : {Method::LoRA, Method::QLoRA}) {
            t.method = method;
            t.lora.targets = kLoraAll;
            const StepGraph lora = build_step_graph(m, t);
            // The base is all there and frozen; the adapters add r (d_in + d_out)
            // per adapted matrix (counted from the shapes by lora_params_per_layer).
            const double adapters = static_cast<double>(m.num_layers * lora_params_per_layer(m, t.lora));
            CHECK(lora.model_params(m.num_layers, true) == adapters);
            CHECK(lora.model_params(m.num_layers) == static_cast<double>(pc.total) + adapters);
            t.lora.targets = kLoraQ | kLoraV;
            const StepGraph qv = build_step_graph(m, t);
            CHECK(qv.model_params(m.num_layers, true) == static_cast<double>(m.num_layers * lora_params_per_layer(m, t.lora)));
        }
    }
}

TEST_CASE("LoRA adapters of Llama-2-7B, r = 8 on q and v: 4,194,304 trainable parameters", "[graph][params]") {
    // PEFT's print_trainable_parameters() for Llama-2-7B with r = 8 on q_proj
    // and v_proj (its default targets for Llama) prints "trainable params:
    // 4,194,304 || all params: 6,742,609,920": 32 layers x 2 x 8 x (4096 + 4096).
    const ModelSpec m = tp_test::model("llama-2-7b");
    TrainingSetup t;
    t.method = Method::LoRA;
    t.lora.rank = 8;
    t.lora.targets = kLoraQ | kLoraV;
    const StepGraph g = build_step_graph(m, t);
    CHECK(g.model_params(m.num_layers, true) == 4'194'304.0);
    CHECK(g.model_params(m.num_layers) == 6'742'609'920.0);
}

TEST_CASE("LoRA on GPT-2's packed c_attn, r = 8: one adapter per layer, 294,912 trainable parameters", "[graph][params]") {
    // transformers' GPT-2 computes q, k and v in one Conv1D c_attn (768 -> 2304); PEFT's
    // LoRA on it is one adapter per layer of r (768 + 2304) = 24,576 (Hu et al. 2021),
    // 12 layers: 294,912 ("trainable params: 294,912" is what print_trainable_parameters
    // reports for gpt2 with r = 8 on c_attn). Three separate adapters on q, k and v
    // would be 12 x 3 x 8 x (768 + 768) = 442,368.
    const ModelSpec m = tp_test::model("gpt2");
    REQUIRE(m.packed_qkv);
    TrainingSetup t;
    t.method = Method::LoRA;
    t.lora.rank = 8;
    t.lora.targets = kLoraQ | kLoraK | kLoraV;
    const StepGraph g = build_step_graph(m, t);
    CHECK(g.model_params(m.num_layers, true) == 294'912.0);
    ModelSpec split = m;
    split.packed_qkv = false;
    CHECK(build_step_graph(split, t).model_params(m.num_layers, true) == 442'368.0);
    // One GEMM, one module: the layer's weighted modules are ln_1, c_attn, c_proj, ln_2,
    // c_fc, c_proj and the adapter's lora_A and lora_B.
    CHECK(g.weighted_modules[static_cast<int>(Site::Layer)] == 8);
    CHECK(build_step_graph(split, t).weighted_modules[static_cast<int>(Site::Layer)] == 14);
}

TEST_CASE("the tied embedding is copied to the last stage only when the pipeline splits it", "[graph][sharding]") {
    // GPT-2 XL ties its LM head to the 50257 x 1600 word embedding.
    Scenario s;
    s.model = tp_test::model("gpt2-xl");
    REQUIRE(s.model.tied_embeddings);
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    const StepGraph g = build_step_graph(s.model, s.setup);
    const double vh = 50257.0 * 1600;
    ShardPlan one = shard_plan(s);
    const StageParams whole = stage_params(g, one, s.model.num_layers, true, true);
    CHECK(whole.total() == static_cast<double>(count_params(s.model).total));
    s.setup.layout.pp = 2;
    s.cluster.num_gpus = 2;
    s.cluster.gpus_per_node = 2;
    s.setup.grad_accum = 2;
    s.setup.seq_len = 1024;  // GPT-2's learned positions end there
    REQUIRE(validate(s).empty());
    const ShardPlan two = shard_plan(s);
    const StageParams last = stage_params(g, two, 24, false, true);
    const StageParams last_no_copy = stage_params(g, one, 24, false, true);
    CHECK(last.total() - last_no_copy.total() == vh);
    // Memory and time both see it: the last stage's 16-bit weights carry the copy.
    const MemoryEstimate est = estimate_memory(s, true);
    CHECK(est.stages[1].mem.weights - 2 * last_no_copy.total() == Approx(2 * vh));
}

TEST_CASE("selective recompute repeats exactly the attention core ops (Korthikanti Sec. 5)", "[graph][activations]") {
    const ModelSpec m = tp_test::model("gpt3-175b");
    TrainingSetup t;
    t.flash_attention = false;
    const StepGraph g = build_step_graph(m, t);
    std::vector<OpRole> roles;
    for (const OpDef& o : g.ops)
        if (o.selective_recompute) roles.push_back(o.role);
    CHECK(roles == std::vector<OpRole>{OpRole::AttnScores, OpRole::AttnSoftmax, OpRole::AttnDropout, OpRole::AttnValues});
    // QK^T and PV: 2 x 2 FLOPs per MAC x h per token per key; GPT-3: h = 12288.
    CHECK(g.selective_flops_per_token_sq == 4.0 * 12288);
    // With FlashAttention Megatron still checkpoints the core attention
    // (Megatron-Core attention.py, checkpoint_core_attention): the fused kernel's
    // forward, the same 4 h FLOPs per token per key, runs again.
    t.flash_attention = true;
    CHECK(build_step_graph(m, t).selective_flops_per_token_sq == 4.0 * 12288);
}

TEST_CASE("logits: 16-bit copy plus the fp32 softmax copy, vocabulary split by TP", "[graph][memory]") {
    // Llama-3-8B, V = 128,256, s = 8192, b = 1: 8192 x 128256 x (2 + 4) B = 6.30 GB
    // (design.md: a real peak for 128K vocabularies), over t = 2 ranks half that;
    // Megatron's vocab_parallel_cross_entropy(output.float()) convention.
    const ModelSpec m = tp_test::model("llama-3-8b");
    TrainingSetup t;
    t.stack = Stack::MegatronCore;
    const StepGraph g = build_step_graph(m, t);
    CHECK(g.logits.bytes(8192, 1, 1, false) == 8192.0 * 128256 * 6);
    CHECK(g.logits.bytes(8192, 1, 2, true) == 8192.0 * 128256 * 3);
}

TEST_CASE("op and tensor labels are built from static pieces and read as before", "[graph][labels]") {
    // Labels are string_view pieces (no strings built per graph); label() joins
    // them into the names the builder used to concatenate.
    TrainingSetup t;
    t.method = Method::LoRA;
    t.lora.targets = kLoraAll;
    t.lora.dropout = 0.05;
    const ModelSpec m = tp_test::model("mixtral-8x7b");
    REQUIRE(m.is_moe());
    const StepGraph g = build_step_graph(m, t);
    std::vector<std::string> ops, tensors;
    for (const OpDef& o : g.ops) ops.push_back(o.label());
    for (const TensorDef& td : g.tensors) tensors.push_back(td.label());
    auto has = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
    CHECK(has(ops, "q_proj"));
    CHECK(has(ops, "q_proj.lora_A"));
    CHECK(has(ops, "experts.gate_up_proj"));
    CHECK(has(ops, "experts.gate_proj.lora_dropout"));
    CHECK(has(ops, "experts.down_proj.lora_B"));
    CHECK(has(ops, "moe_combine"));  // the scope ends with the experts' MLP
    CHECK(has(tensors, "experts.up_proj.lora_dropout_mask"));
    CHECK(has(tensors, "o_proj.lora_A_out"));
    CHECK(has(tensors, "experts.act_x_up"));
    CHECK(has(tensors, "logits_fp32"));
}
