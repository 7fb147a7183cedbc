// Checkpointing as frameworks configure it (issue 11, item 4), LoRA / QLoRA
// executed FLOPs (item 10) and the GPTQ dequantization cost (item 6). Every
// expected number is derived by hand in the comment above it from the cited source.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/time.hpp"

using namespace trainplan;

namespace {

Scenario scenario(const std::string& model, Recompute r) {
    Scenario s;
    s.model = tp_test::model(model);
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.cluster.num_gpus = 1;
    s.cluster.gpus_per_node = 1;
    s.setup.recompute = r;
    s.setup.seq_len = 2048;
    s.setup.micro_batch = 1;
    return s;
}

}  // namespace

TEST_CASE("torchtitan per-op selective checkpointing keeps every other matmul output (Llama-3-8B)", "[recompute][activations]") {
    // torchtitan models/llama3/parallelize.py, selective_ac_option = "op": inside a
    // layer's checkpoint, save the outputs of mm and of the SDPA kernel, except every
    // second mm. Matmul order in a Llama layer: wq (1, kept), wk (2, recomputed),
    // wv (3, kept), wo (4, recomputed), w1 (5, kept), w3 (6, recomputed), w2 (7, kept).
    // Kept per token, bf16: the layer input h, q (n_heads d_head = 4096), v (n_kv d_head
    // = 1024), the attention output (4096) and its fp32 log-sum-exp (32 heads x 4 B),
    // w1's output (ffn = 14336), w2's output (h):
    //   2 x (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 128 = 63,616 B per token.
    const ModelSpec m = tp_test::model("llama-3-8b");
    TrainingSetup t;
    t.precision = Precision::BF16Mixed;
    const StepGraph g = build_step_graph(m, t);
    CHECK(g.stored_per_op.bytes(2048, 1, 1, false) == Approx(2048.0 * 63616));
    // Recomputed forward FLOPs per token: wk, wo, w3 = 2 x 4096 x (1024 + 4096 + 14336).
    CHECK(g.per_op_flops_per_token == Approx(2.0 * 4096 * (1024 + 4096 + 14336)));
    // Nothing of the s x s kind is recomputed with the fused kernel.
    CHECK(g.per_op_flops_per_token_sq == 0);
    // It keeps more than full recompute (2h per token) and less than none.
    CHECK(g.stored_per_op.bytes(2048, 1, 1, false) > g.stored_full.bytes(2048, 1, 1, false));
    CHECK(g.stored_per_op.bytes(2048, 1, 1, false) < g.stored_none.bytes(2048, 1, 1, false));
}

TEST_CASE("Megatron selective recompute checkpoints the fused attention too", "[recompute][activations]") {
    // Megatron-Core attention.py: recompute_granularity = "selective" wraps the core
    // attention in a checkpoint also when it is FlashAttention / TE fused attention.
    // Its inputs q, k, v stay, its output stays as the output projection's input; only
    // the fp32 log-sum-exp (4 B x heads per token) is dropped, and the kernel's forward
    // (QK^T and PV: 4 h FLOPs per token per key, GPT-3: h = 12288) runs again.
    const ModelSpec m = tp_test::model("gpt3-175b");
    TrainingSetup t;
    t.flash_attention = true;
    const StepGraph g = build_step_graph(m, t);
    CHECK(g.stored_none.bytes(2048, 1, 1, false) - g.stored_selective.bytes(2048, 1, 1, false) == Approx(2048.0 * 4 * 96));
    CHECK(g.selective_flops_per_token_sq == 4.0 * 12288);
}

TEST_CASE("Megatron --recompute-method uniform / block and torchtitan every-k-th block", "[recompute][memory]") {
    // GPT-3 175B shape, eager attention, one GPU, s = 2048, b = 1 (Korthikanti et al.
    // 2022): a layer without recompute keeps sbh (34 + 5 a s / h), under full recompute
    // its 2 sbh input (Sec. 4.2, Eq. 1 at t = 1).
    Scenario s = scenario("gpt3-175b", Recompute::Full);
    s.setup.flash_attention = false;
    s.setup.precision = Precision::FP16Mixed;
    const double sbh = 2048.0 * 12288, none = sbh * (34 + 5.0 * 96 * 2048 / 12288), full = 2 * sbh;
    auto mem = [&](RecomputeMethod how, int n) {
        Scenario x = s;
        x.setup.recompute_method = how;
        x.setup.recompute_layers = n;
        return estimate_memory(x).peak();
    };
    // Block: the first N layers of the stage checkpointed, the rest keep everything;
    // one more checkpointed layer saves none - full.
    CHECK(mem(RecomputeMethod::Block, 10).activations - mem(RecomputeMethod::Block, 11).activations == Approx(none - full).epsilon(1e-9));
    // Block over every layer is uniform with groups of one (Megatron: the same 96 checkpoints).
    CHECK(mem(RecomputeMethod::Block, 96).activations == Approx(mem(RecomputeMethod::Uniform, 1).activations).epsilon(1e-12));
    // Uniform, groups of 4: 96 / 4 = 24 checkpoint inputs instead of 96 (72 x 2 sbh
    // fewer), while backward rebuilds 4 layers at once (3 more layers' worth of working set).
    const MemoryBreakdown u1 = mem(RecomputeMethod::Uniform, 1), u4 = mem(RecomputeMethod::Uniform, 4);
    CHECK(u1.activations - u4.activations == Approx(72 * full).epsilon(1e-9));
    CHECK(u4.temporary - u1.temporary == Approx(3 * none).epsilon(1e-9));
    // torchtitan selective_ac_option = "2": layers 0, 2, 4, ... under full
    // checkpointing, the other 48 keep everything.
    CHECK(mem(RecomputeMethod::Every, 1).activations - mem(RecomputeMethod::Every, 2).activations == Approx(48 * (full - none)).epsilon(1e-9));

    // Time: block recomputes only the first N layers' forward, uniform all of them.
    auto rec = [&](RecomputeMethod how, int n) {
        Scenario x = s;
        x.setup.recompute_method = how;
        x.setup.recompute_layers = n;
        return estimate_time(x).time.recompute_s;
    };
    CHECK(rec(RecomputeMethod::Block, 48) == Approx(0.5 * rec(RecomputeMethod::Uniform, 1)).epsilon(1e-9));
    CHECK(rec(RecomputeMethod::Every, 3) == Approx(rec(RecomputeMethod::Uniform, 1) / 3).epsilon(1e-9));
    CHECK(rec(RecomputeMethod::Uniform, 4) == Approx(rec(RecomputeMethod::Uniform, 1)).epsilon(1e-12));
}

TEST_CASE("recompute settings round-trip through the schema", "[recompute][schema]") {
    const auto r = tp_test::cli_json("simulate", {"llama-3-8b", "--gpu", "h100-sxm", "--recompute", "full", "--recompute-method", "block",
                                                  "--recompute-layers", "8"});
    CHECK(r.dump().find("\"recompute_method\"") != std::string::npos);
    const tp_test::CliResult bad = tp_test::cli({"simulate", "llama-3-8b", "--recompute-method", "sometimes"});
    CHECK(bad.code == 2);
    CHECK(bad.err.find("uniform, block, every") != std::string::npos);
}

TEST_CASE("LoRA hardware FLOPs leave out the frozen weights' gradient GEMMs", "[recompute][lora][time]") {
    // Llama-2-7B: matmul parameters per layer 4 x 4096^2 + 3 x 4096 x 11008 =
    // 202,375,168; x 32 = 6,476,005,376; LM head 32000 x 4096 = 131,072,000;
    // N = 6,607,077,376. LoRA r = 16 on all seven linears (Hu et al. 2021: r (d_in +
    // d_out) each): 16 x (4 x 8192 + 3 x 15104) = 1,249,280 per layer, 39,976,960 in all.
    // Executed per token: forward 2N, input gradient 2N, no weight gradient for the
    // frozen base; the adapters 6 per parameter. MFU's 6N convention counts 2N more
    // and no adapters: model - hardware = 2N - 6 N_adapter. Eager attention computes
    // every query-key pair, the convention's 12 L q s.
    Scenario s = scenario("llama-2-7b", Recompute::None);
    s.setup.method = Method::LoRA;
    s.setup.lora.rank = 16;
    s.setup.lora.targets = kLoraAll;
    s.setup.flash_attention = false;
    const Throughput th = estimate_time(s).throughput;
    CHECK(th.model_flops_per_token - th.hardware_flops_per_token == Approx(2.0 * 6607077376.0 - 6.0 * 39976960.0).epsilon(1e-9));
    CHECK(th.hfu < th.mfu);
    // Full training executes all 6N: hardware = model without recompute.
    s.setup.method = Method::Full;
    const Throughput tf = estimate_time(s).throughput;
    CHECK(tf.hardware_flops_per_token == Approx(tf.model_flops_per_token).epsilon(1e-12));
    // FlashAttention skips the causally masked half of the pairs and its backward
    // recomputes the scores (5 matmuls to the forward's 2): (4 + 10) / 2 = 7 FLOPs per
    // pair and head dimension where the convention counts 12. Llama-2-7B at 2,048
    // tokens: 12 x 32 x 4096 x 2048 = 3,221,225,472 per token, 5/12 of it not run.
    s.setup.flash_attention = true;
    const Throughput fa = estimate_time(s).throughput;
    CHECK(fa.model_flops_per_token - fa.hardware_flops_per_token == Approx(1342177280.0).epsilon(1e-9));
    // Full recompute runs every layer's forward again: the weights' 2 FLOPs per
    // parameter (the LM head is outside the checkpointed layers: 2 x 6,476,005,376)
    // and the causal attention forward, 4 of the 12, halved (536,870,912).
    s.setup.recompute = Recompute::Full;
    const Throughput fr = estimate_time(s).throughput;
    CHECK(fr.hardware_flops_per_token - fa.hardware_flops_per_token == Approx(2.0 * 6476005376.0 + 536870912.0).epsilon(1e-9));
}

TEST_CASE("HFU stays below 100 % at long context: causal attention counted as the kernel runs it", "[recompute][time]") {
    // EasyContext's Llama-2-7B at 512,000 tokens over 8 x A100 (ring attention): the
    // PaLM convention's attention term, 12 x 32 x 4096 x 512000 = 8.05e11 FLOPs per
    // token, is 20 x the 6N of the weights; counted as executed FLOPs it put HFU at 102 %.
    const auto j = tp_test::cli_json("simulate", {"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--cp", "8", "--zero", "3",
                                                  "--offload-params", "cpu", "--offload-optimizer", "cpu", "--recompute", "full",
                                                  "--stack", "generic-eager", "--seq-len", "512000", "--micro-batch", "1"});
    CHECK(j["throughput"]["hfu"].get<double>() < 1.0);
    CHECK(j["throughput"]["hfu"].get<double>() < j["throughput"]["mfu"].get<double>());
}

TEST_CASE("GPTQ bases: auto-gptq's torch dequantization per forward", "[recompute][qlora][time]") {
    // Bits per weight: 4 + (fp16 scale + 4-bit zero) / 128 = 4.15625 (group 128).
    QLoraConfig q;
    q.quant = QuantType::GPTQ;
    CHECK(qlora_bits_per_param(q) == Approx(4.15625));
    // auto-gptq qlinear_cuda_old.py, torch path: shift (0.5 + 4 B), to int8 (4 + 1),
    // and (1 + 1), minus zeros (1 + 1), times scales (1 + 2) = 16.5 B per weight, at
    // half the bandwidth (broadcast and casting element-wise ops run off PyTorch's
    // vectorized path: [qlora] gptq_dequant_bandwidth_share), so 33 B of streaming
    // time, then the matmul reads the 2 B fp16 matrix: 35 B per weight, once per
    // forward (the dequantized matrix is kept by autograd for the input gradient) and
    // again in the recomputed forward. bitsandbytes NF4 without double quantization: 4.5 bits read,
    // 2 B written, 2 B read back = 4.5625 B, in forward, recompute and backward.
    // Llama-2-7B on one A100 80GB (2,039 GB/s x the preset's HBM efficiency), full
    // recompute: per micro-batch, per weight, GPTQ - NF4 = 2 x 35 - 3 x 4.5625 B.
    Scenario s = scenario("llama-2-7b", Recompute::Full);
    s.setup.method = Method::QLoRA;
    s.setup.qlora.double_quant = false;
    Scenario g = s;
    g.setup.qlora.quant = QuantType::GPTQ;
    const double linear = 6476005376.0;  // the layers' matmul weights (LM head stays 16-bit)
    const double bw = s.cluster.gpu.memory_bandwidth_Bps * efficiencies(s.cluster.gpu, AttentionKernel::Flash2).hbm;
    const double expect = linear * (2 * 35.0 - 3 * 4.5625) / bw;
    CHECK(estimate_time(g).time.compute_s - estimate_time(s).time.compute_s == Approx(expect).epsilon(1e-6));
}

TEST_CASE("activation offload moves the saved activations to the host", "[recompute][memory][time]") {
    // GPT-3 175B shape under full recompute keeps 2 sbh per layer (Korthikanti Sec. 4.2);
    // with offload the GPU keeps two layers' worth (the one being copied and the one
    // prefetched), the other 94 of 96 go to the host: 94 x 2 sbh more host memory.
    Scenario s = scenario("gpt3-175b", Recompute::Full);
    s.setup.flash_attention = false;
    s.setup.precision = Precision::FP16Mixed;
    const double sbh = 2048.0 * 12288;
    Scenario o = s;
    o.setup.activation_offload = true;
    const MemoryBreakdown a = estimate_memory(s).peak(), b = estimate_memory(o).peak();
    CHECK(a.activations - b.activations == Approx(94 * 2 * sbh).epsilon(1e-9));
    CHECK(b.cpu - a.cpu == Approx(94 * 2 * sbh).epsilon(1e-9));
    // The copies (2 x 96 x 2 sbh = 9.7 GB over PCIe 4 at 25 GB/s: 0.39 s) hide under a
    // micro-batch of 2048 tokens through 175B parameters (6 x 175e9 x 2048 = 2.2 PFLOP:
    // ~ 9 s at 312 TFLOP/s x 0.78, before the recomputed forward).
    CHECK(estimate_time(o).time.step_s == Approx(estimate_time(s).time.step_s).epsilon(1e-12));
    // Without recompute a layer keeps sbh (34 + 5as/h) = 114 sbh: 96 layers x 2 ways x
    // 114 x 25.2 MB = 551 GB over 25 GB/s = 22 s per micro-batch, no longer hidden.
    o.setup.recompute = Recompute::None;
    s.setup.recompute = Recompute::None;
    CHECK(estimate_time(o).time.step_s > estimate_time(s).time.step_s);
}

TEST_CASE("sliding-window attention: a fused kernel runs only the pairs inside the window", "[recompute][time]") {
    // Gemma-2-9B at 8,192 tokens: 42 layers, 16 heads of 256, every other layer local
    // with a 4,096-token window. A local layer's causal pairs: sum of min(i, 4096)
    // = 4096 x 8192 - 4096^2 / 2, 3/4 of the 8192^2 / 2 causal pairs; half the layers
    // local: 7/8 of the causal attention runs. The convention's attention term is
    // 12 x 42 x 4096 x 8192 = 16,911,433,728 per token; a fused kernel executes 7/12
    // of it (causal, backward recomputing the scores): 9,865,003,008, and the window
    // leaves 1/8 of that, 1,233,125,376 per token, out.
    Scenario s = scenario("gemma-2-9b", Recompute::None);
    s.setup.seq_len = 8192;
    REQUIRE(s.model.sliding_window == 4096);
    CHECK(attention_window_share(s.model, 8192) == Approx(0.875).epsilon(1e-12));
    const Throughput windowed = estimate_time(s).throughput;
    Scenario full = s;
    full.model.sliding_window = 0;
    const Throughput global = estimate_time(full).throughput;
    CHECK(global.hardware_flops_per_token - windowed.hardware_flops_per_token == Approx(1233125376.0).epsilon(1e-9));
    CHECK(windowed.model_flops_per_token == global.model_flops_per_token);  // the convention counts every pair
    CHECK(estimate_time(s).time.compute_s < estimate_time(full).time.compute_s);
    // Eager attention computes every pair and masks: no saving; nor under the window.
    s.setup.flash_attention = full.setup.flash_attention = false;
    CHECK(estimate_time(s).time.compute_s == Approx(estimate_time(full).time.compute_s).epsilon(1e-12));
    // A sequence no longer than the window: nothing left out.
    CHECK(attention_window_share(s.model, 4096) == 1.0);
}
