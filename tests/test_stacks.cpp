// The training stack (issue 11): each stack's loss, norm, SwiGLU and allocator
// conventions (data/defaults.toml [stack.*]) against hand derivations from the
// stacks' own code, and the setting's plumbing (resolver default, bad input,
// the "assumes:" line).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/collectives.hpp"
#include "trainplan/fit.hpp"
#include "trainplan/moves.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/policy.hpp"
#include "trainplan/rules.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"
#include "trainplan/validation.hpp"
#include "validation_cases.hpp"

using namespace trainplan;

namespace {

StepGraph graph(const std::string& model, Stack st, Precision p = Precision::BF16Mixed, bool flash = true) {
    TrainingSetup t;
    t.stack = st;
    t.precision = p;
    t.flash_attention = flash;
    return build_step_graph(tp_test::model(model), t);
}

// Llama-2-7B under transformers + PEFT on `gpu` with LoRA r 8 on q and v (the
// llama-recipes PR #41 adapters), trained by `method` in `p`, one sequence of
// `seq` tokens per micro-batch; each test sets the rest.
Scenario hf_llama7b(const char* gpu, Method method, Precision p, std::int64_t seq) {
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu(gpu);
    s.setup.stack = Stack::HfPeft;
    s.setup.method = method;
    s.setup.precision = p;
    s.setup.lora.rank = 8;
    s.setup.lora.targets = kLoraQ | kLoraV;
    s.setup.seq_len = seq;
    s.setup.micro_batch = 1;
    return s;
}

}  // namespace

TEST_CASE("stacks: logits bytes at the loss for an 8k x 128k step, per stack's loss code", "[stacks][memory]") {
    // Llama-3-8B: V = 128,256; s = 8192, b = 1 -> 8192 x 128256 = 1.0507e9 logits.
    const double n = 8192.0 * 128256;
    // transformers LlamaForCausalLM: logits.float() (4 B), shift_logits .contiguous()
    // (4 B), CrossEntropyLoss's log_softmax output in fp32 (4 B): 12 B -> 12.6 GB.
    CHECK(graph("llama-3-8b", Stack::HfPeft).logits.bytes(8192, 1, 1, false) == Approx(n * 12));
    CHECK(n * 12 / 1e9 == Approx(12.61).epsilon(1e-3));
    // Plain F.cross_entropy under autocast: forward bf16 logits + autocast fp32 copy +
    // fp32 log-probs = 10 B; backward starts with nll_loss's dense fp32 gradient and
    // log_softmax's beside the saved log-probs (3 x 4 B) while the caller still holds
    // the bf16 logits (2 B): 14 B, the larger.
    CHECK(graph("llama-3-8b", Stack::GenericEager).logits.bytes(8192, 1, 1, false) == Approx(n * 14));
    // torchtitan: forward pred (bf16) + pred.float() + fp32 log-probs = 10 B; train.py
    // deletes pred before backward, which starts with 3 x 4 = 12 B.
    CHECK(graph("llama-3-8b", Stack::Torchtitan).logits.bytes(8192, 1, 1, false) == Approx(n * 12));
    // torchtitan over TP ranks runs loss_parallel(): DTensor's out-of-place ops keep
    // the saved log-probs, zeros_like(x), exp(x) and their sum at backward's start,
    // 4 x 4 = 16 B per logit, over t = 2 vocabulary shards 8 B per rank.
    CHECK(graph("llama-3-8b", Stack::Torchtitan).logits_tp.bytes(8192, 1, 2, true) == Approx(n * 8));
    // A stack whose loss is the same over TP ranks: Megatron's vocab-parallel one.
    CHECK(graph("llama-3-8b", Stack::MegatronCore).logits_tp.bytes(8192, 1, 2, true) == Approx(n * 3));
    // torchtune CEWithChunkedOutputLoss, 8 chunks: bf16 logits + every chunk's fp32
    // log-probs + one chunk's fp32 upcast: 2 + 4 + 4/8 = 6.5 B.
    CHECK(graph("llama-3-8b", Stack::Torchtune).logits.bytes(8192, 1, 1, false) == Approx(n * 6.5));
    // torchtune before PR #1235 (2024-07-28): output(h).float(), and the recipe holds the
    // shifted .contiguous() fp32 copy through backward, which starts with that copy,
    // log_softmax's saved fp32 output, nll_loss's dense fp32 gradient and log_softmax's
    // fp32 input gradient: 4 x 4 = 16 B, no 16-bit logits (the cast's input is not saved).
    CHECK(graph("llama-3-8b", Stack::Torchtune2024).logits.bytes(8192, 1, 1, false) == Approx(n * 16));
    // Megatron vocab_parallel_cross_entropy(output.float()): bf16 + one fp32 buffer
    // reused in place: 6 B; vocabulary-parallel over t = 2: 3 B per rank.
    CHECK(graph("llama-3-8b", Stack::MegatronCore).logits.bytes(8192, 1, 1, false) == Approx(n * 6));
    CHECK(graph("llama-3-8b", Stack::MegatronCore).logits.bytes(8192, 1, 2, true) == Approx(n * 3));
    // Megatron-Core up to core_v0.7.0 subtracts the maximum out of place
    // (tensor_parallel/cross_entropy.py:24): a second fp32 buffer, 2 + 4 + 4 = 10 B;
    // 5 B per rank at t = 2, 2 B (2.10 GB) more than core_v0.8's in-place code there.
    CHECK(graph("llama-3-8b", Stack::MegatronCore07).logits.bytes(8192, 1, 1, false) == Approx(n * 10));
    CHECK(graph("llama-3-8b", Stack::MegatronCore07).logits.bytes(8192, 1, 2, true) == Approx(n * 5));
    // LitGPT chunked head + chunked_cross_entropy in bf16-true: bf16 logits + bf16 log-probs: 4 B.
    CHECK(graph("llama-3-8b", Stack::LitGPT, Precision::BF16).logits.bytes(8192, 1, 1, false) == Approx(n * 4));
    // Unsloth fused CE: the bf16 logits only (gradient written in place): 2 B.
    CHECK(graph("llama-3-8b", Stack::Unsloth).logits.bytes(8192, 1, 1, false) == Approx(n * 2));
    // flash-attn's CrossEntropyLoss patched into transformers 4.35 LlamaForCausalLM:
    // the model still upcasts (`logits.float()`, shifted `.contiguous()` fp32 copy);
    // the loss saves that fp32 copy and backward writes a new fp32 gradient
    // (inplace_backward=False): 4 + 4 = 8 B.
    CHECK(graph("llama-3-8b", Stack::HfFused).logits.bytes(8192, 1, 1, false) == Approx(n * 8));
    // llm-foundry's default loss_fn 'fused_crossentropy' (flash-attn's CrossEntropyLoss,
    // modeling_mpt.py v0.2.0-v0.4.0) on the 16-bit logits MPT's unembedding returns: it
    // saves them, and backward writes a new bf16 gradient (inplace_backward=False): 2 + 2 = 4 B.
    CHECK(graph("llama-3-8b", Stack::LlmFoundry).logits.bytes(8192, 1, 1, false) == Approx(n * 4));
}

TEST_CASE("Liger's fused linear cross-entropy: one token chunk's logits and the input's gradient", "[stacks][memory]") {
    // liger-kernel fused_linear_cross_entropy_forward for Llama-3-8B at 8192 x 1 tokens:
    // inc_factor = cdiv(128256, 4096) = 32, chunk_size = next_power_of_2(cdiv(8192, 32))
    // = 256: a 256 x 128,256 bf16 logits chunk (65,667,072 B), grad_input 8192 x 4096
    // bf16 (67,108,864 B), loss_1d 8192 fp32 (32,768 B): 132,808,704 B, against the
    // 12.6 GB hf-peft keeps for the same step (above).
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::LoRA, Precision::BF16Mixed, 8192);
    s.model = tp_test::model("llama-3-8b");
    s.setup.fused_linear_ce = true;
    CHECK(fused_linear_ce_bytes(s.model, s.setup, 8192) == 132'808'704);
    CHECK(estimate_memory(s).peak().logits == 132'808'704);
    // It saves that gradient, not the head's input: 8192 x 4096 x 2 B fewer stored.
    Scenario unfused = s;
    unfused.setup.fused_linear_ce = false;
    CHECK(estimate_memory(unfused).peak().activations - estimate_memory(s).peak().activations == Approx(8192.0 * 4096 * 2));
    // A non-power-of-two share: Gemma-3-27B (V 262,208, H 5,376) at 2,048 tokens:
    // cdiv = 49, cdiv(2048, 49) = 42 -> 64 rows: 64 x 262,208 x 2 + 2048 x 5376 x 2 + 2048 x 4.
    CHECK(fused_linear_ce_bytes(tp_test::model("gemma-3-27b"), s.setup, 2048) == 64.0 * 262208 * 2 + 2048.0 * 5376 * 2 + 2048.0 * 4);
    // A chunk never exceeds the tokens: 100 tokens of a 32K vocabulary over H = 4096
    // (cdiv 8, cdiv(100, 8) = 13 -> 16 rows).
    CHECK(fused_linear_ce_bytes(tp_test::model("llama-2-7b"), s.setup, 100) == 16.0 * 32000 * 2 + 100.0 * 4096 * 2 + 400);
    // Training with labels it returns no logits: nothing is held for the loop.
    s.setup.held_outputs = HeldOutputs::Logits;
    CHECK(estimate_memory(s).peak().logits == 132'808'704);
    // The assumes line says so.
    CHECK(app::describe_setup(s).find("loss Liger fused linear cross-entropy") != std::string::npos);
    // A stack with its own loss kernel has no such switch, nor does tensor parallelism.
    Scenario u = s;
    u.setup.stack = Stack::Unsloth;
    auto v = check_rules(u);
    REQUIRE(v.size() == 1);
    CHECK(v[0].rule == Rule::StackFusedLinearCe);
    CHECK(v[0].message.find("fused_linear_ce = true needs a stack that runs it (generic-eager, hf-peft, hf-fused, deepspeed, hf-liger)") != std::string::npos);
    // fit offers it where the logits overflow: Gemma-3-27B Q-LoRA on a 24 GB card,
    // 2.1 GB over with the generic loss's 14 B per logit, fits with the chunked one.
    Scenario g;
    g.model = tp_test::model("gemma-3-27b");
    g.cluster.gpu = tp_test::gpu("rtx-4090");
    g.setup.method = Method::QLoRA;
    g.setup.precision = Precision::BF16;
    g.setup.recompute = Recompute::Full;
    const FitReport rep = check_fit(g);
    REQUIRE_FALSE(rep.fits);
    REQUIRE_FALSE(rep.remedies.empty());
    CHECK(rep.remedies[0].title == "Liger fused linear cross-entropy");
}

TEST_CASE("hf-liger: Liger's patch runs its fused linear cross-entropy unless told not to, and its RMSNorm and SwiGLU kernels", "[stacks][memory]") {
    // Liger's apply_liger_kernel_to_llama defaults fused_linear_cross_entropy=True:
    // unset, the hf-liger run keeps one chunk (132,808,704 B for Llama-3-8B at 8192
    // tokens, as derived in the test above), not the 12 B per logit of hf-peft.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::LoRA, Precision::BF16Mixed, 8192);
    s.model = tp_test::model("llama-3-8b");
    s.setup.stack = Stack::HfLiger;
    CHECK(estimate_memory(s).peak().logits == 132'808'704);
    CHECK(app::describe_setup(s).find("loss Liger fused linear cross-entropy") != std::string::npos);
    // Turned off, the model's own loss: transformers' 12 B per logit.
    Scenario off = s;
    off.setup.fused_linear_ce = false;
    CHECK(estimate_memory(off).peak().logits == Approx(8192.0 * 128256 * 12));
    // Under tensor parallelism it cannot run: off by default, no error; asked for, refused.
    Scenario tp = s;
    tp.setup.layout.tp = 2;
    CHECK_FALSE(fused_linear_ce_on(tp.setup));
    tp.setup.fused_linear_ce = true;
    CHECK_FALSE(check_rules(tp).empty());
    // Per token and layer of Llama-2-7B: LigerRMSNorm keeps its 16-bit input (not
    // transformers' fp32 copy: 2 norms x 4096 x 2 B fewer) and computes the weight's
    // gradient from it and its rstd (transformers' `self.weight * hidden.to(dtype)`
    // keeps the 16-bit normalized input for the trained weight: 2 x 4096 x 2 B more),
    // LigerSiLUMulFunction keeps gate and up, not silu(gate) as well (11,008 x 2 B fewer).
    const double peft = graph("llama-2-7b", Stack::HfPeft).stored_none.bytes(1, 1, 1, false);
    const double liger = graph("llama-2-7b", Stack::HfLiger).stored_none.bytes(1, 1, 1, false);
    CHECK(peft - liger == Approx(2 * 4096.0 * 2 + 2 * 4096.0 * 2 + 11008.0 * 2));
}

TEST_CASE("stacks: eager RMSNorm's fp32 input copy and eager SwiGLU's extra tensor", "[stacks][memory]") {
    // Llama-2-7B, h = 4096, f = 11008, bf16-mixed (a = 2 B), no dropout, FlashAttention.
    // transformers LlamaRMSNorm saves x.float() (4 B per element) where a fused
    // RMSNorm keeps the 16-bit input (2 B): +2 B x h for each of the two norms; and
    // its weight multiply (`self.weight * hidden_states.to(input_dtype)`) keeps the
    // 16-bit normalized input for the weight's gradient while the weight trains (full
    // fine-tuning): +2 B x h each, which a fused norm computes from what it keeps.
    // The eager `act_fn(gate) * up` keeps act_fn(gate) (f x 2 B) that a fused
    // SwiGLU recomputes. Per token per layer: 2 x (2 + 2) x 4096 + 2 x 11008 = 54,784 B.
    const double hf = graph("llama-2-7b", Stack::HfPeft).stored_none.bytes(1, 1, 1, false);
    const double fused = graph("llama-2-7b", Stack::Unsloth).stored_none.bytes(1, 1, 1, false);
    CHECK(hf - fused == Approx(2.0 * (2 + 2) * 4096 + 2.0 * 11008));
    // whyNLP's hf-fused patches in flash-attn's RMSNorm, but its xformers swiglu()
    // falls back to the eager functional path (unpacked gate/up weights, bf16):
    // only the norms differ from transformers' own layers, 2 x (2 + 2) x 4096 B.
    const double patched = graph("llama-2-7b", Stack::HfFused).stored_none.bytes(1, 1, 1, false);
    CHECK(hf - patched == Approx(2.0 * (2 + 2) * 4096));
    // Full recompute keeps each layer's 16-bit input only, whatever the norm.
    CHECK(graph("llama-2-7b", Stack::HfPeft).stored_full.bytes(1, 1, 1, false) == 2.0 * 4096);
    // A LayerNorm model (GPT-2-style fc1/GELU MLP) keeps its norm input in the
    // activation dtype on every stack, and has no SwiGLU: nothing differs.
    const std::string ln = "gpt2-xl";
    CHECK(graph(ln, Stack::HfPeft).stored_none.bytes(1, 1, 1, false) == graph(ln, Stack::HfFused).stored_none.bytes(1, 1, 1, false));
}

TEST_CASE("stacks: LitGPT's layer keeps what its eager code saves: repeated K / V, the normalized norm inputs, the output copy", "[stacks][memory]") {
    // Llama-3-8B (h 4096, 32 heads, 8 KV heads, d 128, f 14336) under LitGPT, full
    // bf16 training, no recompute; litgpt/model.py (fc600439, 2024-03). Per token and
    // layer, by the code:
    //  - RMSNorm: x.float() kept for x * x and x * rsqrt (4h), and x_normed.to(bf16)
    //    kept by `x_normed * self.weight` for the weight's gradient (2h), twice;
    //  - the attn Linear's input and the MLP's fc_1 / fc_2 input (the norms' outputs, 2h each);
    //  - K and V expanded to all 32 heads and reshaped (a copy: "flash attention
    //    requires it"), so SDPA keeps q, k, v and its output at the query width (4 x 2h)
    //    and one fp32 log-sum-exp per head (32 x 4);
    //  - `y.transpose(1, 2)` then reshape: the copy the output projection keeps (2h);
    //  - silu(fc_1) keeps fc_1, the product keeps silu(fc_1) and fc_2, proj keeps the
    //    product: 4 x 2f.
    const double h = 4096, f = 14336;
    const double by_hand = 2 * (4 * h + 2 * h) + 2 * (2 * h) + 4 * (2 * h) + 32 * 4 + 2 * h + 4 * (2 * f);
    CHECK(by_hand == 221312);
    CHECK(graph("llama-3-8b", Stack::LitGPT).stored_none.bytes(1, 1, 1, false) == Approx(by_hand));
    // Under LoRA the norms' weights are frozen: the mul keeps nothing for them.
    TrainingSetup t;
    t.stack = Stack::LitGPT;
    t.method = Method::LoRA;
    const StepGraph lora = build_step_graph(tp_test::model("llama-3-8b"), t);
    double adapters = 0;
    for (const TensorDef& td : lora.tensors)
        if (td.name.find("lora_") != std::string::npos) adapters += td.elems_per_token * td.bytes_per_elem;
    CHECK(lora.stored_none.bytes(1, 1, 1, false) - adapters == Approx(by_hand - 2 * (2 * h)));
}

TEST_CASE("stacks: Lit-GPT before PR #606 kept its RMSNorm input in the activation dtype", "[stacks][memory]") {
    // lit_gpt/rmsnorm.py up to commit 6178c7cc (2023-10-24): `x * x`, `x *
    // torch.rsqrt(...)`, `self.weight * x_normed`, all in bf16, keep the 16-bit input;
    // PR #606 put `x = x.float()` first, and the saved copy became fp32. Llama-2-7B,
    // h = 4096, two norms per layer: 2 x (4 - 2) x 4096 = 16,384 B per token per layer,
    // and nothing else differs (the loss, SwiGLU and attention are the same code).
    const StepGraph now = graph("llama-2-7b", Stack::LitGPT);
    const StepGraph then = graph("llama-2-7b", Stack::LitGPT2023);
    CHECK(now.stored_none.bytes(1, 1, 1, false) - then.stored_none.bytes(1, 1, 1, false) == Approx(2.0 * 2 * 4096));
    CHECK(now.logits.bytes(8192, 1, 1, false) == then.logits.bytes(8192, 1, 1, false));
}

TEST_CASE("stacks: xformers' swiglu() runs its packed kernel where DeepSpeed ZeRO-1/2 flatten the weights", "[stacks][memory]") {
    // whyNLP's LlamaMLP calls xformers.ops.swiglu(x, gate.weight, .., up.weight, ..,
    // down.weight, ..). DeepSpeed ZeRO-1/2 re-point each trained 16-bit parameter at
    // its slice of one flat buffer, so gate and up become adjacent views of one
    // storage: stack_or_none succeeds and the packed fused op runs; its autograd
    // function saves x, gate and up (csrc/swiglu/swiglu_packedw.cpp) where the eager
    // path also keeps act(gate) and the down projection's input act(gate) * up.
    // Llama-2-7B, f = 11008, bf16: 2 x 11008 x 2 B = 44,032 B less per token per layer.
    TrainingSetup t;
    t.stack = Stack::HfFused;
    t.framework = Framework::DeepSpeed;
    t.zero_stage = 2;
    const ModelSpec m = tp_test::model("llama-2-7b");
    CHECK(swiglu_kernel(t) == SwigluKernel::PackedFused);
    const double packed = build_step_graph(m, t).stored_none.bytes(1, 1, 1, false);
    t.zero_stage = 3;  // partitioned parameters, gathered one module at a time
    CHECK(swiglu_kernel(t) == SwigluKernel::Eager);
    CHECK(build_step_graph(m, t).stored_none.bytes(1, 1, 1, false) - packed == Approx(2.0 * 11008 * 2));
    t.zero_stage = 0;
    t.framework = Framework::PyTorchAMP;  // accelerate DDP: every parameter its own storage
    CHECK(swiglu_kernel(t) == SwigluKernel::Eager);
    // LoRA trains adapters only: the frozen gate and up weights are not flattened.
    t.framework = Framework::DeepSpeed;
    t.zero_stage = 1;
    CHECK(swiglu_kernel(t) == SwigluKernel::PackedFused);
    t.method = Method::LoRA;
    CHECK(swiglu_kernel(t) == SwigluKernel::Eager);
    // Stacks without the call keep their own convention under ZeRO-2.
    t.method = Method::Full;
    t.stack = Stack::HfPeft;
    CHECK(swiglu_kernel(t) == SwigluKernel::Eager);
    t.stack = Stack::Unsloth;
    CHECK(swiglu_kernel(t) == SwigluKernel::Fused);
}

TEST_CASE("stacks: the allocator reserve follows the transient bytes, not the states", "[stacks][memory]") {
    // Same model and batch, AdamW vs SGD: 8 B per parameter of optimizer state
    // more, the same activations; the caching allocator's reserve is set by what
    // it cycles through (activations, logits, buffers), so it must not move. (A
    // 180 GB card holds both: the reserve is no more than the device has free.)
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu("b200");
    s.setup.stack = Stack::HfPeft;
    s.setup.seq_len = 2048;
    const MemoryBreakdown adam = estimate_memory(s).peak();
    s.setup.optimizer = OptimizerKind::SGD;
    const MemoryBreakdown sgd = estimate_memory(s).peak();
    REQUIRE(adam.optimizer > sgd.optimizer + 50e9);
    CHECK(adam.fragmentation == Approx(sgd.fragmentation));
    CHECK(adam.fragmentation > 0);
    // Reserved and allocated are reported apart; the override 0 reproduces
    // torch.cuda.max_memory_allocated() (reserved == allocated).
    CHECK(adam.reserved() > adam.allocated);
    s.setup.fragmentation_fraction = 0;
    const MemoryBreakdown zero = estimate_memory(s).peak();
    CHECK(zero.reserved() == zero.allocated);
}

TEST_CASE("stacks: every stack has a complete row; a broken row names its key", "[stacks][policy][bad-input]") {
    const EnumTable& names = enum_table<Stack>();
    for (const EnumEntry& e : names.entries) {
        CAPTURE(e.name);
        const StackConventions& c = policy().stack(static_cast<Stack>(e.value));
        CHECK(c.loss_logit_copies + c.loss_fp32_copies > 0);
        CHECK_FALSE(c.loss.empty());
        CHECK_FALSE(c.norms.empty());
    }
    std::string text = embedded_defaults_toml();
    const std::string row = "[stack.unsloth]\nloss_logit_copies = 1\n";
    REQUIRE(text.find(row) != std::string::npos);
    text.replace(text.find(row), row.size(), "[stack.unsloth]\nloss_logit_copies = -1\n");
    const auto p = Policy::parse(text, "defaults.toml");
    REQUIRE_FALSE(p.has_value());
    CHECK(p.error().diagnostics.at(0).key == "stack.unsloth.loss_logit_copies");
    CHECK(p.error().diagnostics.at(0).line > 0);
    // The engine a row names must be a framework the tool knows.
    std::string text2 = embedded_defaults_toml();
    const std::string eng = "framework = \"pytorch-amp\"\nzero_framework = \"deepspeed\"\n";
    REQUIRE(text2.find(eng) != std::string::npos);
    text2.replace(text2.find(eng), eng.size(), "framework = \"pytorch\"\nzero_framework = \"deepspeed\"\n");
    const auto p2 = Policy::parse(text2, "defaults.toml");
    REQUIRE_FALSE(p2.has_value());
    const Diagnostic& d2 = p2.error().diagnostics.at(0);
    CHECK(d2.key == "stack.hf-peft.framework");
    CHECK(d2.line > 0);
    CHECK(d2.message == "stack.hf-peft.framework = \"pytorch\" is not one of: " + enum_table<Framework>().allowed());
    // A row with a base takes every key it does not set from that row: Megatron-Core
    // 0.7 differs from the newer Megatron-Core only in its loss (cross_entropy.py).
    const StackConventions& core = policy().stack(Stack::MegatronCore);
    const StackConventions& old = policy().stack(Stack::MegatronCore07);
    CHECK(old.loss_fp32_copies == 2);
    CHECK(core.loss_fp32_copies == 1);
    CHECK(old.fused_swiglu == core.fused_swiglu);
    CHECK(old.expandable_segments == core.expandable_segments);
    CHECK(old.norms == core.norms);
    CHECK(old.framework == core.framework);
    // A base that names no row is bad data naming its key.
    std::string text3 = embedded_defaults_toml();
    const std::string b = "base = \"megatron-core\"\n";
    REQUIRE(text3.find(b) != std::string::npos);
    text3.replace(text3.find(b), b.size(), "base = \"megatron-core-9\"\n");
    const auto p3 = Policy::parse(text3, "defaults.toml");
    REQUIRE_FALSE(p3.has_value());
    CHECK(p3.error().diagnostics.at(0).key == "stack.megatron-core-0.7.base");
    CHECK(p3.error().diagnostics.at(0).line > 0);
}

TEST_CASE("stacks: framework = megatron without a stack keeps Megatron's kernels; explicit stack wins", "[stacks][schema]") {
    const std::string base = "[model]\npreset = \"llama-2-7b\"\n[hardware]\ngpu = \"a100-sxm-80gb\"\n[training]\nframework = \"megatron\"\n";
    auto in = parse_scenario_toml(base, "old.toml");
    REQUIRE(in.has_value());
    auto s = resolve_scenario(*in, tp_test::presets());
    REQUIRE(s.has_value());
    CHECK(s->setup.stack == Stack::MegatronCore);
    auto in2 = parse_scenario_toml(base + "stack = \"hf-peft\"\n", "new.toml");
    REQUIRE(in2.has_value());
    auto s2 = resolve_scenario(*in2, tp_test::presets());
    REQUIRE(s2.has_value());
    CHECK(s2->setup.stack == Stack::HfPeft);
    // No framework, no stack: the generic eager default.
    auto in3 = parse_scenario_toml("[model]\npreset = \"llama-2-7b\"\n[hardware]\ngpu = \"a100-sxm-80gb\"\n", "plain.toml");
    REQUIRE(in3.has_value());
    auto s3 = resolve_scenario(*in3, tp_test::presets());
    REQUIRE(s3.has_value());
    CHECK(s3->setup.stack == Stack::GenericEager);
    // Aliases: "nemo" and "megatron-lm" name the Megatron stack.
    CHECK(enum_table<Stack>().parse("nemo") == static_cast<int>(Stack::MegatronCore));
}

TEST_CASE("stacks: a stack named without a framework keeps its own engine's bookkeeping", "[stacks][schema][memory]") {
    auto resolve = [](const std::string& training, int gpus = 8) {
        auto in = parse_scenario_toml("[model]\npreset = \"llama-2-7b\"\n[hardware]\ngpu = \"a100-sxm-80gb\"\ngpus = " +
                                          std::to_string(gpus) + "\n[training]\n" + training,
                                      "s.toml");
        REQUIRE(in.has_value());
        auto s = resolve_scenario(*in, tp_test::presets());
        REQUIRE(s.has_value());
        return *s;
    };
    // The transformers Trainer autocasts over fp32 weights (DDP, FSDP) and hands
    // ZeRO to DeepSpeed's engine; LitGPT, torchtitan and torchtune autocast or
    // shard with FSDP; Megatron keeps fp32 main gradients.
    CHECK(resolve("stack = \"hf-peft\"\n").setup.framework == Framework::PyTorchAMP);
    CHECK(resolve("stack = \"hf-peft\"\nzero = 2\n").setup.framework == Framework::DeepSpeed);
    CHECK(resolve("stack = \"hf-peft\"\nfsdp = \"full-shard\"\n").setup.framework == Framework::PyTorchAMP);
    CHECK(resolve("stack = \"torchtitan\"\n").setup.framework == Framework::PyTorchAMP);
    CHECK(resolve("stack = \"megatron-legacy\"\n").setup.framework == Framework::Megatron);
    CHECK(resolve("stack = \"deepspeed\"\n").setup.framework == Framework::DeepSpeed);
    CHECK(resolve("").setup.framework == Framework::DeepSpeed);  // generic-eager: the DeepSpeed default
    CHECK(resolve("stack = \"hf-peft\"\nframework = \"deepspeed\"\n").setup.framework == Framework::DeepSpeed);  // explicit wins
    // What it changes, by hand: Llama-2-7B (6,738,415,616 parameters) full fine-tune,
    // bf16-mixed AdamW on one GPU. torch.autocast keeps fp32 weights and gradients
    // and AdamW's two fp32 moments (4 + 4 + 8 B) plus its cast cache's 16-bit copy
    // of each weight for the step (2 B); DeepSpeed's engine keeps 16-bit weights and
    // gradients and an fp32 master copy with the moments (2 + 2 + 12 B): 2 B per
    // parameter more under the transformers Trainer's own autocast.
    auto states = [&](const std::string& training) {
        const MemoryBreakdown m = estimate_memory(resolve(training, 1)).peak();
        return m.weights + m.all_gradients() + m.optimizer;
    };
    CHECK(states("stack = \"hf-peft\"\n") - states("stack = \"hf-peft\"\nframework = \"deepspeed\"\n") ==
          Approx(2.0 * 6'738'415'616).epsilon(1e-3));
}

TEST_CASE("stacks: an unknown stack is bad input naming the file, line, key and the choices", "[stacks][bad-input]") {
    const auto in = parse_scenario_toml("[model]\npreset = \"llama-2-7b\"\n[training]\nstack = \"keras\"\n", "bad.toml");
    REQUIRE_FALSE(in.has_value());
    const Diagnostic& d = in.error().diagnostics.at(0);
    CHECK(d.file == "bad.toml");
    CHECK(d.line == 4);
    CHECK(d.key == "stack");
    CHECK(d.message.find("keras") != std::string::npos);
    CHECK(d.message.find("hf-peft") != std::string::npos);
    const auto r = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--stack", "keras"});
    CHECK(r.code == 2);
}

TEST_CASE("stacks: fit and simulate print the stack and the conventions assumed", "[stacks][cli]") {
    for (const char* cmd : {"fit", "simulate"}) {
        CAPTURE(cmd);
        const auto r = tp_test::cli({cmd, "llama-2-7b", "--gpu", "a100-sxm-80gb", "--stack", "hf-peft"});
        INFO(r.err);
        REQUIRE((r.code == 0 || r.code == 1));
        CHECK(r.out.find("assumes: stack hf-peft: loss logits upcast .float()") != std::string::npos);
        CHECK(r.out.find("allocator caching allocator") != std::string::npos);
    }
}

TEST_CASE("stacks: the assumes line names the eager layer's K/V repeat, output copy and norm save", "[stacks][cli]") {
    // LitGPT's CausalSelfAttention expands K / V to the query heads before SDPA and
    // transposes the output back through a copy; its RMSNorm multiplies the weight
    // by the 16-bit normalized input, which autograd keeps when the weight trains.
    // Llama-3-8B has 8 K/V heads for 32 query heads; Llama-2-7B has no GQA.
    const auto gqa = tp_test::cli({"fit", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--stack", "litgpt"});
    REQUIRE((gqa.code == 0 || gqa.code == 1));
    CHECK(gqa.out.find("K and V repeated to all 32 query heads") != std::string::npos);
    CHECK(gqa.out.find("attention output transposed back through a copy") != std::string::npos);
    CHECK(gqa.out.find("each RMSNorm keeps its 2-byte normalized input") != std::string::npos);
    // Multi-head attention has nothing to repeat; LoRA freezes the norm weights.
    const auto mha = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--stack", "litgpt", "--method", "lora"});
    REQUIRE((mha.code == 0 || mha.code == 1));
    CHECK(mha.out.find("K and V repeated") == std::string::npos);
    CHECK(mha.out.find("normalized input for its weight") == std::string::npos);
    CHECK(mha.out.find("attention output transposed back") != std::string::npos);
    // torchtune's MultiHeadAttention expands K / V too (every release; attention.py).
    const auto tt = tp_test::cli({"fit", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--stack", "torchtune"});
    REQUIRE((tt.code == 0 || tt.code == 1));
    CHECK(tt.out.find("K and V repeated to all 32 query heads") != std::string::npos);
    // Megatron's fused kernels keep none of the three.
    const auto mc = tp_test::cli({"fit", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--stack", "megatron-core"});
    REQUIRE((mc.code == 0 || mc.code == 1));
    CHECK(mc.out.find("K and V repeated") == std::string::npos);
    CHECK(mc.out.find("transposed back through a copy") == std::string::npos);
    CHECK(mc.out.find("normalized input for its weight") == std::string::npos);
}

TEST_CASE("stacks: the assumes line says when AdamW runs torch's foreach path", "[stacks][cli][optimizer]") {
    // HF Trainer's default optim "adamw_torch" under autocast (framework
    // pytorch-amp) runs the foreach path; DeepSpeed's engine steps its own fused
    // Adam whatever the stack; torchtitan's optimizer is fused.
    auto out = [](std::vector<std::string> extra) {
        std::vector<std::string> a{"simulate", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--seq-len", "512"};
        a.insert(a.end(), extra.begin(), extra.end());
        return tp_test::cli(a).out;
    };
    const std::string foreach_note = "AdamW foreach (one memory pass per op)";
    CHECK(out({"--stack", "hf-peft", "--framework", "pytorch-amp"}).find(foreach_note) != std::string::npos);
    CHECK(out({"--stack", "hf-peft", "--framework", "deepspeed"}).find(foreach_note) == std::string::npos);
    CHECK(out({"--stack", "torchtitan", "--framework", "pytorch-amp"}).find(foreach_note) == std::string::npos);
}

TEST_CASE("stacks: the layer recomputed in backward reuses the loss's freed logits blocks", "[stacks][memory]") {
    // Llama-2-7B, one GPU, hf-peft, s = 4096, b = 1, full recompute. The loss's
    // logits-sized tensors (4096 x 32000 x 12 B = 1.57 GB) are freed by the loss's
    // backward before the first layer is recomputed, so the peak carries
    // max(logits, one recomputed layer), not their sum.
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.setup.stack = Stack::HfPeft;
    s.setup.seq_len = 4096;
    s.setup.recompute = Recompute::Full;
    const MemoryBreakdown m = estimate_memory(s).peak();
    CHECK(m.logits == Approx(4096.0 * 32000 * 12));
    const StepGraph g = build_step_graph(s.model, s.setup);
    const double layer = g.stored_none.bytes(4096, 1, 1, false);
    // One GPU, no ZeRO, no buckets: the only temporary is the recomputed layer.
    CHECK(m.logits + m.temporary == Approx(std::max(m.logits, layer)));
}

TEST_CASE("PEFT modules_to_save: a trained copy of the embedding and LM head beside the frozen originals", "[stacks][memory][lora]") {
    // Llama-2-7B: untied embedding and head, 2 x 32000 x 4096 = 262,144,000 params.
    // peft ModulesToSaveWrapper keeps the frozen original and deep-copies the module
    // (16-bit, like the loaded base); torch.optim.AdamW's states are zeros_like(param)
    // (16-bit m and v). Per copied parameter: 2 B weight + 2 B gradient + 4 B states.
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.setup.method = Method::LoRA;
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.stack = Stack::HfPeft;
    const MemoryEstimate off = estimate_memory(s);
    s.setup.lora.train_embeddings = true;
    const MemoryEstimate on = estimate_memory(s);
    const double n = 2.0 * 32000 * 4096;
    CHECK(on.trainable_params - off.trainable_params == static_cast<std::int64_t>(n));
    CHECK(on.total_params - off.total_params == static_cast<std::int64_t>(n));
    CHECK(on.peak().weights - off.peak().weights == Approx(2 * n));
    CHECK(on.peak().all_gradients() - off.peak().all_gradients() == Approx(2 * n));
    CHECK(on.peak().optimizer - off.peak().optimizer == Approx(4 * n));
    // Under DeepSpeed's bookkeeping the copy gets the fp32 master and fp32 m, v: 12 B.
    s.setup.framework = Framework::DeepSpeed;
    s.setup.lora.train_embeddings = false;
    const MemoryEstimate ds_off = estimate_memory(s);
    s.setup.lora.train_embeddings = true;
    CHECK(estimate_memory(s).peak().optimizer - ds_off.peak().optimizer == Approx(12 * n));
    // The flag reaches the scenario through the schema.
    const auto r = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--method", "lora", "--train-embeddings", "on", "--json"});
    REQUIRE((r.code == 0 || r.code == 1));
    CHECK(r.out.find("\"train_embeddings\"") != std::string::npos);
}

// llama-recipes PR #41's setup: Llama-2-7B LoRA (r 8 on q, v), pure bf16, FSDP full
// shard over 4 x A100 40GB, full recompute, eager attention, b = 4, s = 2048.
static Scenario pr41_scenario() {
    Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu("a100-sxm-40gb");
    s.cluster.num_gpus = 4;
    s.cluster.gpus_per_node = 4;
    s.setup.stack = Stack::HfPeft;
    s.setup.method = Method::LoRA;
    s.setup.precision = Precision::BF16;
    s.setup.lora.rank = 8;
    s.setup.lora.targets = kLoraQ | kLoraV;
    s.setup.fsdp = FsdpStrategy::FullShard;
    s.setup.zero_stage = 3;  // what --fsdp full-shard sets
    s.setup.layout.dp = 4;
    s.setup.recompute = Recompute::Full;
    s.setup.flash_attention = false;
    s.setup.seq_len = 2048;
    s.setup.micro_batch = 4;
    return s;
}

TEST_CASE("FSDP1 holds a frozen unit's input gradient to backward's end under reentrant checkpointing", "[stacks][memory][fsdp]") {
    // torch FSDP (>= 2.1) registers a reshard-only multi-grad hook on the inputs of a
    // unit whose parameters are all frozen and keeps it until _finalize_params; under
    // reentrant checkpointing each input is a leaf rerun in backward, whose
    // AccumulateGrad node the hook keeps, and with it the .grad written into it.
    // When layer 0 is rebuilt, layers 1..31's input gradients are all held:
    // Llama-2-7B, bf16 (2 B), one sequence of 2,048 tokens per GPU:
    //   31 x 4,096 x 2 B x 2,048 = 520,093,696 B.
    // (Flash attention and Liger's loss: no freed logits hide the working set.)
    Scenario s = pr41_scenario();
    s.setup.flash_attention = true;
    s.setup.fused_linear_ce = true;
    s.setup.micro_batch = 1;
    auto temporary = [&](bool reentrant) {
        s.setup.checkpoint_reentrant = reentrant;
        return estimate_memory(s).peak().temporary;
    };
    CHECK(temporary(true) - temporary(false) == Approx(520093696.0).epsilon(1e-9));
    // The stack's default: transformers' gradient_checkpointing_enable is reentrant.
    s.setup.checkpoint_reentrant.reset();
    CHECK(reentrant_checkpointing(s.setup));
    CHECK(estimate_memory(s).peak().temporary == Approx(temporary(true)).epsilon(1e-12));
    // A unit that holds adapters beside its frozen weights (LitGPT's Block wrapping)
    // gets the ordinary post-backward hooks: nothing is held.
    s.setup.stack = Stack::LitGPT;
    CHECK(temporary(true) == Approx(temporary(false)).epsilon(1e-12));
    // Full fine-tuning: no unit is frozen.
    s.setup.stack = Stack::HfPeft;
    s.setup.method = Method::Full;
    CHECK(temporary(true) == Approx(temporary(false)).epsilon(1e-12));
}

TEST_CASE("held outputs: logits and past_key_values kept through backward (llama-recipes PR #41)", "[stacks][memory]") {
    // Llama-2-7B LoRA (q,v), pure bf16, FSDP full shard over 4 ranks, full
    // recompute, eager attention, b = 4, s = 2048: llama-recipes PR #41's setup.
    // What the loop holds (transformers LlamaForCausalLM, use_cache on):
    //   logits.float(): 4 x 2048 x 32000 x 4 B          = 1,048,576,000 B
    //   past_key_values: 32 layers x (K + V) x 4 x 2048 x 4096 x 2 B = 4,294,967,296 B
    //   together 5,343,543,296 B = 4.977 GiB; PR #41 measured peak active
    //   20.20 GB holding them vs 15.22 GB not: 4.98 (PyTorch's GB = GiB).
    Scenario s = pr41_scenario();
    const MemoryBreakdown none = estimate_memory(s).peak();
    const double logits = 4.0 * 2048 * 32000 * 4;
    const double kv = 32.0 * 2 * 4 * 2048 * 4096 * 2;
    CHECK(logits + kv == Approx(5343543296.0));
    s.setup.held_outputs = HeldOutputs::LogitsKv;
    const MemoryBreakdown held = estimate_memory(s).peak();
    s.setup.held_outputs = HeldOutputs::Logits;
    const MemoryBreakdown logits_only = estimate_memory(s).peak();
    // The K/V cache lives from forward to the step's end: it adds in full.
    CHECK(held.allocated - logits_only.allocated == Approx(kv).epsilon(1e-9));
    // The held fp32 logits add to the backward phase (the recomputed layer);
    // the loss's own 12 B/logit peak may still dominate: between 0 and all of it.
    CHECK(logits_only.allocated - none.allocated >= 0);
    CHECK(logits_only.allocated - none.allocated <= logits * (1 + 1e-9));
    // Against PR #41: 4.98 GiB more active memory with both held.
    CHECK(held.allocated - none.allocated == Approx(4.98 * units::GiB).epsilon(0.01));
}

TEST_CASE("FSDP without its all-gather limiter: the host runs a launch queue ahead, holding each gathered layer", "[stacks][memory]") {
    // Llama-2-7B LoRA (r 8 on q, v, dropout 0.05) under transformers + PEFT, eager
    // attention. Forward kernels of one layer, counted from the code: two
    // LlamaRMSNorms x 8; q, k, v 3; two adapters x (dropout, A, B, * scaling, +=) 5;
    // rotary 14; scores 3 (matmul, / sqrt(d), + mask); fp32 softmax 2; P x V 1;
    // o_proj 1; residual add 1; gate and up 2; SiLU 1; multiply 1; down 1;
    // residual add 1: 57.
    Scenario s = pr41_scenario();
    const StepGraph g = build_step_graph(s.model, s.setup);
    CHECK(g.launches[static_cast<int>(Site::Layer)] == 57);
    const MemoryBreakdown limited = estimate_memory(s).peak();
    s.setup.fsdp_limit_all_gathers = false;
    const MemoryBreakdown unlimited = estimate_memory(s).peak();
    // A 1,024-entry queue holds ceil(1024 / 57) = 18 layers' launches: with the one
    // running, 19 layers gathered instead of the limiter's 2, each 202,383,360 bf16
    // parameters (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) plus its adapters.
    const double layer_bytes = 202383360.0 * 2;
    CHECK(unlimited.active() - limited.active() == Approx(17 * layer_bytes).epsilon(0.002));
    // They are freed already (record_stream): active and reserved, not allocated.
    CHECK(unlimited.allocated == Approx(limited.allocated).epsilon(1e-12));
    CHECK(unlimited.reserved() - limited.reserved() == Approx(17 * layer_bytes).epsilon(0.002));
    // PR #41 (llama-recipes) measured 25.86 GiB peak active with the limiter off and
    // 20.2 GiB with it on: 5.66 GiB (6.08 GB) more; the queue model gives 6.9 GB.
    CHECK(unlimited.active() - limited.active() == Approx(5.66 * units::GiB).epsilon(0.15));
    // On a card with room for 1 GB of them the allocator takes the rest back
    // before it would fail: the run fits, holding 1 GB of them.
    s.cluster.gpu.capacity_bytes = unlimited.total - unlimited.gathered_ahead + 1e9;
    const MemoryBreakdown tight = estimate_memory(s).peak();
    CHECK(tight.fits());
    CHECK(tight.gathered_ahead == Approx(1e9).epsilon(1e-6));
    // A stack that fuses the norms, RoPE and SwiGLU launches fewer kernels per layer
    // and so runs more layers ahead.
    s.setup.stack = Stack::Unsloth;
    CHECK(build_step_graph(s.model, s.setup).launches[static_cast<int>(Site::Layer)] < 57);
}

TEST_CASE("PEFT's LoRA under autocast over fp32 adapters: the input cast to fp32 and back, and autocast's weight casts", "[stacks][time][memory]") {
    // Llama-2-7B LoRA r 8 on q and v (d_in 4096) under transformers' Trainer with
    // --bf16: torch.autocast over fp32 adapters. peft v0.5.0 tuners/lora.py
    // Linear.forward per adapted module: the base F.linear; `x = x.to(lora_A.weight
    // .dtype)` (an fp32 copy, 1 kernel); dropout on it; lora_A, whose fp32 input
    // autocast casts back to bf16 (1) and whose fp32 weight it casts once per
    // autocast region (1); lora_B, its weight cast (1); * scaling; +=. Against
    // pure bf16 (adapters in bf16: no cast at all): 2 modules x 4 = 8 more forward
    // kernels per layer.
    Scenario amp = hf_llama7b("a100-sxm-80gb", Method::LoRA, Precision::BF16Mixed, 2048);
    amp.setup.framework = Framework::PyTorchAMP;
    Scenario pure = amp;
    pure.setup.precision = Precision::BF16;
    const StepGraph ga = build_step_graph(amp.model, amp.setup);
    const StepGraph gp = build_step_graph(pure.model, pure.setup);
    const int layer = static_cast<int>(Site::Layer);
    CHECK(ga.launches[layer] - gp.launches[layer] == 8);
    // The two casts read and write per input element 2 + 4 and 4 + 2 bytes: 12 x 4096
    // per token, once for each adapted module.
    int casts = 0;
    for (const OpDef& o : ga.ops)
        if (o.site == Site::Layer && o.role == OpRole::LoraInputCast) {
            ++casts;
            CHECK(o.hbm_bytes_per_token == Approx(12.0 * 4096));
        }
    CHECK(casts == 2);
    // Without dropout lora_A saves autocast's bf16 copy of the cast input, a tensor
    // of its own (2 B x 4096 per token per module); pure bf16 A saves the base
    // linear's input, already kept.
    amp.setup.lora.dropout = 0;
    pure.setup.lora.dropout = 0;
    const double stored_amp = build_step_graph(amp.model, amp.setup).stored(Recompute::None).bytes(2048, 1, 1, false);
    const double stored_pure = build_step_graph(pure.model, pure.setup).stored(Recompute::None).bytes(2048, 1, 1, false);
    CHECK(stored_amp - stored_pure == Approx(2 * 2.0 * 4096 * 2048));
    // FSDP's mixed-precision all-gather hands the adapters over in bf16, and a
    // DeepSpeed engine casts the model: no casts (the launches of pure bf16).
    // (Both without dropout here.)
    Scenario fsdp = amp;
    fsdp.setup.fsdp = FsdpStrategy::FullShard;
    CHECK(build_step_graph(fsdp.model, fsdp.setup).launches[layer] == build_step_graph(pure.model, pure.setup).launches[layer]);
    // Another LoRA implementation under the same autocast (LitGPT's, torchtune's)
    // casts no input but still has autocast cast its fp32 matrices: 2 x 2 more.
    Scenario lit = amp;
    lit.setup.stack = Stack::LitGPT;
    Scenario lit_pure = lit;
    lit_pure.setup.precision = Precision::BF16;
    CHECK(build_step_graph(lit.model, lit.setup).launches[layer] - build_step_graph(lit_pure.model, lit_pure.setup).launches[layer] == 4);
}

TEST_CASE("host dispatch: a micro-batch the GPU runs faster than eager code can launch it waits on the host", "[stacks][time]") {
    // The same layer as above (57 forward launches); the ends: embedding 1; final
    // RMSNorm 8, LM head 1, upcast cross-entropy 5. One micro-batch launches
    // 32 x 57 + 1 + 14 = 1,839 forward kernels, each with its [host] forward issue
    // time and backward issue time (20 + 10 us today: 55.17 ms).
    Scenario s = hf_llama7b("h100-sxm", Method::LoRA, Precision::BF16, 16);
    s.setup.recompute = Recompute::None;
    s.setup.flash_attention = false;
    const StepGraph g = build_step_graph(s.model, s.setup);
    CHECK(g.launches[static_cast<int>(Site::First)] + g.launches[static_cast<int>(Site::Last)] == 15);
    const double fwd = policy().forward_launch_s, bwd = policy().backward_launch_s;
    TimeEstimate te = estimate_time(s);
    CHECK(te.time.compute_s == Approx(1839 * (fwd + bwd)).epsilon(1e-6));
    CHECK(te.time.host_s > 0.5 * te.time.compute_s);  // 16 tokens: mostly waiting
    // Full recompute issues every layer's forward again: + 32 x 57 forward launches.
    s.setup.recompute = Recompute::Full;
    te = estimate_time(s);
    CHECK(te.time.compute_s == Approx(1839 * (fwd + bwd) + 32 * 57 * fwd).epsilon(1e-6));
    // 8 x 4,096 tokens keep the GPU busier than the host: no wait.
    s.setup.seq_len = 4096;
    s.setup.micro_batch = 8;
    CHECK(estimate_time(s).time.host_s == 0);
}

TEST_CASE("DeepSpeed ZeRO-3 fetches and releases every weighted module from Python, forward, recompute and backward", "[stacks][time][zero]") {
    // transformers' Llama-2-7B: per layer input_layernorm, q_proj, k_proj, v_proj,
    // o_proj, post_attention_layernorm, gate_proj, up_proj, down_proj = 9 modules with
    // weights; embed_tokens on the first site, norm and lm_head on the last: 32 x 9 + 3 =
    // 291. Forward and backward fetch each, the recomputed forward the 288 layer ones
    // again: 2 x 291 + 288 = 870 fetch / release pairs per micro-batch.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::Full, Precision::BF16Mixed, 16);
    s.setup.stack = Stack::DeepSpeed;
    s.setup.framework = Framework::DeepSpeed;
    s.setup.zero_stage = 3;
    s.setup.recompute = Recompute::Full;
    s.setup.grad_accum = 4;
    REQUIRE(validate(s).empty());
    const StepGraph g = build_step_graph(s.model, s.setup);
    CHECK(g.weighted_modules[static_cast<int>(Site::Layer)] == 9);
    CHECK(g.weighted_modules[static_cast<int>(Site::First)] + g.weighted_modules[static_cast<int>(Site::Last)] == 3);
    const double hook = policy().zero3_module_hook_s;
    TimeEstimate te = estimate_time(s);
    CHECK(te.time.zero3_hooks_s == Approx(4 * 870 * hook).epsilon(1e-9));
    CHECK(te.time.host_s > 0);  // 16 tokens: the GPU waits on the hooks
    // PyTorch FSDP shards the same way from C++ hooks per wrapped unit: none of this.
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.stack = Stack::HfPeft;
    s.setup.fsdp = FsdpStrategy::FullShard;
    REQUIRE(validate(s).empty());
    CHECK(estimate_time(s).time.zero3_hooks_s == 0);
}

TEST_CASE("Qwen-1.8B full fine-tune under ZeRO-3 on one A100 runs at the hooks' pace: 2.2 s/it published at 512 tokens", "[stacks][time][zero][published]") {
    // QwenLM/Qwen README, 'Profiling of Memory and Speed': Qwen-1.8B full-parameter,
    // one A100-SXM4-80G, batch 1, gradient accumulation 8, DeepSpeed ZeRO-3
    // (finetune_ds.sh): 2.1-2.3 s/it from 256 to 2048 tokens, flat, i.e. a fixed cost
    // per micro-batch, not the ~0.5 s the GPU needs at 512 tokens.
    const std::vector<PublishedRun> runs = [] {
        auto r = published_runs(tp_test::validation_cases(), tp_test::presets());
        REQUIRE(r);
        return *r;
    }();
    const auto it = std::find_if(runs.begin(), runs.end(), [](const PublishedRun& r) { return r.id == "qwen_readme_1.8b_full_s512_time"; });
    REQUIRE(it != runs.end());
    const TimeEstimate te = estimate_time(it->scenario);
    CHECK(te.time.step_s == Approx(2.2).epsilon(0.15));
    CHECK(te.time.host_s > 0.5 * te.time.step_s);
}

TEST_CASE("a GPTQ base linear launches nine dequantizing ops before its matmul, none of them in backward", "[stacks][time]") {
    // auto-gptq qlinear_cuda_old.py forward (the path GPTQConfig(disable_exllama=True)
    // training takes): zeros bitwise_right_shift, .to(int8), bitwise_and, + 1; weight
    // bitwise_right_shift, .to(int8), bitwise_and; weight - zeros; scales * (...);
    // then the matmul. The same layer as the LoRA one above (57 forward launches, 7
    // base linears: q, k, v, o, gate, up, down) with a GPTQ base: + 7 x 9 = 120.
    // Under bitsandbytes each linear dequantizes in one kernel: 57 + 7 = 64.
    Scenario s = hf_llama7b("h100-sxm", Method::QLoRA, Precision::FP16Mixed, 16);
    s.setup.recompute = Recompute::None;
    s.setup.flash_attention = false;
    s.setup.qlora.quant = QuantType::GPTQ;
    const StepGraph g = build_step_graph(s.model, s.setup);
    CHECK(g.launches[static_cast<int>(Site::Layer)] == 120);
    CHECK(g.forward_only_launches[static_cast<int>(Site::Layer)] == 63);
    // The LM head stays 16-bit: the ends launch as under LoRA (1 + 14).
    CHECK(g.launches[static_cast<int>(Site::First)] + g.launches[static_cast<int>(Site::Last)] == 15);
    // 16 tokens on an H100: the host bounds the micro-batch (the GPU's dequantization,
    // 6.5e9 weights x 16.5 B at half its bandwidth, is ~0.08 s). Forward issues 32 x 120 + 15 =
    // 3,855 launches; the autograd engine only the 32 x 57 + 15 = 1,839 with a backward.
    const double fwd = policy().forward_launch_s, bwd = policy().backward_launch_s;
    CHECK(estimate_time(s).time.compute_s == Approx(3855 * fwd + 1839 * bwd).epsilon(1e-6));
    s.setup.qlora.quant = QuantType::NF4;
    CHECK(build_step_graph(s.model, s.setup).launches[static_cast<int>(Site::Layer)] == 64);
    CHECK(build_step_graph(s.model, s.setup).forward_only_launches[static_cast<int>(Site::Layer)] == 0);
}

TEST_CASE("a GPTQ base keeps each layer's dequantized weights for backward, a bitsandbytes one does not", "[stacks][memory]") {
    // auto-gptq's QuantLinear (qlinear_cuda_old) multiplies the input by the
    // dequantized fp16 weight with torch.matmul; the input needs a gradient, so
    // autograd saves that weight until the layer's backward. Llama-2-7B's seven base
    // linears per layer by hand: q, k, v, o 4 x 4096^2 = 67,108,864, gate, up, down
    // 3 x 4096 x 11008 = 135,266,304: 202,375,168 x 2 B = 404,750,336 B per layer;
    // without recompute all 32 layers keep theirs: 12,952,010,752 B. bitsandbytes'
    // MatMul4Bit saves the packed 4-bit weight, already counted in the weights.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::QLoRA, Precision::FP16Mixed, 512);
    s.setup.recompute = Recompute::None;
    auto activations = [&](QuantType q) {
        s.setup.qlora.quant = q;
        return estimate_memory(s).peak().activations;
    };
    CHECK(activations(QuantType::GPTQ) - activations(QuantType::NF4) == Approx(32.0 * 404750336.0).epsilon(1e-9));
    // Under full recompute only the layer rebuilt in backward holds them: no layer
    // keeps them through forward.
    s.setup.recompute = Recompute::Full;
    CHECK(activations(QuantType::GPTQ) == Approx(activations(QuantType::NF4)).epsilon(1e-12));
    // ...and that layer's working set grows by one layer's weights. (Eager attention
    // at 2,048 tokens: the rebuilt layer's s x s tensors, several bytes for each of
    // 32 heads x 2,048 keys per token, outgrow the freed logits it reuses, 12 B for
    // each of the 32,000 vocabulary entries per token: the working set is not
    // hidden in them.)
    s.setup.flash_attention = false;
    s.setup.seq_len = 2048;
    auto temporary = [&](QuantType q) {
        s.setup.qlora.quant = q;
        return estimate_memory(s).peak().temporary;
    };
    // (The s x s gradients come at attention's backward, after the MLP's gradients
    // are gone: they set the layer's peak here, beside the whole layer's weights.)
    CHECK(temporary(QuantType::GPTQ) - temporary(QuantType::NF4) == Approx(404750336.0).epsilon(1e-9));
    // Under FlashAttention the MLP's backward sets it. Its gradients (d(product),
    // d(act), d(up) less the product, fp16: 2 x 11,008 x 2 B x 2,048 tokens =
    // 90,177,536 B) come once the down projection's backward has released its
    // dequantized weight, 4,096 x 11,008 x 2 B = 90,177,536 B as well: under GPTQ they
    // take its place, under NF4 they add. GPTQ - NF4 = 404,750,336 - 90,177,536 =
    // 314,572,800 B. (Liger's fused linear cross-entropy keeps no logits whose
    // freed blocks could hide either working set.)
    s.setup.flash_attention = true;
    s.setup.fused_linear_ce = true;
    CHECK(temporary(QuantType::GPTQ) - temporary(QuantType::NF4) == Approx(314572800.0).epsilon(1e-9));
}

TEST_CASE("stacks: eager RoPE reads and writes q and k ten times forward, a fused rotary kernel twice", "[stacks][time]") {
    // transformers' apply_rotary_pos_emb (q * cos + rotate_half(q) * sin), per
    // bf16 element of q and k: q * cos 2 + 2 B, the neg of one half 1 + 1, the cat
    // 2 + 2, * sin 2 + 2, the sum 4 + 2 = 20 B; a fused kernel reads and writes
    // once, 4 B. Llama-2-7B: q and k are 4,096 elements each per token.
    auto rope = [](const StepGraph& g) {
        for (const OpDef& o : g.ops)
            if (o.role == OpRole::Rope) return o;
        FAIL("no rope op");
        return OpDef{};
    };
    const OpDef eager = rope(graph("llama-2-7b", Stack::HfPeft));
    CHECK(eager.hbm_bytes_per_token == 20.0 * 8192);
    // Backward by hand: grad * cos and grad * sin (4 + 4 B), the neg (2 B), the
    // two halves' slice gradients scattered into zeros (2 x (2 + 1 + 1) B), the
    // three gradients of q summed (2 x 6 B): 30 B, 1.5 x the forward.
    CHECK(eager.hbm_bytes_per_token * eager.bwd_hbm_factor == 30.0 * 8192);
    // flash-attn's rotary (whyNLP/tinyllama TINY_FUSED_ROTARY), Unsloth's Triton
    // kernel, Megatron-Core's fusion: one pass each way.
    for (Stack st : {Stack::HfFused, Stack::Unsloth, Stack::MegatronCore}) {
        CAPTURE(to_string(st));
        CHECK(rope(graph("llama-2-7b", st)).hbm_bytes_per_token == 4.0 * 8192);
    }
    // The launches follow the same convention: fourteen eager (two cos / sin
    // gathers and casts, five ops per tensor), two fused.
    TrainingSetup t;
    t.stack = Stack::HfPeft;
    const ModelSpec m = tp_test::model("llama-2-7b");
    const double eager_launches = build_step_graph(m, t).launches[static_cast<int>(Site::Layer)];
    t.stack = Stack::HfFused;
    const StepGraph fused = build_step_graph(m, t);
    // hf-fused also fuses the RMSNorm (1 launch, not 8, twice per layer).
    CHECK(eager_launches - fused.launches[static_cast<int>(Site::Layer)] == (14 - 2) + 2 * (8 - 1));
}

TEST_CASE("stacks: SwiGLU's element-wise traffic, eager (silu, then a product) and as one fused kernel", "[stacks][time]") {
    // Per token and FFN element of Llama-2-7B (ffn 11,008), in 16-bit passes.
    // Eager (transformers' act_fn(gate) * up): silu reads gate, writes act (2);
    // the product reads act and up, writes it (3). Backward: MulBackward0's two
    // products, each reading two and writing one (6), silu_backward reading
    // d(act) and gate, writing d(gate) (3). A fused kernel (Megatron-Core's swiglu
    // under torch.compile, Liger's, Unsloth's) reads gate and up and writes the
    // product (3); backward reads d(product), gate and up and writes d(gate) and
    // d(up) (5).
    auto swiglu = [](const StepGraph& g) {
        double fwd = 0, bwd = 0;
        for (const OpDef& o : g.ops)
            if (o.role == OpRole::ActFn || o.role == OpRole::ActMul) {
                fwd += o.hbm_bytes_per_token;
                bwd += o.hbm_bytes_per_token * o.bwd_hbm_factor;
            }
        return std::pair{fwd, bwd};
    };
    const double f2 = 11008.0 * 2;
    const auto eager = swiglu(graph("llama-2-7b", Stack::HfPeft));
    CHECK(eager.first == Approx(5 * f2));
    CHECK(eager.second == Approx(9 * f2));
    for (Stack st : {Stack::MegatronCore, Stack::Unsloth}) {
        CAPTURE(to_string(st));
        const auto fused = swiglu(graph("llama-2-7b", st));
        CHECK(fused.first == Approx(3 * f2));
        CHECK(fused.second == Approx(5 * f2));
    }
    // xformers' packed op where DeepSpeed ZeRO-2 flattens the weights (swiglu_op.py
    // _SwiGLUFusedFunc): forward writes the product from the dual GEMM's epilogue
    // (1); backward's silu_bw_fused reads gate, up and d(product) and writes
    // d(gate), d(up) and the product again (6).
    TrainingSetup t;
    t.stack = Stack::HfFused;
    t.framework = Framework::DeepSpeed;
    t.zero_stage = 2;
    REQUIRE(swiglu_kernel(t) == SwigluKernel::PackedFused);
    const auto packed = swiglu(build_step_graph(tp_test::model("llama-2-7b"), t));
    CHECK(packed.first == Approx(1 * f2));
    CHECK(packed.second == Approx(6 * f2));
}

TEST_CASE("stacks: the loss's HBM traffic per logit, kernel by kernel of each stack's loss code", "[stacks][time]") {
    auto loss = [](const StepGraph& g) {
        for (const OpDef& o : g.ops)
            if (o.role == OpRole::Loss) return o;
        FAIL("no loss op");
        return OpDef{};
    };
    const double V = 128256;  // Llama-3-8B
    // Megatron's vocab_parallel_cross_entropy on output.float(), by hand (bytes
    // per logit at bf16): the cast reads 2 and writes 4; torch.max reads 4; the
    // maximum subtracted reads and writes 4 + 4; torch.exp into the buffer 4 + 4;
    // the sum reads 4; div_ 4 + 4: 38 B. Backward: grad_input.mul_ 4 + 4 and the
    // cast's backward 4 + 2: 14 B.
    const OpDef mc = loss(graph("llama-3-8b", Stack::MegatronCore));
    CHECK(mc.hbm_bytes_per_token == Approx(38.0 * V));
    CHECK(mc.hbm_bytes_per_token * mc.bwd_hbm_factor == Approx(14.0 * V));
    // transformers before 4.46: logits.float() 2 + 4, the shifted .contiguous()
    // copy 4 + 4, log_softmax 4 + 4 (nll gathers one logit a row): 22 B.
    // Backward: nll's zero-filled gradient 4, log_softmax's 4 + 4 + 4, the
    // slice's zero-filled gradient and the copy into it 4 + 4 + 4, the cast's
    // 4 + 2: 34 B.
    const OpDef hf = loss(graph("llama-3-8b", Stack::HfPeft));
    CHECK(hf.hbm_bytes_per_token == Approx(22.0 * V));
    CHECK(hf.hbm_bytes_per_token * hf.bwd_hbm_factor == Approx(34.0 * V));
    // A fused cross-entropy kernel on 16-bit logits (flash-attn's in llm-foundry,
    // Unsloth's): one read forward; backward a read and a write: 2 B and 4 B.
    for (Stack st : {Stack::LlmFoundry, Stack::Unsloth}) {
        CAPTURE(to_string(st));
        const OpDef f = loss(graph("llama-3-8b", st));
        CHECK(f.hbm_bytes_per_token == Approx(2.0 * V));
        CHECK(f.hbm_bytes_per_token * f.bwd_hbm_factor == Approx(4.0 * V));
    }
    // Under fp32 training the activation-dtype passes are 4 B too: Megatron's
    // forward is 10 passes of 4 B.
    CHECK(loss(graph("llama-3-8b", Stack::MegatronCore, Precision::FP32)).hbm_bytes_per_token == Approx(40.0 * V));
}

TEST_CASE("paged optimizer: states in unified memory, outside torch's allocated bytes, paged out before an out-of-memory", "[stacks][memory]") {
    // torchtune PR #527 ('Full finetune < 16GB', recipes/configs/7B_full_single_device_low_memory.yaml):
    // Llama-2-7B, pure bf16, bitsandbytes PagedAdamW stepped in backward, activation
    // checkpointing, batch 2. bitsandbytes allocates a paged optimizer's states with
    // cudaMallocManaged (functional.py get_paged), so torch's counters never see them:
    // the PR logs 'GPU peak memory allocation: 13.993540096GB' -- the 13.48 GB of bf16
    // weights and what backward holds, none of the 8 B x 6.74 B = 53.9 GB of AdamW states.
    const double psi = 6'738'415'616.0;  // the Hugging Face checkpoint's count
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::Full, Precision::BF16, 512);
    s.setup.stack = Stack::Torchtune;
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.micro_batch = 2;
    s.setup.recompute = Recompute::Full;
    s.setup.optimizer_in_backward = true;
    const MemoryBreakdown plain = estimate_memory(s).peak();
    CHECK(plain.managed == 0);  // not a QLoRA run: off unless asked for
    s.setup.paged_optimizer = true;
    const MemoryBreakdown paged = estimate_memory(s).peak();
    CHECK(paged.managed == Approx(8.0 * psi).epsilon(1e-9));
    // (bitsandbytes keeps 32-bit states; torch.optim.AdamW's are zeros_like(param),
    // bf16 here: 4 B per parameter that leave torch's count.)
    CHECK(plain.allocated - paged.allocated == Approx(4.0 * psi).epsilon(1e-9));
    CHECK(paged.allocated == Approx(13.99e9).epsilon(0.05));  // the published figure, within 5 %
    // On the device they are still there while it has room (nvidia-smi counts them).
    CHECK(paged.total > paged.allocated + paged.managed);
    // On a 24 GB RTX 4090 the driver evicts what does not fit: the device is full,
    // the rest of the states sit in host memory, and the run fits.
    s.cluster.gpu = tp_test::gpu("rtx-4090");
    const MemoryBreakdown small = estimate_memory(s).peak();
    CHECK(small.fits());
    CHECK(small.total == Approx(small.capacity).epsilon(1e-9));
    CHECK(small.paged_out + small.managed == Approx(8.0 * psi).epsilon(1e-9));
    CHECK(small.cpu >= small.paged_out);
    CHECK(small.allocated == Approx(paged.allocated).epsilon(1e-9));
    // Those resident pages are the driver's to evict under pressure (the paged
    // optimizer's purpose): what the run could still take is all of them.
    CHECK(small.headroom() == Approx(small.managed).epsilon(1e-9));
    // Each step touches every state: the paged-out ones come in over PCIe and go
    // back out dirty, twice their bytes at the copy rate, the step's offload term.
    const TimeBreakdown paging = estimate_time(s).time;
    CHECK(paging.paging_s == Approx(2.0 * small.paged_out / policy().pcie_bytes_per_s(s.cluster.gpu.pcie_gen)).epsilon(1e-9));
    CHECK(paging.offload_s == Approx(paging.paging_s).epsilon(1e-12));  // nothing else offloaded
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    CHECK(estimate_time(s).time.offload_s == 0);  // nothing paged out on the 80 GB card
    s.cluster.gpu = tp_test::gpu("rtx-4090");
    // Unpaged, the same states make it an out-of-memory by about their size.
    s.setup.paged_optimizer = false;
    CHECK_FALSE(estimate_memory(s).peak().fits());
    // Paged but with the 13.48 GB of whole-model gradients (no step in backward) it
    // does not fit the 4090 either; fit then offers torchtune's own answer, the step
    // in backward, alone: one tensor's gradient resident, the 32,000 x 4,096 bf16
    // embedding's 0.262 GB, and the states paged in beside the rest.
    s.setup.paged_optimizer = true;
    s.setup.optimizer_in_backward = false;
    const FitReport rep = check_fit(s, 20);
    REQUIRE_FALSE(rep.fits);
    const auto it = std::find_if(rep.remedies.begin(), rep.remedies.end(),
                                 [](const Remedy& r) { return r.title == "optimizer step in backward"; });
    REQUIRE(it != rep.remedies.end());
    CHECK(it->changes == std::vector<std::string>{"optimizer_in_backward: off -> on"});
    CHECK(it->memory.gradients == Approx(32000.0 * 4096 * 2).epsilon(1e-9));
    CHECK(it->memory.fits());
    // No time of its own; it is faster, as the room the gradients leave keeps
    // 10.7 GB of the states resident that the original pages in and out each step.
    CHECK(it->memory.paged_out < rep.estimate.peak().paged_out - 10e9);
    CHECK(it->slowdown < 0);
}

TEST_CASE("paged optimizer default: QLoRA's recipe pages, a DeepSpeed ZeRO engine does not (it builds its own optimizer)", "[stacks][schema]") {
    // artidoro/qlora passes optim=paged_adamw_32bit; under DeepSpeed ZeRO the engine builds
    // its optimizer from the config's "optimizer" block (Qwen's finetune_qlora_*.sh with
    // ds_config_zero2.json), so nothing is paged. The method's recipe must not pin it on.
    const std::string base = "[model]\npreset = \"llama-2-7b\"\n[hardware]\ngpu = \"a100-sxm-80gb\"\n[training]\nmethod = \"qlora\"\n";
    for (const auto& [extra, paged] : std::vector<std::pair<std::string, bool>>{
             {"", true}, {"framework = \"deepspeed\"\nzero = 2\n", false}, {"framework = \"deepspeed\"\nzero = 2\npaged_optimizer = true\n", true}}) {
        auto in = parse_scenario_toml(base + extra, "qlora.toml");
        REQUIRE(in.has_value());
        auto s = resolve_scenario(*in, tp_test::presets());
        REQUIRE(s.has_value());
        CHECK(paged_optimizer_on(s->setup) == paged);
        CHECK((estimate_memory(*s).peak().managed > 0) == paged);
    }
}

TEST_CASE("optimizer in backward: one tensor's gradient is resident, not the model's (torchtune optimizer_in_bwd)", "[stacks][memory]") {
    // Llama-3-8B pure bf16 (torchtune's single-device full fine-tune): gradients are 2 B
    // per parameter. Without the hook: 8,030,261,248 x 2 B = 16.06 GB. With it each
    // gradient is stepped and freed in backward; the largest tensor is the untied
    // embedding / LM head, 128,256 x 4,096 = 525,336,576 params: 1.0507 GB.
    Scenario s;
    s.model = tp_test::model("llama-3-8b");
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.setup.precision = Precision::BF16;
    s.setup.framework = Framework::PyTorchAMP;
    const double off = estimate_memory(s).peak().all_gradients();
    CHECK(off == Approx(8030261248.0 * 2).epsilon(0.001));
    s.setup.optimizer_in_backward = true;
    CHECK(estimate_memory(s).peak().gradients == Approx(128256.0 * 4096 * 2).epsilon(0.001));
    // Weights and optimizer states are unchanged: only the gradient set goes.
    // With tp = 2 the largest tensor is split too (vocabulary-parallel head).
    s.cluster.num_gpus = 2;
    s.cluster.gpus_per_node = 2;
    s.setup.layout.tp = 2;
    CHECK(estimate_memory(s).peak().gradients == Approx(128256.0 * 4096 * 2 / 2).epsilon(0.001));
    // torchtune refuses gradient accumulation with it: exit 2 naming the key.
    const auto r = tp_test::cli({"fit", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--optimizer-in-backward", "on", "--grad-accum", "4"});
    CHECK(r.code == 2);
    CHECK(r.err.find("optimizer_in_backward") != std::string::npos);
    CHECK(r.err.find("grad_accum = 4") != std::string::npos);
}

TEST_CASE("stacks: transformers' eager attention keeps the fp32 softmax output and its 16-bit cast", "[stacks][memory][activations]") {
    // transformers LlamaAttention (eager path): `softmax(attn_weights, dim=-1,
    // dtype=torch.float32).to(query_states.dtype)`. Autograd keeps softmax's fp32
    // result for its backward (PyTorch derivatives.yaml, _softmax: uses `result`)
    // and matmul(probs, V) keeps the bf16 cast. A 16-bit softmax keeps one 2 B
    // tensor for both. Llama-2-7B: 32 heads, b = 1, s = 2048, t = 1, no dropout:
    // the fp32 copy adds 4 B x 32 x 2048^2 = 536,870,912 B (0.54 GB) per layer.
    auto layer = [](Stack st, bool flash) { return graph("llama-2-7b", st, Precision::BF16Mixed, flash); };
    const double s = 2048;
    // hf-peft and generic-eager share the norm and SwiGLU conventions (eager
    // RMSNorm fp32 copy, eager SwiGLU): only the softmax's dtype differs.
    const double hf = layer(Stack::HfPeft, false).stored_none.bytes(s, 1, 1, false);
    const double plain = layer(Stack::GenericEager, false).stored_none.bytes(s, 1, 1, false);
    CHECK(hf - plain == Approx(4.0 * 32 * s * s));
    CHECK(4.0 * 32 * s * s == 536870912.0);
    // Split over tensor parallelism like the heads: t = 2 halves it.
    CHECK(layer(Stack::HfPeft, false).stored_none.bytes(s, 1, 2, false) - layer(Stack::GenericEager, false).stored_none.bytes(s, 1, 2, false) ==
          Approx(2.0 * 32 * s * s));
    // Selective recompute regenerates the softmax: nothing of it is stored.
    CHECK(layer(Stack::HfPeft, false).stored_selective.bytes(s, 1, 1, false) ==
          Approx(layer(Stack::GenericEager, false).stored_selective.bytes(s, 1, 1, false)));
    // FlashAttention never materializes the probabilities: no difference.
    CHECK(layer(Stack::HfPeft, true).stored_none.bytes(s, 1, 1, false) == Approx(layer(Stack::GenericEager, true).stored_none.bytes(s, 1, 1, false)));
    // Megatron-Core's fused scale-mask-softmax returns 16-bit probabilities.
    CHECK(policy().stack(Stack::MegatronCore).attn_softmax_fp32 == false);
}

TEST_CASE("stacks: eager attention's backward holds the s x s gradients of the probabilities and scores", "[stacks][memory][activations]") {
    // Backward of P x V writes dL/dP in the probabilities' 16-bit dtype; transformers'
    // fp32 softmax casts it to fp32 (ToCopy backward) and softmax backward writes
    // dL/dscores in the input's 16-bit dtype (aten _softmax_backward_data with
    // input_dtype). Both exist at once: Llama-2-7B, 32 heads, bf16 (2 B):
    //   transformers (fp32 softmax): (4 + 2) B x 32 x s^2 per sequence;
    //   16-bit softmax:              (2 + 2) B x 32 x s^2.
    auto g = [](Stack st, bool flash) { return graph("llama-2-7b", st, Precision::BF16Mixed, flash); };
    const double s = 2048;
    CHECK(g(Stack::HfPeft, false).attn_backward_working.bytes(s, 1, 1, false) == Approx(6.0 * 32 * s * s));
    CHECK(g(Stack::GenericEager, false).attn_backward_working.bytes(s, 1, 1, false) == Approx(4.0 * 32 * s * s));
    // b = 4, t = 2 (heads split): 6 x 32 x 2048^2 x 4 / 2 = 1.61 GB.
    CHECK(g(Stack::HfPeft, false).attn_backward_working.bytes(s, 4, 2, false) / 1e9 == Approx(1.6106).epsilon(1e-4));
    // FlashAttention tiles the s x s blocks in on-chip memory.
    CHECK(g(Stack::HfPeft, true).attn_backward_working.bytes(s, 1, 1, false) == 0);
}

TEST_CASE("a layer's backward holds the MLP's gradients beside its stored tensors", "[stacks][memory][activations]") {
    // Backward of down(act(gate) x up) in order: the down projection's backward
    // writes d(product) from the layer output's gradient dY and releases the stored
    // product; the product's backward writes d(act) and d(up) from it. At that
    // moment dY (kept for the residual), d(product), d(act) and d(up) are live:
    // h + 3f elements, less the product's f released -- h in the layer output's
    // dtype, 2f in the MLP's. Llama-2-7B: h = 4,096, f = 11,008, bf16 (2 B).
    auto g = [](const char* model, Stack st) { return graph(model, st, Precision::BF16Mixed, true); };
    // 4,096 x 2 + 2 x 11,008 x 2 = 52,224 B per token.
    CHECK(g("llama-2-7b", Stack::MegatronCore).backward_working.bytes(1, 1, 1, false) == Approx(52224.0));
    // Tensor parallelism splits the MLP's columns, not the layer output: t = 2, 4,096 tokens:
    // 4,096 x (8,192 + 44,032 / 2) = 123,731,968 B.
    CHECK(g("llama-2-7b", Stack::MegatronCore).backward_working.bytes(4096, 1, 2, false) == Approx(123731968.0));
    // PEFT's kbit preparation makes the stream between the matmuls fp32 (kbit_upcast):
    // the layer output and the MLP's element-wise tensors, so their gradients, are
    // fp32: 4,096 x 4 + 2 x 11,008 x 4 = 104,448 B per token.
    TrainingSetup up;
    up.stack = Stack::HfPeft;
    up.framework = Framework::PyTorchAMP;
    up.precision = Precision::BF16Mixed;
    up.method = Method::QLoRA;
    up.qlora.kbit_upcast = true;
    REQUIRE(fp32_stream(up));
    CHECK(build_step_graph(tp_test::model("llama-2-7b"), up).backward_working.bytes(1, 1, 1, false) == Approx(104448.0));
    // DeepSpeed ZeRO-2's flat buffer lets flash-attn's packed SwiGLU run the down
    // projection inside its own function, which stores no product (it regenerates
    // it): nothing is released, d(product), d(act), d(up) all count:
    // 4,096 x 2 + 3 x 11,008 x 2 = 74,240 B per token.
    TrainingSetup packed;
    packed.stack = Stack::HfFused;
    packed.framework = Framework::DeepSpeed;
    packed.zero_stage = 2;
    packed.precision = Precision::BF16Mixed;
    REQUIRE(swiglu_kernel(packed) == SwigluKernel::PackedFused);
    CHECK(build_step_graph(tp_test::model("llama-2-7b"), packed).backward_working.bytes(1, 1, 1, false) == Approx(74240.0));
    // Mixtral-8x7B: each expert's backward runs on its own rows, 2 of 8 experts per
    // token: 2 x (14,336 x 2 / 8) x 2 B + 4,096 x 2 = 14,336 + 8,192 = 22,528 B per token.
    CHECK(g("mixtral-8x7b", Stack::MegatronCore).backward_working.bytes(1, 1, 1, false) == Approx(22528.0));
    // GPT-2 (GELU, not gated): d(act) and d(fc1 output), less act: 768 x 2 + 3,072 x 2 = 7,680 B.
    CHECK(g("gpt2", Stack::MegatronCore).backward_working.bytes(1, 1, 1, false) == Approx(7680.0));
}

TEST_CASE("model code without .float(): the loss keeps 16-bit logits, in fp32 only under autocast", "[stacks][memory]") {
    // Qwen v1's QWenLMHeadModel.forward computes CrossEntropyLoss on the 16-bit
    // lm_logits. Llama-2-7B's shape (V = 32,000), 4,096 tokens, as such a model:
    //   under torch.autocast: logits 2 + shifted copy 2 + autocast fp32 copy 4 +
    //   fp32 log-probs 4 = 12 B/logit: 4,096 x 32,000 x 12 = 1,572,864,000 B,
    //   the same as LlamaForCausalLM's .float() path (4 + 4 + 4);
    //   under DeepSpeed's engine (no autocast): 2 + 2 + 2 = 6 B: 786,432,000 B.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::LoRA, Precision::FP16Mixed, 4096);
    s.setup.recompute = Recompute::Full;
    s.setup.framework = Framework::DeepSpeed;
    s.setup.zero_stage = 2;  // the DeepSpeed engine in use (engine_casts_model)
    const double upcast = estimate_memory(s).peak().logits;
    CHECK(upcast == Approx(1572864000.0));
    s.model.logits_upcast = false;
    CHECK(estimate_memory(s).peak().logits == Approx(786432000.0));
    CHECK(loss_copies(s.model, s.setup).description.find("6 B/logit") != std::string::npos);
    s.setup.framework = Framework::PyTorchAMP;
    CHECK(estimate_memory(s).peak().logits == Approx(1572864000.0));
    // A stack whose loss is its own (Megatron-Core's vocab-parallel cross-entropy)
    // does not read the model code's upcast.
    s.setup.stack = Stack::MegatronCore;
    const double mcore = estimate_memory(s).peak().logits;
    s.model.logits_upcast = true;
    CHECK(estimate_memory(s).peak().logits == Approx(mcore));
}

TEST_CASE("DeepSpeed ZeRO-2 under Q-LoRA: fp32 masters of the adapters and the contiguous-gradient buckets", "[stacks][memory]") {
    // Qwen's Q-LoRA script: --fp16 --deepspeed ds_config_zero2.json (reduce_bucket_size
    // 2e8, overlap_comm true, contiguous_gradients true), one GPU.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::QLoRA, Precision::FP16Mixed, 512);
    s.setup.framework = Framework::DeepSpeed;
    s.setup.recompute = Recompute::Full;
    // Without the engine (artidoro/qlora's convention): m and v, 8 B per adapter
    // parameter. DeepSpeed's ZeRO optimizer adds the fp32 master: 12 B.
    const MemoryBreakdown plain = estimate_memory(s).peak();
    s.setup.zero_stage = 2;
    s.setup.ds_reduce_bucket = 2e8;
    s.setup.ds_overlap_comm = false;
    const MemoryBreakdown one = estimate_memory(s).peak();
    CHECK(one.optimizer / plain.optimizer == Approx(12.0 / 8.0));
    // overlap_comm adds the second bucket: 2e8 fp16 elements = 400,000,000 B.
    s.setup.ds_overlap_comm = true;
    const MemoryBreakdown two = estimate_memory(s).peak();
    CHECK(two.temporary - one.temporary == Approx(4e8));
    // Under torch.autocast (no engine) the adapters keep the QLoRA convention.
    s.setup.framework = Framework::PyTorchAMP;
    CHECK(estimate_memory(s).peak().optimizer == Approx(plain.optimizer));
}

TEST_CASE("eager attention's fp32 softmax keeps one copy in fp32 training (the cast back is a no-op)", "[stacks][memory]") {
    // transformers' LlamaAttention: softmax(scores, dtype=float32).to(query_states.dtype).
    // Under bf16 the backward keeps the fp32 output (4 B) and P x V the bf16 cast (2 B):
    // 6 B per score element and head, 32 heads for Llama-2-7B; in fp32 the cast returns
    // the same tensor: 4 B.
    CHECK(graph("llama-2-7b", Stack::HfPeft, Precision::BF16Mixed, false).stored_none.squared == Approx(32 * 6.0));
    CHECK(graph("llama-2-7b", Stack::HfPeft, Precision::FP32, false).stored_none.squared == Approx(32 * 4.0));
}

namespace {
constexpr double kLlama2_7bParams = 6'738'415'616.0;  // the Hugging Face checkpoint's count
// Llama-2-7B full fine-tune under torch.autocast, wrapped in torch DDP over 2 ranks.
Scenario ddp_llama7b() {
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::Full, Precision::BF16Mixed, 512);
    s.setup.framework = Framework::PyTorchAMP;
    s.cluster.num_gpus = 2;
    s.setup.layout.dp = 2;
    return s;
}
// torchtitan's Llama-3-8B run as its train config has it: FSDP over 8 H100s,
// 8,192 tokens, per-op checkpointing.
ScenarioInput torchtitan_llama3_8b() {
    ScenarioInput in;
    in.model = "llama-3-8b";
    in.gpu = "h100-sxm";
    in.gpus = 8;
    in.dp = 8;
    in.stack = Stack::Torchtitan;
    in.fsdp = FsdpStrategy::FullShard;
    in.recompute = Recompute::PerOp;
    in.seq_len = 8192;
    return in;
}
// What a run needs of its card: MemoryBreakdown::firm() (its total less the
// elastic parts that take only room the device has free), plus a paged
// optimizer's resident states, which these scenarios do not have.
double needed(const MemoryBreakdown& m) { return m.firm() + m.managed; }
// The remedy `fit` offers for a run `short_by` bytes over its card whose only
// change is `change` (nullptr where none is), checked to need it.
const Remedy* sole_remedy(Scenario s, double short_by, const std::string& change, FitReport& rep) {
    s.cluster.gpu.capacity_bytes = needed(estimate_memory(s).peak()) - short_by;
    rep = check_fit(s, 20);
    REQUIRE_FALSE(rep.fits);
    for (const Remedy& r : rep.remedies)
        if (r.changes == std::vector<std::string>{change}) return &r;
    return nullptr;
}
}  // namespace

TEST_CASE("FSDP under autocast bookkeeping: fp32 shards at rest, the 16-bit weights only as gathered units", "[stacks][memory][fsdp]") {
    // Llama-3-8B, 8,030,261,248 parameters (torchtitan PR #833's log), FSDP over 8
    // GPUs with MixedPrecision param_dtype bf16: each rank keeps its fp32 shard,
    // 4 B x P / 8; the bf16 weights exist only as gathered units (a temporary),
    // not as a persistent copy beside the shard.
    const double P = 8030261248.0;
    ScenarioInput in = torchtitan_llama3_8b();
    auto r = resolve_scenario(in, tp_test::presets());
    REQUIRE(r.has_value());
    CHECK(estimate_memory(*r).peak().weights == Approx(4.0 * P / 8).epsilon(1e-6));
    // SHARD_GRAD_OP (FSDP2 reshard_after_forward=False): the same fp32 shard plus
    // every unit's gathered bf16 weights, held from forward to backward: 2 B x P.
    in.fsdp = FsdpStrategy::ShardGradOp;
    r = resolve_scenario(in, tp_test::presets());
    REQUIRE(r.has_value());
    CHECK(estimate_memory(*r).peak().weights == Approx(4.0 * P / 8 + 2.0 * P).epsilon(1e-6));
    // Plain DDP under autocast keeps fp32 weights and autocast's bf16 copies: 6 B x P.
    in.fsdp = FsdpStrategy::None;
    in.zero = 0;
    r = resolve_scenario(in, tp_test::presets());
    REQUIRE(r.has_value());
    CHECK(estimate_memory(*r).peak().weights == Approx(6.0 * P).epsilon(1e-6));
}

TEST_CASE("NCCL_NVLS_ENABLE=0 is offered where NVLink SHARP buffers tip the run over", "[stacks][memory][fit]") {
    ScenarioInput in;
    in.model = "llama-3-8b";
    in.node = "dgx-h100";
    in.gpus = 8;
    in.tp = 2;
    in.dp = 4;
    in.framework = Framework::Megatron;
    in.nccl = NcclRelease::V2_20;
    auto r = resolve_scenario(in, tp_test::presets());
    REQUIRE(r.has_value());
    const Scenario s = *r;
    // NCCL 2.20 on one 8 x H100 node: the world (8 GPUs) and the two data-parallel
    // groups (4 each) hold 24 channels x 2 x (4 + 2) MiB per GPU of theirs:
    // 16 x 288 MiB = 4,608 MiB (the TP pair has none).
    const MemoryBreakdown before = estimate_memory(s).peak();
    CHECK(before.nccl_nvls == Approx(4608.0 * 1024 * 1024));
    FitReport rep;
    const Remedy* off = sole_remedy(s, 1e9, "nccl: 2.20 -> nvls-off (NCCL_NVLS_ENABLE=0)", rep);
    REQUIRE(off != nullptr);
    CHECK_FALSE(off->changes_result);
    CHECK(needed(off->memory) == Approx(needed(before) - 4608.0 * 1024 * 1024).epsilon(1e-9));
    // A100 NVSwitch has no multicast: nothing to turn off, not offered.
    Scenario a = s;
    a.cluster.intra_node.nvls = false;
    Changes ch;
    CHECK_FALSE(disable_nvls(a, ch));
}

TEST_CASE("stacks: torch DDP keeps a gradient-sized bucket copy unless gradient_as_bucket_view", "[stacks][memory]") {
    // Llama-2-7B (6,738,415,616 parameters, the Hugging Face checkpoint's count),
    // full fine-tune under torch.autocast: fp32 gradients, 4 B per parameter.
    // Wrapped in DistributedDataParallel over 2 ranks, the Reducer's flat buckets
    // span every gradient, one more copy: 4 x 6,738,415,616 B (PyTorch DDP docs,
    // gradient_as_bucket_view: "the saved memory size will be equal to the total
    // gradients size").
    const double psi = kLlama2_7bParams;
    Scenario s = ddp_llama7b();
    const MemoryBreakdown ddp = estimate_memory(s).peak();
    CHECK(ddp.ddp_buckets == Approx(4.0 * psi).epsilon(1e-9));
    CHECK(ddp.all_gradients() == Approx(8.0 * psi).epsilon(1e-9));
    // gradient_as_bucket_view = True: the gradients are the buckets.
    s.setup.ddp_bucket_view = true;
    const MemoryBreakdown view = estimate_memory(s).peak();
    CHECK(view.ddp_buckets == 0);
    CHECK(view.all_gradients() == Approx(4.0 * psi).epsilon(1e-9));
    CHECK(ddp.total - view.total == Approx(4.0 * psi).epsilon(1e-6));
    // Stepping each gradient in backward frees the .grad tensors, not the buckets.
    s.setup.ddp_bucket_view = false;
    s.setup.optimizer_in_backward = true;
    CHECK(estimate_memory(s).peak().ddp_buckets == Approx(4.0 * psi).epsilon(1e-9));
    s.setup.optimizer_in_backward = false;
    // One process is not wrapped: no buckets. Megatron's DDP reduces out of its
    // contiguous main-grad buffer: none either.
    s.setup.ddp_bucket_view = false;
    s.cluster.num_gpus = 1;
    s.setup.layout.dp = 1;
    CHECK(estimate_memory(s).peak().ddp_buckets == 0);
    s.cluster.num_gpus = 2;
    s.setup.layout.dp = 2;
    s.setup.framework = Framework::Megatron;
    CHECK(estimate_memory(s).peak().ddp_buckets == 0);
}

TEST_CASE("stacks: zero_grad(set_to_none) frees the gradients between steps: backward's start holds the head's and one layer's", "[stacks][memory]") {
    // torch >= 2.0 zero_grad() sets .grad to None (the HF Trainer calls model.zero_grad()
    // after each step): with one micro-batch per step no gradient exists when backward
    // starts, and backward writes them as it frees the activations. Llama-2-7B by hand:
    // a decoder layer 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 = 202,383,360 params, the
    // LM head 32,000 x 4,096 = 131,072,000 and the final norm 4,096; 6,738,415,616 in all.
    // Full fine-tune under torch.autocast: fp32 gradients, 4 B each.
    const double psi = kLlama2_7bParams;
    const double held = 4.0 * (202383360.0 + 131072000.0 + 4096.0);
    Scenario s = hf_llama7b("h200", Method::Full, Precision::BF16Mixed, 4096);
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.micro_batch = 4;  // activations (~70 GB) outweigh every gradient and the step's copies
    s.setup.grad_accum = 2;
    const MemoryBreakdown acc = estimate_memory(s).peak();
    s.setup.grad_accum = 1;
    const MemoryBreakdown one = estimate_memory(s).peak();
    // Accumulating micro-batches keep every gradient from the first backward on.
    CHECK(acc.grads_at_step == 0);
    CHECK(acc.gradients == Approx(4.0 * psi).epsilon(1e-9));
    // One micro-batch: the head's and the first layer's gradients at backward's start.
    CHECK(one.gradients == Approx(held).epsilon(1e-9));
    CHECK(one.all_gradients() == Approx(4.0 * psi).epsilon(1e-9));
    CHECK_FALSE(one.peak_at_step);
    CHECK_FALSE(one.peak_at_backward_end);
    CHECK(acc.allocated - one.allocated == Approx(4.0 * psi - held).epsilon(1e-9));
    // A short micro-batch: the step is the peak, every gradient beside the step's
    // copies, as when they accumulate.
    s.setup.seq_len = 512;
    s.setup.micro_batch = 1;
    const MemoryBreakdown short_one = estimate_memory(s).peak();
    s.setup.grad_accum = 2;
    const MemoryBreakdown short_acc = estimate_memory(s).peak();
    CHECK(short_one.peak_at_step);
    CHECK(short_one.allocated == Approx(short_acc.allocated).epsilon(1e-12));
    // FSDP over 8 ranks writes the gradient shards on its own stream: freed, they
    // stay in that stream's pool, reserved beside the next forward (a block goes
    // only to the stream that allocated it), though not allocated.
    // (Micro-batch 2: the pool is elastic, cut where the device has no room left.)
    s.setup.seq_len = 4096;
    s.setup.micro_batch = 2;
    s.setup.grad_accum = 1;
    s.cluster.num_gpus = 8;
    s.setup.layout.dp = 8;
    s.setup.zero_stage = 3;
    s.setup.fsdp = FsdpStrategy::FullShard;
    const MemoryBreakdown fsdp = estimate_memory(s).peak();
    CHECK(fsdp.gradients == Approx(held / 8).epsilon(1e-9));
    CHECK(fsdp.stream_pool == Approx((4.0 * psi - held) / 8).epsilon(1e-9));
    // Engines that keep gradient buffers of their own: all of them at the peak.
    s = hf_llama7b("h200", Method::Full, Precision::BF16Mixed, 4096);
    s.setup.micro_batch = 4;
    s.setup.framework = Framework::DeepSpeed;
    CHECK(estimate_memory(s).peak().grads_at_step == 0);
    s.setup.framework = Framework::Megatron;
    CHECK(estimate_memory(s).peak().grads_at_step == 0);
    // DDP with gradient_as_bucket_view: the gradients are views of the buckets it keeps.
    s = ddp_llama7b();
    s.setup.ddp_bucket_view = true;
    CHECK(estimate_memory(s).peak().grads_at_step == 0);
    s.setup.ddp_bucket_view = false;
    CHECK(estimate_memory(s).peak().grads_at_step == Approx(4.0 * psi - held).epsilon(1e-9));
}

TEST_CASE("stacks: gradient_as_bucket_view is offered where the bucket copy is what overflows, and saves the copy back", "[stacks][memory][time][fit]") {
    const double psi = kLlama2_7bParams;
    Scenario s = ddp_llama7b();
    const double total = needed(estimate_memory(s).peak());
    // A card 1 x psi bytes short of the run: dropping the 4 x psi bucket copy is
    // enough on its own, so it is offered alone; what it needs is the run's less the copy.
    FitReport rep;
    const Remedy* view = sole_remedy(s, psi, "ddp_bucket_view: off -> on", rep);
    REQUIRE(view != nullptr);
    CHECK(needed(view->memory) == Approx(total - 4.0 * psi).epsilon(1e-6));
    CHECK_FALSE(view->changes_result);
    // Time: without the view the Reducer scales each gradient into its bucket and
    // copies the reduced bucket back (a read and a write each way, 4 passes over
    // the fp32 gradients); with it only the in-place scaling is left (2 passes).
    // A100 80GB SXM: 2,039 GB/s, of which a copy kernel reaches 0.88 (the preset's sources).
    const double bw = 2039e9 * 0.88;
    const double off = estimate_time(s).time.dp_exposed_s;
    s.setup.ddp_bucket_view = true;
    const double on = estimate_time(s).time.dp_exposed_s;
    CHECK(off - on == Approx(2.0 * 4.0 * psi / bw).epsilon(1e-6));
    // Nothing to offer once it is on, or where the engine is not torch DDP.
    Changes ch;
    CHECK_FALSE(set_ddp_bucket_view(s, ch));
    s.setup.ddp_bucket_view = false;
    s.setup.framework = Framework::DeepSpeed;
    CHECK_FALSE(set_ddp_bucket_view(s, ch));
}

namespace {
// Llama-2-7B fully fine-tuned on A100-80GB, every parameter sharded over `gpus`
// data-parallel ranks (ZeRO-3), full recompute.
Scenario zero3_llama7b(Framework fw, int gpus, Precision p, int seq) {
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::Full, p, seq);
    s.setup.framework = fw;
    s.setup.recompute = Recompute::Full;
    s.cluster.num_gpus = gpus;
    s.setup.layout.dp = gpus;
    s.setup.zero_stage = 3;
    return s;
}

// ... in bf16 under DeepSpeed ZeRO-3 over 8 ranks, 512 tokens: backward holds
// about a gigabyte.
Scenario ds_zero3_llama7b() { return zero3_llama7b(Framework::DeepSpeed, 8, Precision::BF16Mixed, 512); }
}  // namespace

TEST_CASE("DeepSpeed ZeRO: the optimizer step's fp32 gradient copies set the peak when backward holds less", "[stacks][memory]") {
    // Before each group's Adam step DeepSpeed flattens the rank's 16-bit gradient
    // partition and casts it to fp32, `flatten(averaged_gradients).to(fp32)`:
    // 2 + 4 B per element at once (runtime/zero/stage_1_and_2.py step; stage3.py
    // _prepare_fp32_grad_for_sub_group, one sub-group of at least sub_group_size
    // elements at a time). In ds_zero3_llama7b backward holds about a gigabyte, so
    // the step is the peak.
    const double psi = kLlama2_7bParams;
    Scenario s = ds_zero3_llama7b();
    // ZeRO-3 over 8 ranks: states 16 B x psi / 8 (ZeRO paper), the partition
    // psi / 8 = 842,301,952 elements under the 1e9 sub-group: 6 B each.
    const MemoryBreakdown z3 = estimate_memory(s).peak();
    CHECK(z3.allocated == Approx((16.0 + 6.0) * psi / 8).epsilon(1e-3));
    CHECK(z3.step_copies == Approx(6.0 * psi / 8).epsilon(1e-9));
    CHECK(z3.peak_at_step);
    // ZeRO-2: 16-bit weights whole, gradients and the optimizer sharded, the same
    // partition copied: 2 psi + (2 + 12 + 6) psi / 8.
    s.setup.zero_stage = 2;
    CHECK(estimate_memory(s).peak().allocated == Approx(2.0 * psi + 20.0 * psi / 8).epsilon(1e-3));
    // ZeRO-3 on one rank: the partition is the model; 1e9-element sub-groups.
    s.cluster.num_gpus = 1;
    s.setup.layout.dp = 1;
    s.setup.zero_stage = 3;
    CHECK(estimate_memory(s).peak().allocated == Approx(16.0 * psi + 6.0e9).epsilon(1e-3));
    s.setup.ds_sub_group_size = 5e8;
    CHECK(estimate_memory(s).peak().allocated == Approx(16.0 * psi + 3.0e9).epsilon(1e-3));
    // ZeRO-Offload steps on the CPU from host copies: no device copies, and the
    // backward peak returns.
    s.setup.optimizer_offload = Offload::CPU;
    const MemoryBreakdown off = estimate_memory(s).peak();
    CHECK(off.allocated - off.weights - off.gradients - off.optimizer < 2.5e9);
    CHECK(off.step_copies == 0);
    CHECK_FALSE(off.peak_at_step);
}

TEST_CASE("DeepSpeed ZeRO: step copies no freed block can hold take segments of their own in the reserve", "[stacks][memory]") {
    // PyTorch's caching allocator serves a request from a cached free block at
    // least as large (splitting it) and merges free neighbours only inside one
    // cudaMalloc segment; otherwise it maps a new segment of the request's size
    // (c10/cuda/CUDACachingAllocator.cpp get_free_block, alloc_block). The step's
    // flat copies (2 B, then 4 B per partition element) reuse backward's freed
    // bytes in max_memory_allocated, but in max_memory_reserved only where one
    // freed tensor is large enough.
    const double psi = kLlama2_7bParams;
    // ZeRO-3 over 8 ranks, 4,096 tokens, no recompute: backward holds ~20 GB, far
    // more than the 6 x psi / 8 = 5.05 GB of copies; its largest single tensor is
    // an fp32 logits copy, 4096 x 32000 x 4 B = 0.52 GB, below both requests
    // (1.68 and 3.37 GB): the reserve grows by both.
    Scenario s = ds_zero3_llama7b();
    s.setup.recompute = Recompute::None;
    s.setup.seq_len = 4096;
    const MemoryBreakdown z3 = estimate_memory(s).peak();
    REQUIRE_FALSE(z3.peak_at_step);
    CHECK(z3.step_segments == Approx(6.0 * psi / 8).epsilon(1e-9));
    CHECK(z3.reserved() - z3.allocated >= z3.step_segments);
    // Those segments are the allocator's to give back: a cudaMalloc that fails makes
    // it free every unsplit cached block and retry (CUDACachingAllocator.cpp malloc
    // -> release_cached_blocks), and backward's transient segments are wholly free
    // by the step. On a card 1 GB short of that total (less the layers gathered
    // ahead, which give way first), the reserve gives up 1 GB of them and the run
    // fits at the card's size; 1 GB short of the total without them and without the
    // share of the transient bytes (given back the same way), it does not fit, by
    // 1 GB, whatever they were.
    const double firm = z3.total - z3.gathered_ahead;
    Scenario tight = s;
    tight.cluster.gpu.capacity_bytes = firm - 1e9;
    const MemoryBreakdown t1 = estimate_memory(tight).peak();
    CHECK(t1.allocated == Approx(z3.allocated).epsilon(1e-12));
    CHECK(t1.step_segments == Approx(z3.step_segments - 1e9).epsilon(1e-9));
    CHECK(t1.total == Approx(tight.cluster.gpu.capacity_bytes).epsilon(1e-12));
    CHECK(t1.fits());
    // What it could still take before an out-of-memory is the rest of those
    // segments: on the 80 GB card the whole of them beyond the firm total, on the
    // tight card what is left of them, 1 GB less.
    CHECK(z3.headroom() == Approx(s.cluster.gpu.capacity_bytes - firm + z3.step_segments + z3.transient_reserve).epsilon(1e-12));
    CHECK(t1.headroom() == Approx(z3.step_segments - 1e9 + z3.transient_reserve).epsilon(1e-9));
    tight.cluster.gpu.capacity_bytes = firm - z3.step_segments - z3.transient_reserve - 1e9;
    const MemoryBreakdown t2 = estimate_memory(tight).peak();
    CHECK(t2.step_segments == 0);
    CHECK(t2.transient_reserve == 0);
    CHECK(t2.total - t2.capacity == Approx(1e9).epsilon(1e-9));
    CHECK(t2.headroom() == Approx(-1e9).epsilon(1e-9));
    CHECK_FALSE(t2.fits());
    // LoRA r = 8 on q and v under ZeRO-2 on one rank: the partition is the
    // adapters, 32 layers x 2 x (8 x 4096 + 4096 x 8) = 4,194,304 elements, so the
    // requests are 8,388,608 B (bf16) and 16,777,216 B (fp32). The freed fp32
    // logits block is s x 32000 x 4 = 128,000 s B (the widest activation, s x
    // 11008 x 2 B, is smaller):
    Scenario l = hf_llama7b("a100-sxm-80gb", Method::LoRA, Precision::BF16Mixed, 64);
    l.setup.framework = Framework::DeepSpeed;
    l.setup.zero_stage = 2;
    const double pa = 32.0 * 2 * (8 * 4096 + 4096 * 8);
    //   s = 64: 8,192,000 B holds neither: 6 B per element;
    CHECK(estimate_memory(l).peak().step_segments == Approx(6.0 * pa).epsilon(1e-9));
    //   s = 100: 12,800,000 B holds the bf16 copy, not the fp32 one: 4 B;
    l.setup.seq_len = 100;
    CHECK(estimate_memory(l).peak().step_segments == Approx(4.0 * pa).epsilon(1e-9));
    //   s = 160: 20,480,000 B holds either: nothing beyond the allocated peak.
    l.setup.seq_len = 160;
    CHECK(estimate_memory(l).peak().step_segments == 0);
}

TEST_CASE("LitGPT under FSDP: gradients for the frozen weights, held unsharded while no_sync accumulates", "[stacks][memory]") {
    // LitGPT finetune/lora.py (8641822): FSDPStrategy(auto_wrap_policy={Block}) with
    // Lightning's use_orig_params=True wraps each Block's frozen weights with its
    // LoRA adapters, and PyTorch's FSDP docs say mixing them makes the gradient
    // memory "equivalent to not freezing those parameters"; it accumulates inside
    // fabric.no_backward_sync, where FSDP "will accumulate the full model gradients
    // (instead of gradient shards) until the eventual sync".
    // Llama-2-7B, LoRA r 8 on q and v, bf16-true, 2 GPUs:
    //   block linear weights 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376,
    //   adapters 32 x 2 x (8 x 4096 + 4096 x 8) = 4,194,304; 2 B gradients each.
    Scenario s = hf_llama7b("a100-sxm-40gb", Method::LoRA, Precision::BF16, 1304);
    s.setup.stack = Stack::LitGPT;
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.recompute = Recompute::Full;
    s.cluster.num_gpus = 2;
    s.setup.layout.dp = 2;
    s.setup.zero_stage = 3;
    s.setup.fsdp = FsdpStrategy::FullShard;
    const double blocks = 32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008);
    const double adapters = 32.0 * 2 * (8 * 4096 + 4096 * 8);
    // One micro-batch per step: no no_sync; each rank keeps its half.
    s.setup.grad_accum = 1;
    CHECK(estimate_memory(s).peak().all_gradients() == Approx((blocks + adapters) * 2.0 / 2).epsilon(1e-9));
    // 128 micro-batches (batch 128 / micro-batch 1): the whole model's gradients.
    s.setup.grad_accum = 128;
    CHECK(estimate_memory(s).peak().gradients == Approx((blocks + adapters) * 2.0).epsilon(1e-9));
    // The same loop under hf-peft (adapters wrapped on their own, no no_sync read):
    // the adapters' shard only.
    s.setup.stack = Stack::HfPeft;
    CHECK(estimate_memory(s).peak().gradients == Approx(adapters * 2.0 / 2).epsilon(1e-9));
}

TEST_CASE("FSDP keeps the root unit unsharded through backward", "[stacks][memory]") {
    // torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard frees no root
    // parameters after forward. Llama-2-7B's root (what no Block holds): embedding
    // and head 2 x 32000 x 4096 plus the final norm's 4096 = 262,148,096 parameters,
    // bf16, half of them a rank's own shard on 2 GPUs. DeepSpeed ZeRO-3, the same
    // sharding without FSDP's root rule, differs by exactly that.
    // (A fused AdamW step, as torchtitan's: a foreach step's moment-sized list would
    // move the peak to the step, after backward.)
    Scenario s = zero3_llama7b(Framework::PyTorchAMP, 2, Precision::BF16, 2048);
    s.setup.stack = Stack::Torchtitan;
    const double ds = estimate_memory(s).peak().temporary;
    s.setup.fsdp = FsdpStrategy::FullShard;
    const double fsdp = estimate_memory(s).peak().temporary;
    CHECK(fsdp - ds == Approx((2.0 * 32000 * 4096 + 4096) * 2.0 / 2).epsilon(1e-9));
}

TEST_CASE("DeepSpeed ZeRO-3: a smaller sub_group_size is offered where the step's copies overflow", "[stacks][memory][fit]") {
    Scenario s = ds_zero3_llama7b();
    // A card 1 GB short of the run, whose peak is the step's 6 x psi / 8 B of copies.
    REQUIRE(estimate_memory(s).peak().peak_at_step);
    FitReport rep;
    const Remedy* sub = sole_remedy(s, 1e9, "ds_sub_group_size: 1e+09 -> 1e+08", rep);
    REQUIRE(sub != nullptr);
    CHECK_FALSE(sub->changes_result);
    // The remedy's total is the run's with 1e8-element sub-groups: 6 x 1e8 B of copies.
    Scenario x = s;
    x.setup.ds_sub_group_size = 1e8;
    const MemoryBreakdown small = estimate_memory(x).peak();
    CHECK(small.step_copies == Approx(6e8));
    CHECK(needed(sub->memory) == Approx(needed(small)).epsilon(1e-9));
    CHECK(needed(sub->memory) < needed(estimate_memory(s).peak()) - 1e9);
    // Not offered where backward, not the step, sets the peak (no recompute, 4,096 tokens).
    Changes ch;
    x = s;
    x.setup.recompute = Recompute::None;
    x.setup.seq_len = 4096;
    REQUIRE_FALSE(estimate_memory(x).peak().peak_at_step);
    CHECK_FALSE(shrink_ds_sub_group(x, ch));
}

TEST_CASE("DeepSpeed ZeRO-3 under overlap_comm gathers layers ahead of the compute; without it, in stream order", "[stacks][memory]") {
    // FlagPerf's llama2_7b DeepSpeed benchmark (ds_config.json: stage 3, overlap_comm,
    // bf16; transformers 4.34 LlamaForCausalLM with flash-attn 2), 8 ranks, 4,096
    // tokens. Forward kernels of one layer (hf-peft conventions, as the FSDP test
    // above counts them): 57, less the adapters' 10 and eager attention's 6, plus
    // flash-attn's kernel and the 4 copies into and out of its (b, s, h, d) layout
    // (q, k, v made contiguous, the output back): 46.
    Scenario s = zero3_llama7b(Framework::DeepSpeed, 8, Precision::BF16Mixed, 4096);
    s.setup.recompute = Recompute::None;
    s.setup.stack = Stack::HfPeft;
    REQUIRE(build_step_graph(s.model, s.setup).launches[static_cast<int>(Site::Layer)] == 46);
    // overlap_comm is DeepSpeed's default for stage 3 (zero/config.py) and off for
    // stages 1-2.
    CHECK(ds_overlap_comm_on(s.setup));
    Scenario two = s;
    two.setup.zero_stage = 2;
    CHECK_FALSE(ds_overlap_comm_on(two.setup));
    const MemoryBreakdown ahead = estimate_memory(s).peak();
    s.setup.ds_overlap_comm = false;
    const MemoryBreakdown in_order = estimate_memory(s).peak();
    // ceil(1024 / 46) = 23 layers queued, 24 gathered with the one running, of the
    // model's 32: 22 beyond the current and prefetched layer, 202,383,360 bf16
    // parameters each (8.9 GB; FlagPerf's A800 row measured 57 GiB, 61.2 GB, where
    // the model without them gave 47.4 GB).
    CHECK(in_order.gathered_ahead == 0);
    CHECK(ahead.gathered_ahead == Approx(22 * 202383360.0 * 2).epsilon(1e-9));
    CHECK(ahead.allocated == Approx(in_order.allocated).epsilon(1e-12));
    CHECK(ahead.total - in_order.total == Approx(22 * 202383360.0 * 2).epsilon(1e-9));
}

TEST_CASE("fp32 training: no fused attention kernel under Transformer Engine, SDPA's memory-efficient one elsewhere", "[stacks][memory][attention]") {
    // FlashAttention and cuDNN fused attention take fp16 / bf16 only; Transformer
    // Engine then runs UnfusedDotProductAttention (get_attention_backend's qkv dtype
    // filter), while F.scaled_dot_product_attention dispatches fp32 to the
    // memory-efficient kernel, which keeps what FlashAttention keeps.
    const double s_len = 2048;
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::Full, Precision::FP32, static_cast<std::int64_t>(s_len));
    s.setup.stack = Stack::LitGPT;
    s.setup.flash_attention = true;
    const double fused = estimate_memory(s).peak().activations;
    s.setup.flash_attention = false;
    const double eager = estimate_memory(s).peak().activations;
    // Eager attention keeps the fp32 probabilities, 32 heads x s x s x 4 B per layer
    // (Llama-2-7B has no attention dropout), where the fused kernel keeps one fp32
    // log-sum-exp per row and head, 32 x s x 4 B, and LitGPT's output comes back
    // through a transpose copy (y.transpose(1, 2) then reshape) that the output
    // projection keeps beside the kernel's own output, s x 4,096 x 4 B; 32 layers.
    CHECK(eager - fused == Approx(32.0 * (32 * 4 * s_len * (s_len - 1) - s_len * 4096 * 4)).epsilon(1e-9));
    // Megatron-Core: asking for FlashAttention in fp32 changes nothing (the stack
    // runs eager attention either way), in memory and in time.
    s.setup.stack = Stack::MegatronCore;
    s.setup.framework = Framework::Megatron;
    s.setup.flash_attention = false;
    const double mc_eager = estimate_memory(s).peak().activations;
    const double mc_eager_t = estimate_time(s).time.compute_s;
    s.setup.flash_attention = true;
    CHECK(estimate_memory(s).peak().activations == Approx(mc_eager).epsilon(1e-12));
    CHECK(estimate_time(s).time.compute_s == Approx(mc_eager_t).epsilon(1e-12));
    CHECK(app::describe_setup(s).find("attention eager (no fused kernel takes fp32") != std::string::npos);
    // bf16-mixed under Megatron-Core keeps the fused kernel.
    s.setup.precision = Precision::BF16Mixed;
    CHECK(app::describe_setup(s).find("attention flash2") != std::string::npos);
}

TEST_CASE("the assumes line says how DeepSpeed ZeRO-1/2 reduce their gradients", "[stacks][cli]") {
    Scenario s = zero3_llama7b(Framework::DeepSpeed, 8, Precision::BF16Mixed, 512);
    s.setup.zero_stage = 2;
    CHECK(app::describe_setup(s).find("DeepSpeed all-reduces gradient buckets on the compute stream (overlap_comm off)") != std::string::npos);
    s.setup.ds_overlap_comm = true;
    CHECK(app::describe_setup(s).find("on its own stream under backward (overlap_comm)") != std::string::npos);
    // Before v0.12.4 the synchronize per destination rank leaves overlap_comm nothing to hide.
    s.setup.ds_reduce_per_rank = true;
    CHECK(app::describe_setup(s).find("a device synchronize before each: overlap_comm hides none of it") != std::string::npos);
    s.setup.ds_reduce_per_rank = false;
    // ZeRO-3 says where it gathers: on its own stream by DeepSpeed's default.
    s.setup.zero_stage = 3;
    s.setup.ds_overlap_comm.reset();
    CHECK(app::describe_setup(s).find("DeepSpeed ZeRO-3 gathers on its own stream (overlap_comm)") != std::string::npos);
    s.setup.ds_overlap_comm = false;
    CHECK(app::describe_setup(s).find("gathers on its own stream") == std::string::npos);
    s.setup.zero_stage = 2;
    // One rank reduces nothing; ZeRO-3 gathers and reduce-scatters instead.
    s.cluster.num_gpus = 1;
    s.setup.layout.dp = 1;
    CHECK(app::describe_setup(s).find("all-reduces gradient buckets") == std::string::npos);
}

TEST_CASE("stacks: Megatron-LM's legacy model code: Apex norms, eager SwiGLU, and a flash path selective recompute skips",
          "[stacks][memory][time]") {
    // alibaba/Megatron-LLaMA megatron/model (Megatron-LM before Megatron-Core):
    // FusedRMSNormAffineFunction keeps the 16-bit input, as Megatron-Core's norms;
    // ParallelMLP's `F.silu(x[0]) * x[1]` keeps silu(gate) (f x 2 B per token) that
    // Megatron-Core's fused SwiGLU recomputes. Llama-2-7B, f = 11008: 22,016 B per
    // token per layer, nothing else.
    const StepGraph legacy = graph("llama-2-7b", Stack::MegatronLegacy);
    const StepGraph core = graph("llama-2-7b", Stack::MegatronCore);
    CHECK(legacy.stored_none.bytes(1, 1, 1, false) - core.stored_none.bytes(1, 1, 1, false) == Approx(2.0 * 11008));
    // The Apex norm reads its 16-bit input once and writes its 16-bit output:
    // 2 x 2 B x h = 16,384 B per token, where transformers' eager LlamaRMSNorm
    // (x.float(), pow, mean, rsqrt, mul, cast, weight mul) moves 2 + 7 x 4 + 3 x 2
    // = 36 B per element in bf16: 147,456 B.
    auto norm_bytes = [](const StepGraph& g) {
        for (const OpDef& o : g.ops)
            if (o.role == OpRole::AttnNorm) return o.hbm_bytes_per_token;
        return -1.0;
    };
    CHECK(norm_bytes(legacy) == Approx(4.0 * 4096));
    CHECK(norm_bytes(graph("llama-2-7b", Stack::HfPeft)) == Approx(36.0 * 4096));
    // Its ParallelAttention checkpoints only the unfused CoreAttention: under
    // flash, recompute = "selective" runs nothing again (the same step as none),
    // where Megatron-Core's checkpoint_core_attention re-runs the flash forward.
    auto step = [](Stack st, Recompute r) {
        Scenario s;
        s.model = tp_test::model("llama-2-7b");
        s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
        s.setup.stack = st;
        s.setup.framework = Framework::Megatron;
        s.setup.recompute = r;
        s.setup.seq_len = 4096;
        s.setup.micro_batch = 1;
        return estimate_time(s).time.compute_s;
    };
    CHECK(step(Stack::MegatronLegacy, Recompute::Selective) == step(Stack::MegatronLegacy, Recompute::None));
    CHECK(step(Stack::MegatronCore, Recompute::Selective) > step(Stack::MegatronCore, Recompute::None));
    // Eager element-wise ops cost time: the legacy step is slower than Megatron-Core's.
    CHECK(step(Stack::MegatronLegacy, Recompute::None) > step(Stack::MegatronCore, Recompute::None));
}

TEST_CASE("stacks: Megatron-DeepSpeed runs the legacy model code and moves its checkpoints to the host (--checkpoint-in-cpu)",
          "[stacks][memory]") {
    // The Megatron-GPT 1T shape (128 layers, h 25,600) in fp16 under full recompute keeps
    // one layer input per layer: micro-batch 8 x 1,024 tokens x 25,600 x 2 B =
    // 419,430,400 B, 128 of them 53.7 GB. DeepSpeed's CheckpointFunction with
    // cpu_checkpointing copies each to the host in forward: the GPU keeps the one being
    // copied and the one brought back ahead of its recomputation, 126 go to host memory.
    Scenario s;
    s.model = tp_test::model("megatron-gpt-1t");
    s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
    s.cluster.num_gpus = 1024;
    s.setup.stack = Stack::MegatronDeepSpeed;
    s.setup.precision = Precision::FP16Mixed;
    s.setup.flash_attention = false;
    s.setup.recompute = Recompute::Full;
    s.setup.zero_stage = 3;
    s.setup.seq_len = 1024;
    s.setup.micro_batch = 8;
    s.setup.layout.dp = 1024;
    const double layer_input = 8.0 * 1024 * 25600 * 2;
    CHECK(layer_input == 419'430'400.0);
    Scenario o = s;
    o.setup.activation_offload = true;
    CHECK(check_rules(o).empty());
    const MemoryBreakdown kept = estimate_memory(s).peak(), moved = estimate_memory(o).peak();
    CHECK(kept.activations - moved.activations == Approx(126 * layer_input).epsilon(1e-9));
    CHECK(moved.cpu - kept.cpu == Approx(126 * layer_input).epsilon(1e-9));
    // NVIDIA's legacy Megatron-LM has no such switch: refused, naming the stacks that have it.
    o.setup.stack = Stack::MegatronLegacy;
    const auto v = check_rules(o);
    REQUIRE(v.size() == 1);
    CHECK(v[0].rule == Rule::StackActivationOffload);
    CHECK(v[0].message.find("megatron-deepspeed") != std::string::npos);
    // The fork runs under DeepSpeed's engine: its default framework is DeepSpeed's.
    CHECK(policy().stack(Stack::MegatronDeepSpeed).framework == Framework::DeepSpeed);
    CHECK(policy().stack(Stack::MegatronLegacy).framework == Framework::Megatron);
}

TEST_CASE("hf-peft's allocator reserve: fms-acceleration's nvidia-smi peaks beside their allocated peaks", "[stacks][memory][published]") {
    // fms-acceleration's benchmark table (refs/a100_80gb.csv at f1895b7) gives, for each
    // run, torch.cuda.max_memory_allocated (the fmsacc_*_alloc cases' figure) and the
    // nvidia-smi peak beside it (as_published nvidia_mem_reserved, MiB). The device
    // figure the model gives for those runs (allocated + reserve + context and NCCL
    // buffers) against the nvidia-smi one: the median over the counted runs is within
    // 5 % either way (with the reserve at a tenth of the transient bytes it was 12 % under).
    std::vector<double> err;
    for (const auto& path : tp_test::validation_case_paths()) {
        const std::string name = std::filesystem::path(path).filename().string();
        if (name.rfind("fmsacc_", 0) != 0 || name.find("_alloc.toml") == std::string::npos) continue;
        std::ifstream in(path);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (text.find("\nmissing_mechanism = ") != std::string::npos) continue;
        const std::string key = "nvidia_mem_reserved = \"";
        const auto at = text.find(key);
        if (at == std::string::npos) continue;
        const double smi = std::stod(text.substr(at + key.size())) * 1048576.0;
        const auto j = tp_test::cli_json("fit", {"--scenario", path});
        err.push_back(j["memory"]["total_bytes"].get<double>() / smi - 1.0);
    }
    REQUIRE(err.size() >= 30);
    std::sort(err.begin(), err.end());
    const double median = err[err.size() / 2];
    CHECK(std::abs(median) < 0.05);
}

TEST_CASE("the allocator's reserve by its mode: torchtitan's Llama-3-8B with and without expandable segments", "[stacks][memory][published]") {
    // torchtitan's train logs print the caching allocator's reserved peak. Llama-3-8B,
    // FSDP over 8 GPUs, 8,192 tokens, per-op checkpointing: 59.48 GiB = 63.87 GB in
    // June 2024 on A100s (PR #355), before run_train.sh set expandable_segments;
    // 49.59 GiB = 53.25 GB in February 2025 on H100s with it (PR #822). The allocated
    // peak is the same run's; the reserve is what differs, 10.6 GB.
    const auto reserved = [](const std::string& id) {
        const auto j = tp_test::cli_json("fit", {"--scenario", std::string(TRAINPLAN_SOURCE_DIR) + "/validation/cases/" + id + ".toml"});
        return j["memory"]["reserved_bytes"].get<double>();
    };
    const double june = reserved("torchtitan_pr355_llama3_8b_8xa100_fsdp_foreach_mem");
    const double feb = reserved("torchtitan_pr822_llama3_8b_8xh100_fsdp_default_mem");
    CHECK(june == Approx(63.87e9).epsilon(0.10));
    CHECK(feb == Approx(53.25e9).epsilon(0.05));
    // The same scenario either way: 0.3 of the transient bytes under default
    // segments, 0.1 under expandable ones ([memory] reserve_fraction_*).
    ScenarioInput in = torchtitan_llama3_8b();
    auto r = resolve_scenario(in, tp_test::presets());
    REQUIRE(r.has_value());
    Scenario s = *r;
    REQUIRE(expandable_segments_on(s.setup));
    const MemoryBreakdown on = estimate_memory(s).peak();
    s.setup.expandable_segments = false;
    const MemoryBreakdown off = estimate_memory(s).peak();
    const double transient = on.activations + on.logits + on.temporary;
    CHECK(on.allocated == off.allocated);
    CHECK(on.transient_reserve == Approx(0.1 * transient));
    CHECK(off.transient_reserve == Approx(0.3 * transient));
    // Both reported on the assumes line.
    CHECK(app::describe_setup(s).find("allocator caching allocator, default segments") != std::string::npos);
}

TEST_CASE("the allocator's reserve takes no more than the device has free", "[stacks][memory]") {
    // A run whose tensors fit with less room than its usual reserve: the caching
    // allocator returns its unsplit cached blocks and retries before it fails
    // (CUDACachingAllocator.cpp malloc -> release_cached_blocks), so the card is
    // full, not over, and the run fits; what is given back counts as headroom.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::LoRA, Precision::BF16Mixed, 4096);
    s.setup.micro_batch = 4;
    s.setup.recompute = Recompute::Full;
    const MemoryBreakdown roomy = estimate_memory(s).peak();
    const double share = roomy.transient_reserve;
    REQUIRE(share > 2e9);
    REQUIRE(roomy.reserve_cut == 0);
    // A card 1 GB larger than what the tensors, the framework and the step need:
    // the reserve is cut to that 1 GB.
    s.cluster.gpu.capacity_bytes = roomy.total - share + 1e9;
    const MemoryBreakdown tight = estimate_memory(s).peak();
    CHECK(tight.allocated == roomy.allocated);
    CHECK(tight.transient_reserve == Approx(1e9));
    CHECK(tight.reserve_cut == Approx(share - 1e9));
    CHECK(tight.total == Approx(s.cluster.gpu.capacity_bytes));
    CHECK(tight.fits());
    CHECK(tight.headroom() == Approx(1e9));
    // 1 GB short of the tensors themselves it does not fit, reserve or not.
    s.cluster.gpu.capacity_bytes = roomy.total - share - 1e9;
    const MemoryBreakdown over = estimate_memory(s).peak();
    CHECK(over.transient_reserve == 0);
    CHECK_FALSE(over.fits());
    CHECK(over.headroom() == Approx(-1e9));
}

TEST_CASE("QK-norm: an eager per-head RMSNorm on q and k keeps an fp32 copy of each and launches eight kernels apiece", "[stacks][memory][time]") {
    // Qwen3-8B under transformers (hf-peft): Qwen3RMSNorm on q (32 x 128 = 4,096
    // elements per token) and k (8 x 128 = 1,024), with the same ops as the layer
    // norms: x.float() kept for backward (4 B each), eight launches. Turning it
    // off leaves everything else the same, so the differences are the norms alone.
    ModelSpec m = tp_test::model("qwen3-8b");
    REQUIRE(m.qk_norm);
    TrainingSetup t;
    t.stack = Stack::HfPeft;
    t.recompute = Recompute::None;
    const StepGraph with = build_step_graph(m, t);
    m.qk_norm = false;
    const StepGraph without = build_step_graph(m, t);
    const int L = static_cast<int>(Site::Layer);
    CHECK(with.launches[L] - without.launches[L] == 2 * 8);
    const double s = 4096, b = 1;
    CHECK(with.stored_none.bytes(s, b, 1, false) - without.stored_none.bytes(s, b, 1, false) == Approx(s * (4096 + 1024) * 4.0));
    // A fused stack runs each as one kernel and keeps the 16-bit input.
    m.qk_norm = true;
    t.stack = Stack::MegatronCore;
    const StepGraph fused = build_step_graph(m, t);
    m.qk_norm = false;
    const StepGraph fused_without = build_step_graph(m, t);
    CHECK(fused.launches[L] - fused_without.launches[L] == 2);
    CHECK(fused.stored_none.bytes(s, b, 1, false) - fused_without.stored_none.bytes(s, b, 1, false) == Approx(s * (4096 + 1024) * 2.0));
}

TEST_CASE("logit soft-capping: model code keeps tanh's 16-bit output, a loss kernel that caps inside keeps nothing", "[stacks][memory]") {
    // Gemma-2-9B (vocabulary 256,000; 16 heads): transformers' Gemma2ForCausalLM runs
    // logits / 30, tanh, * 30 on the 16-bit logits and tanh keeps its output for
    // backward: 2 B per logit beside the loss's copies, 512,000 B per token. Unsloth's
    // fast_cross_entropy_loss(logit_softcapping=30) caps inside its kernel.
    ModelSpec m = tp_test::model("gemma-2-9b");
    REQUIRE(m.final_logit_softcap == 30.0);
    TrainingSetup t;
    t.stack = Stack::HfPeft;
    t.flash_attention = false;
    t.recompute = Recompute::None;
    const StepGraph capped = build_step_graph(m, t);
    ModelSpec plain = m;
    plain.final_logit_softcap = 0;
    plain.attn_logit_softcap = 0;
    const StepGraph uncapped = build_step_graph(plain, t);
    const double s = 4096, b = 1;
    CHECK(capped.logits.bytes(s, b, 1, false) - uncapped.logits.bytes(s, b, 1, false) == Approx(s * 256000 * 2.0));
    // Eager attention (the implementation transformers recommends for training
    // Gemma 2) caps every score the same way: tanh's output, 16 heads x s x s x 2 B
    // per layer (537 MB at 4,096 tokens), and three more launches.
    CHECK(capped.stored_none.bytes(s, b, 1, false) - uncapped.stored_none.bytes(s, b, 1, false) == Approx(16 * s * s * 2.0));
    const int L = static_cast<int>(Site::Layer), last = static_cast<int>(Site::Last);
    CHECK(capped.launches[L] - uncapped.launches[L] == 3);
    CHECK(capped.launches[last] - uncapped.launches[last] == 3);
    // Flash attention caps inside its kernel; Unsloth's loss caps inside its kernel.
    t.flash_attention = true;
    CHECK(build_step_graph(m, t).stored_none.bytes(s, b, 1, false) == Approx(build_step_graph(plain, t).stored_none.bytes(s, b, 1, false)));
    t.stack = Stack::Unsloth;
    CHECK(build_step_graph(m, t).logits.bytes(s, b, 1, false) == Approx(build_step_graph(plain, t).logits.bytes(s, b, 1, false)));
}

TEST_CASE("an image encoder idle on text batches moves no bytes: ZeRO-3 never gathers it, DeepSpeed reduces no gradient of it", "[stacks][time][vision]") {
    // Gemma-3-4B full fine-tune under DeepSpeed ZeRO-3 over 8 GPUs: its SigLIP encoder
    // and projector are trainable partitions (DeepSpeed builds states for every
    // requires_grad parameter) but no text batch runs them, so no hook fetches them
    // and no gradient reaches them. The same run on the decoder alone (the encoder
    // removed from the model) must move the same bytes and run the same hooks.
    Scenario with = zero3_llama7b(Framework::DeepSpeed, 8, Precision::BF16Mixed, 2048);
    with.model = tp_test::model("gemma-3-4b");
    with.cluster.gpus_per_node = 8;  // one node: the ring moves bytes (one GPU per node with no network would not)
    REQUIRE(count_params(with.model).vision > 400'000'000);
    Scenario without = with;
    without.model.vision = VisionSpec{};
    REQUIRE(count_params(without.model).vision == 0);
    const TimeEstimate a = estimate_time(with), b = estimate_time(without);
    REQUIRE(a.time.dp_intra_bytes > 0);
    CHECK(a.time.dp_intra_bytes == Approx(b.time.dp_intra_bytes).epsilon(1e-12));
    CHECK(a.time.zero3_hooks_s == Approx(b.time.zero3_hooks_s).epsilon(1e-12));
    // Its states are still there: 16 B per parameter over 8 ranks, 2 of them the weights.
    const double vision = static_cast<double>(count_params(with.model).vision);
    CHECK(estimate_memory(with).peak().optimizer - estimate_memory(without).peak().optimizer == Approx(vision * 12 / 8).epsilon(1e-9));
}

TEST_CASE("DeepSpeed ZeRO-3 before v0.6 gathers every parameter tensor alone: host time per rank of the group, per tensor and pass", "[stacks][time]") {
    // GPT-3 175B as Narayanan et al. 2021 (Table 2) ran ZeRO-3 against PTD-P: 1,536
    // A100s, pure data parallelism, one 2,048-token sequence per GPU, full recompute.
    // DeepSpeed v0.3.13-v0.5.x gathered each tensor after a device synchronize into
    // a list of 1,536 outputs (partition_parameters.py _allgather_param).
    ScenarioInput in;
    in.model = "gpt3-175b";
    in.gpu = "a100-sxm-80gb";
    in.gpus = 1536;
    in.dp = 1536;
    in.zero = 3;
    in.framework = Framework::Megatron;  // Megatron's model code (q, k and v one module)
    in.stack = Stack::MegatronCore;
    in.precision = Precision::FP16Mixed;
    in.recompute = Recompute::Full;
    in.seq_len = 2048;
    in.micro_batch = 1;
    in.grad_accum = 1;
    auto off = resolve_scenario(in, tp_test::presets());
    REQUIRE(off.has_value());
    // Its parameter tensors: per layer two LayerNorms (scale, shift), qkv, the
    // attention output, fc1 and fc2 (weight, bias): 12; the word and position
    // embeddings before the layers, the final LayerNorm after (the head is tied).
    const StepGraph g = build_step_graph(off->model, off->setup);
    CHECK(g.param_tensors[static_cast<int>(Site::Layer)] == 12);
    CHECK(g.param_tensors[static_cast<int>(Site::First)] == 2);
    CHECK(g.param_tensors[static_cast<int>(Site::Last)] == 2);
    in.ds_gather_per_tensor = true;
    auto on = resolve_scenario(in, tp_test::presets());
    REQUIRE(on.has_value());
    // Gathers per micro-batch: forward and backward of all 96 x 12 + 4 tensors, and
    // the recomputed forward of the 96 x 12: 3,464; each with 1,536 x 8 us of copies
    // ([host] list_gather_per_rank_us), 42.6 s, and a ring latency of its own where
    // one gather per layer and pass (and one reduce-scatter) paid it before: 3,464 +
    // 96 rings instead of 3 x 96.
    const TierCosts tc = tier_costs(off->cluster);
    const double ring = ring_latency_s(8, 192, tc.intra, tc.inter);
    const double extra = estimate_time(*on).time.dp_comm_s - estimate_time(*off).time.dp_comm_s;
    CHECK(extra == Approx(3464 * 1536 * 8e-6 + (3464 + 96 - 3 * 96) * ring).epsilon(1e-9));
    // The paper's 44 TFLOP/s per GPU (its Eq. 3 FLOPs, 4 x 6N + attention per token with
    // recompute) is a step of about 67 s.
    CHECK(estimate_time(*on).time.step_s == Approx(67).epsilon(0.25));
}

TEST_CASE("FP8 parameters: the weights in FP8 alone, and data parallelism gathers them at 1 B", "[stacks][memory][time][fp8]") {
    // Transformer Engine's fp8_model_init (NeMo fp8_params, as MLPerf Training v4.1's
    // NVIDIA GPT-3 submissions set FP8_PARAMS=True) keeps each linear weight in FP8
    // only: under Megatron's bookkeeping 1 B of weight per parameter instead of the
    // 16-bit copy and its FP8 cast (2 + 1), the fp32 main gradient (4) and the
    // optimizer's fp32 master and moments (12) unchanged: 17 B instead of 19.
    TrainingSetup t;
    t.precision = Precision::FP8Mixed;
    t.framework = Framework::Megatron;
    CHECK(bytes_per_trainable_param(t).total() == Approx(2 + 1 + 4 + 4 + 8));
    t.fp8_params = true;
    CHECK(bytes_per_trainable_param(t).total() == Approx(1 + 4 + 4 + 8));
    // Over 8 data-parallel ranks with the distributed optimizer and gradients reduced
    // in bf16, a step reduce-scatters 2 B and all-gathers the updated parameters at
    // 1 B per element instead of 2: (2 + 1) / (2 + 2) of the bytes.
    const auto dp_bytes = [](const char* fp8) {
        const nlohmann::json j = tp_test::cli_json("simulate", {"llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--precision", "fp8-mixed",
                                                                "--framework", "megatron", "--stack", "megatron-core", "--zero", "1",
                                                                "--grad-reduce-bf16", "on", "--recompute", "full", "--fp8-params", fp8});
        return j["time"]["dp_intra_node_bytes"].get<double>() + j["time"]["dp_inter_node_bytes"].get<double>();
    };
    REQUIRE(dp_bytes("off") > 0);
    CHECK(dp_bytes("on") / dp_bytes("off") == Approx(0.75).epsilon(1e-9));
    // The gathers move the compute dtype: fp32 training under DeepSpeed ZeRO-3 gathers
    // fp32 weights (twice, forward and backward) and reduce-scatters fp32 gradients,
    // every byte twice bf16-mixed's 2 + 2 + 2.
    const auto zero3_bytes = [](const char* precision) {
        const nlohmann::json j = tp_test::cli_json("simulate", {"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--precision", precision,
                                                                "--framework", "deepspeed", "--zero", "3", "--recompute", "full"});
        return j["time"]["dp_intra_node_bytes"].get<double>() + j["time"]["dp_inter_node_bytes"].get<double>();
    };
    CHECK(zero3_bytes("fp32") / zero3_bytes("bf16-mixed") == Approx(2.0).epsilon(1e-9));
    // LoRA's frozen base under it: every frozen linear weight 1 B instead of 2 (the
    // adapters, not Transformer Engine modules, keep theirs).
    Scenario lora = hf_llama7b("h100-sxm", Method::LoRA, Precision::FP8Mixed, 2048);
    lora.setup.framework = Framework::Megatron;
    lora.setup.stack = Stack::MegatronCore;
    const double w16 = estimate_memory(lora).peak().weights;
    lora.setup.fp8_params = true;
    const double w8 = estimate_memory(lora).peak().weights;
    // Llama-2-7B's linear layers: 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6.476e9.
    CHECK(w16 - w8 == Approx(32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008)).epsilon(1e-6));
}

TEST_CASE("torch AdamW's foreach step: one moment-sized list beside the states and gradients once backward has freed the activations", "[stacks][memory][optimizer]") {
    // Pure 16-bit full fine-tune under transformers' Trainer (adamw_torch: foreach):
    // weights 2, gradients 2, two moments 2 + 2, and the step's
    // torch._foreach_sqrt(exp_avg_sqs) list 2 -- 10 B per parameter at the step
    // (torch/optim/adamw.py _multi_tensor_adamw). fms-acceleration's A100 80GB table
    // measured Mistral-7B (7.24e9 parameters) this way at 72.97 GB, the same at
    // per-device batch 4 and 8: the peak is the step's.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::Full, Precision::BF16, 512);
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.recompute = Recompute::Full;
    const double n = static_cast<double>(count_params(s.model).total);
    const MemoryBreakdown m = estimate_memory(s).peak();
    CHECK(m.peak_at_step);
    CHECK(m.step_copies == Approx(2.0 * n).epsilon(1e-9));
    CHECK(m.allocated == Approx(10.0 * n).epsilon(0.01));
    // DeepSpeed's engine steps with its own fused Adam: no such list.
    s.setup.framework = Framework::DeepSpeed;
    s.setup.zero_stage = 1;
    CHECK(estimate_memory(s).peak().step_copies != Approx(2.0 * n));
}

TEST_CASE("PEFT's kbit preparation: fp32 embeddings, norms and head make the stream and every checkpoint fp32", "[stacks][memory][qlora]") {
    // peft's prepare_model_for_kbit_training casts every float parameter of a
    // bitsandbytes model to fp32: Llama-2-7B's embedding and LM head (2 x 32000 x
    // 4096) and 65 RMSNorm weights of 4096 go from 2 to 4 B. The LoRA adapters
    // made after it are fp32 (here r 8 on q and v: 32 x 2 x 8 x (4096 + 4096)
    // parameters, 2 B more each). The embedding then emits fp32 and each
    // decoder layer's checkpointed input is fp32: 2 B more per hidden element,
    // token and layer, 32 x 4096 x 4096 x 2 B for one 4096-token sequence.
    Scenario s = hf_llama7b("a100-sxm-80gb", Method::QLoRA, Precision::FP16Mixed, 4096);
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.recompute = Recompute::Full;
    const MemoryBreakdown plain = estimate_memory(s).peak();
    s.setup.qlora.kbit_upcast = true;
    const MemoryBreakdown prepared = estimate_memory(s).peak();
    const double other = 2.0 * 32000 * 4096 + 65.0 * 4096;
    const double adapters = 32.0 * 2 * 8 * (4096 + 4096);
    CHECK(prepared.weights - plain.weights == Approx(2.0 * other + 2.0 * adapters).epsilon(1e-9));
    CHECK(build_step_graph(s.model, s.setup).stored_full.bytes(4096, 1, 1, false) == Approx(4096.0 * 4096 * 4));
    // Beside that, the head's input (the final norm's fp32 output) is kept for its
    // matmul: 4096 x 4096 x 2 B more.
    CHECK(prepared.activations - plain.activations == Approx(32.0 * 4096 * 4096 * 2 + 4096.0 * 4096 * 2).epsilon(1e-9));
    // The MLP's element-wise tensors are fp32 (a 4-bit linear returns its output
    // in its input's dtype): one layer's stored tensors grow by more than the
    // gate, up, act and product, 4 x 11008 x 2 B per token.
    s.setup.qlora.kbit_upcast = false;
    const double layer16 = build_step_graph(s.model, s.setup).stored_none.bytes(1, 1, 1, false);
    s.setup.qlora.kbit_upcast = true;
    CHECK(build_step_graph(s.model, s.setup).stored_none.bytes(1, 1, 1, false) - layer16 >= 4.0 * 11008 * 2);
    // Kernels per layer forward: each 4-bit linear fed an fp32 input casts it first
    // (q, k, v, the separate gate and up, down: 6; o_proj's input is flash
    // attention's 16-bit output); autocast casts each fp32 adapter matrix (q and v:
    // 4) and the fp32 input for lora_A (2).
    s.setup.qlora.kbit_upcast = false;
    const double launches16 = build_step_graph(s.model, s.setup).launches[static_cast<int>(Site::Layer)];
    s.setup.qlora.kbit_upcast = true;
    CHECK(build_step_graph(s.model, s.setup).launches[static_cast<int>(Site::Layer)] - launches16 == Approx(6 + 4 + 2));
    // And it names itself in the assumes line.
    CHECK_THAT(app::describe_setup(s), Catch::Contains("prepare_model_for_kbit_training"));
    // DeepSpeed's engine casts the whole model back to 16 bits (module.half()):
    // the preparation leaves no trace.
    s.setup.framework = Framework::DeepSpeed;
    s.setup.zero_stage = 2;
    const double engine_prepared = estimate_memory(s).peak().total;
    s.setup.qlora.kbit_upcast = false;
    CHECK(estimate_memory(s).peak().total == Approx(engine_prepared).epsilon(1e-12));
    // GPTQ models are left as they are (peft skips them): refused with exit 2.
    const tp_test::CliResult r = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--method", "qlora", "--quant", "gptq",
                                               "--kbit-upcast", "on"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("kbit_upcast") && Catch::Contains("gptq"));
}

TEST_CASE("FSDP-QLoRA gathers the packed 4-bit base, not 16-bit weights", "[stacks][time][fsdp][qlora]") {
    // With bnb_4bit_quant_storage set, FSDP shards and all-gathers the 4-bit
    // storage as it is: NF4 with double quantization is 4 + 8/64 + 32/(64 x 256)
    // = 4.12695 bits per parameter (Dettmers et al. 2023, Sec. 3). Llama-2-7B's
    // 6,476,005,376 linear weights at 0.515869 B, the embedding, head and norms
    // (262,410,240) and the r-8 q / v adapters (4,194,304) at 2 B: 3,873,980,416 B
    // per pass. On 2 ranks each gathers half of it, for forward and for backward,
    // and reduce-scatters half of the adapters' 16-bit gradients: 3,878,174,720 B
    // per step. (At 2 B per weight it would be 13.5e9.)
    const nlohmann::json j = tp_test::cli_json("simulate", {"llama-2-7b", "--gpu", "rtx-3090", "--gpus", "2", "--method", "qlora",
                                                            "--fsdp", "full-shard", "--precision", "bf16-mixed", "--framework", "pytorch-amp",
                                                            "--lora-rank", "8", "--lora-targets", "q,v"});
    CHECK(j["time"]["dp_intra_node_bytes"].get<double>() == Approx(3878174720.0).epsilon(1e-9));
}

TEST_CASE("fit offers preparing the 4-bit model without PEFT's fp32 upcast, with the total of the run without it", "[stacks][fit][qlora]") {
    // Mistral-7B QLoRA on a 24 GB card at 5 x 4096 tokens: with the upcast the fp32
    // checkpoints are 32 x 20480 x 4096 x 4 B = 10.7 GB, twice the 16-bit ones, and the
    // run does not fit; the same run prepared without it is the remedy, and its total
    // is what a direct estimate of that run gives.
    Scenario s = hf_llama7b("rtx-4090", Method::QLoRA, Precision::FP16Mixed, 4096);
    s.model = tp_test::model("mistral-7b");
    s.setup.framework = Framework::PyTorchAMP;
    s.setup.recompute = Recompute::Full;
    s.setup.micro_batch = 5;
    s.setup.qlora.kbit_upcast = true;
    const FitReport rep = check_fit(s, 8);
    REQUIRE_FALSE(rep.fits);
    Scenario plain = s;
    plain.setup.qlora.kbit_upcast = false;
    const MemoryBreakdown direct = estimate_memory(plain).peak();
    REQUIRE(direct.fits());
    bool found = false;
    for (const Remedy& r : rep.remedies)
        if (r.title == "4-bit model prepared without the fp32 upcast") {
            found = true;
            CHECK(r.memory.total == Approx(direct.total).epsilon(1e-12));
            CHECK(r.changes == std::vector<std::string>{"kbit_upcast: on -> off"});
        }
    CHECK(found);
    // Where the upcast does not run (DeepSpeed casts the model back) it is not offered.
    s.setup.framework = Framework::DeepSpeed;
    s.setup.zero_stage = 2;
    Changes ch;
    CHECK_FALSE(unset_kbit_upcast(s, ch));
}

TEST_CASE("flash-attn-training: one dropout-add-LayerNorm kernel over an fp32 residual, GELU in the GEMM epilogue, CE in place", "[stacks][time][memory]") {
    // Dao-AILab/flash-attention's training/ GPT (flash-attn v0.2.2). GPT-2 small: h
    // = 768, ffn = 3072, dropout 0.1, V = 50,257.
    const StepGraph g = graph("gpt2", Stack::FlashAttnTraining);
    auto op = [&](OpRole r) {
        for (const OpDef& o : g.ops)
            if (o.role == r && o.site == Site::Layer) return o;
        FAIL("no such op");
        return OpDef{};
    };
    // dropout_add_layer_norm (csrc/layer_norm ln_fwd_kernels.cuh, prenorm,
    // residual_in_fp32): forward reads the branch (bf16, 2 B) and the residual (fp32,
    // 4 B), writes the output (2 B), the new residual (4 B) and the mask (1 B): 13 B;
    // backward (ln_bwd_kernels.cuh) reads dz 2, dx 4, x 4, the mask 1 and writes dx0
    // 2 and dx1 4: 17 B.
    for (OpRole r : {OpRole::AttnNorm, OpRole::MlpNorm}) {
        const OpDef n = op(r);
        CHECK(n.hbm_bytes_per_token == Approx(13.0 * 768));
        CHECK(n.hbm_bytes_per_token * n.bwd_hbm_factor == Approx(17.0 * 768));
    }
    // ... so the dropouts and residual adds move nothing of their own, and launch nothing.
    for (OpRole r : {OpRole::AttnOutDropout, OpRole::AttnResidualAdd, OpRole::MlpOutDropout, OpRole::MlpResidualAdd})
        CHECK(op(r).hbm_bytes_per_token == 0);
    const StepGraph eager = graph("gpt2", Stack::GenericEager);
    const int layer = static_cast<int>(Site::Layer);
    // Eager code launches, per layer's forward, 4 more for the two dropouts and two
    // adds, 1 for GELU and 4 for the layout copies (q, k, v into the kernel's layout
    // and the output back): 9.
    CHECK(eager.launches[layer] - g.launches[layer] == Approx(4 + 1 + 4));
    // The layer keeps the fp32 residual (4 B) and its two 1-byte masks per element.
    for (const TensorDef& td : g.tensors)
        if (td.name == "layer_input") CHECK(td.bytes_per_elem == 4.0);
    // FusedDenseGeluDense (checkpoint_lvl 0): the GELU_AUX_BIAS epilogue writes the
    // pre-activation once (2 B x 3072), the DGELU_BGRAD epilogue reads it once.
    const OpDef act = op(OpRole::ActFn);
    CHECK(act.hbm_bytes_per_token == Approx(2.0 * 3072));
    CHECK(act.bwd_hbm_factor == 1.0);
    // FlashAttention 1's qkv-packed kernel reads Wqkv's output in place: no layout copies.
    CHECK(std::none_of(g.ops.begin(), g.ops.end(), [](const OpDef& o) { return o.role == OpRole::AttnLayoutCopies; }));
    // The Apex-derived cross-entropy keeps the bf16 logits and writes the gradient
    // over them: 2 B per logit, for 32 x 2048 tokens x 50,257.
    CHECK(g.logits.bytes(2048, 32, 1, false) == Approx(2048.0 * 32 * 50257 * 2));
}

namespace {

// One 8 x H100 SXM node at TP 8 with sequence parallelism, 4,096-token sequences,
// no recompute; Llama-3-8B unless a model is given.
Scenario resolved(const ScenarioInput& in) {
    auto s = resolve_scenario(in, tp_test::presets());
    INFO((s ? std::string() : s.error().message()));
    REQUIRE(s);
    return *s;
}

Scenario tp8_sp_scenario(Stack st, std::int64_t micro_batch, const std::optional<ModelSpec>& model = std::nullopt) {
    ScenarioInput in;
    if (model)
        in.model_inline = *model;
    else
        in.model = "llama-3-8b";
    in.gpu = "h100-sxm";
    in.gpus = 8;
    in.tp = 8;
    in.dp = 1;
    in.sequence_parallel = true;
    in.seq_len = 4096;
    in.micro_batch = micro_batch;
    in.recompute = Recompute::None;
    in.stack = st;
    return resolved(in);
}

}  // namespace

TEST_CASE("torchtitan's DTensor sequence parallelism copies each TP activation through dimension 0", "[stacks][time][tp]") {
    // Llama-3-8B on one 8 x H100 SXM node, TP 8 with sequence parallelism, 4,096
    // tokens a sequence, no recompute. Each layer runs two all-gather / reduce-scatter
    // pairs (into attention and the MLP, out of o_proj and down_proj) of tokens x h x
    // 2 B. torch's functional collectives gather and scatter along dimension 0 only:
    // reduce_scatter_tensor first cats the chunks of its input (a read and a write of
    // the full tensor, 2 x msg), all_gather_tensor cats the chunks of its output (2 x
    // msg more) unless every dimension before the sequence is 1 (a view: local batch
    // 1). Backward runs the mirror collectives with the same copies.
    auto tp_comm = [](Stack st, std::int64_t mb) { return estimate_time(tp8_sp_scenario(st, mb)).time.tp_comm_s; };
    // The H100 SXM preset's HBM: 3,350 GB/s at its measured 0.84 (2,814 GB/s).
    const double hbm = 3350e9 * 0.84;
    for (std::int64_t mb : {1, 2}) {
        CAPTURE(mb);
        const double msg = mb * 4096.0 * 4096 * 2;           // one pair's tensor
        const double per_pair = (mb > 1 ? 4.0 : 2.0) * msg;  // bytes copied per pass
        const double copies = 32 * 2 * 2 * per_pair / hbm;   // layers x pairs x (fwd + bwd)
        CHECK(tp_comm(Stack::Torchtitan, mb) - tp_comm(Stack::GenericEager, mb) == Approx(copies).epsilon(1e-6));
    }
    // 2 x 4,096 tokens: 32 x 2 x 2 x 4 x 67.1 MB = 34.4 GB, 12.2 ms.
    CHECK(tp_comm(Stack::Torchtitan, 2) - tp_comm(Stack::GenericEager, 2) == Approx(0.0122).epsilon(0.01));
    // Megatron's sequence parallelism keeps the sequence dimension first ([s, b, h]): no copies.
    CHECK(tp_comm(Stack::MegatronCore, 2) == Approx(tp_comm(Stack::GenericEager, 2)).epsilon(1e-9));
}

TEST_CASE("torchtitan's Qwen3 TP plan before PR #1870 gathers q and k for their norms; RoPE runs on every head", "[stacks][time][tp]") {
    // Qwen3-32B-shaped layers (h 5,120, 64 query / 8 KV heads of 128, QK-norm) on one
    // 8 x H100 node at TP 8 with sequence parallelism, one 4,096-token sequence, no
    // recompute. Until PR #1870 (2025-10-14) torchtitan's Qwen3 plan set q_norm and
    // k_norm to NoParallel: each forward gathers the normed q (tokens x 8,192 x 2 B)
    // and k (tokens x 1,024 x 2 B) along the head dimension, each with a chunk + cat
    // copy (read + write), and RoPE then rotates all 64 + 8 heads on every rank.
    ModelSpec m = tp_test::model("llama-3-8b");
    m.name = "Qwen3-32B layers";
    m.num_layers = 4;
    m.hidden = 5120;
    m.num_heads = 64;
    m.num_kv_heads = 8;
    m.head_dim = 128;
    m.ffn = 25600;
    m.qk_norm = true;
    auto run = [&](Stack st) {
        const Scenario s = tp8_sp_scenario(st, 1, m);
        return std::pair{s, estimate_time(s).time};
    };
    const auto [s_new, t_new] = run(Stack::Torchtitan);
    const auto [s_old, t_old] = run(Stack::Torchtitan2025);
    const TierCosts tc = tier_costs(s_old.cluster);
    const double hbm = 3350e9 * 0.84;  // the H100 SXM preset's HBM at its measured efficiency
    const double q = 4096.0 * 8192 * 2, k = 4096.0 * 1024 * 2;
    const double gathers = allgather_s(q, 8, tc.intra) + allgather_s(k, 8, tc.intra) + 2 * (q + k) / hbm;
    CHECK(t_old.tp_comm_s - t_new.tp_comm_s == Approx(4 * gathers).epsilon(1e-6));  // forward only, 4 layers
    // By hand: NVSwitch gen3 moves 450 x 0.82 = 369 GB/s of bus bandwidth; a ring
    // all-gather over 8 ranks moves 7/8 of the tensor: q 58.7 MB -> 159 us, k 7.3 MB ->
    // 20 us, plus the collectives' latency, (log2 8 + 1) x 8.4 us each (collectives.hpp
    // allgather_s): 67 us; the two copies read and write 75.5 MB twice at 2,814 GB/s:
    // 54 us. 0.300 ms a layer.
    CHECK(gathers == Approx(299.8e-6).epsilon(0.005));
    // RoPE on all 9,216 head columns of q and k on every rank, not on 1/8 of them:
    // 7/8 of the rotary op's full forward and backward traffic more a layer.
    // That torchtitan also repeated K and V to all 64 heads before SDPA (until PR
    // #2259, 2026-01-27): per token and rank a copy of (128 + 1,024) x 2 B columns
    // read and written forward, and the same summed back in backward.
    double rope_bytes = 0, repeat_bytes = 0;
    for (const OpDef& o : build_step_graph(s_old.model, s_old.setup).ops) {
        if (o.role == OpRole::Rope) rope_bytes = o.hbm_bytes_per_token * 4096 * (1 + o.bwd_hbm_factor);
        if (o.role == OpRole::KvRepeat) repeat_bytes = o.hbm_bytes_per_token / 8 * 4096 * (1 + o.bwd_hbm_factor);
    }
    REQUIRE(rope_bytes > 0);
    CHECK(repeat_bytes == Approx(2 * 4096 * 2.0 * (128 + 1024) * 2));
    // (Within 0.5 %: the repeat's two kernels' launch gaps come beside its bytes.)
    CHECK(t_old.memory_bound_s - t_new.memory_bound_s == Approx(4 * (7.0 / 8 * rope_bytes + repeat_bytes) / hbm).epsilon(0.005));
    // A model without QK-norm has nothing to gather.
    m.qk_norm = false;
    CHECK(run(Stack::Torchtitan2025).second.tp_comm_s == Approx(run(Stack::Torchtitan).second.tp_comm_s).epsilon(1e-12));
}

namespace {

Scenario fsdp8_scenario(Stack st, std::int64_t seq, std::int64_t micro_batch) {
    ScenarioInput in;
    in.model = "llama-3-8b";
    in.gpu = "h100-sxm";
    in.gpus = 8;
    in.dp = 8;
    in.fsdp = FsdpStrategy::FullShard;
    in.seq_len = seq;
    in.micro_batch = micro_batch;
    in.recompute = Recompute::PerOp;
    in.stack = st;
    return resolved(in);
}

}  // namespace

TEST_CASE("torchtitan's FSDP2 hides each layer's collectives behind its neighbours' compute, not its copies", "[stacks][time][fsdp]") {
    // Llama-3-8B (8,030,261,248 parameters) fully sharded over one 8 x H100 SXM node,
    // one 8,192-token sequence a GPU, torchtitan's per-op checkpointing.
    const Scenario s = fsdp8_scenario(Stack::Torchtitan, 8192, 1);
    const TimeBreakdown t = estimate_time(s).time;
    const double P = 8030261248.0;
    // FSDP2's copies on the compute stream (torch/distributed/fsdp/_fully_shard/
    // _fsdp_collectives.py): split_with_sizes_copy out of each all-gather's buffer
    // reads and writes the gathered bf16 weights, forward and again for backward
    // (2 x 2 x 2 B), and chunk_cat reads the bf16 gradients and writes them into the
    // fp32 reduce-scatter buffer (2 + 4 B): 14 B a parameter at the H100 SXM preset's
    // HBM, 3,350 GB/s x 0.84: 112.4 GB in 39.9 ms.
    CHECK(t.fsdp_copies_s == Approx(14 * P / (3350e9 * 0.84)).epsilon(0.002));
    CHECK(t.fsdp_copies_s == Approx(0.0399).epsilon(0.005));
    // A layer (218 M parameters) gathers 0.44 GB and reduces 0.87 GB in a few ms where
    // its forward and backward take tens: only the first gathers (the embedding's
    // 525 M parameters and layer 0's) and the last reductions (layer 0's and the
    // embedding's, fp32) wait, each a ring over the node's NVSwitch.
    const TierCosts tc = tier_costs(s.cluster);
    const double ring = ring_latency_s(8, 1, tc.intra, tc.intra);
    const double emb = 128256.0 * 4096, layer = (P - 2 * emb - 4096) / 32;
    auto gather = [&](double bytes) { return allgather_s(bytes, 8, tc.intra) + ring; };
    const double ends = gather(emb * 2) + gather(layer * 2) + gather(emb * 4) + gather(layer * 4);
    const double hidden_share = t.dp_exposed_s - t.fsdp_copies_s - t.overlap_contention_s;
    CHECK(hidden_share == Approx(ends).epsilon(0.01));
    // The collectives that hide still hold 16 of the 132 SMs (NVIDIA/nccl#689): the
    // compute under them runs 132 / 116 - 1 = 13.8 % longer while they last.
    CHECK(t.overlap_contention_s == Approx((t.dp_comm_s - ends) * (132.0 / 116 - 1)).epsilon(0.01));
    // The same 16 SMs of an A100's 108: 17.4 %; a preset without an SM count: none counted.
    CHECK(overlap_contention(tp_test::gpu("h100-sxm")) == Approx(132.0 / 116 - 1));
    CHECK(overlap_contention(tp_test::gpu("a100-sxm-80gb")) == Approx(108.0 / 92 - 1));
    GpuSpec uncounted = tp_test::gpu("mi300x");
    uncounted.sm_count = 0;
    CHECK(overlap_contention(uncounted) == 0);
    // Under torchtitan's own engine ZeRO-3 is that same FSDP2 full sharding (the plan
    // search's spelling of it).
    Scenario zero3 = s;
    zero3.setup.fsdp = FsdpStrategy::None;
    CHECK(estimate_time(zero3).time.dp_exposed_s == Approx(t.dp_exposed_s).epsilon(1e-12));
    // FSDP1 (the Trainer's, llm-foundry's) keeps its collectives exposed, as its runs measure.
    const TimeBreakdown f1 = estimate_time(fsdp8_scenario(Stack::GenericEager, 8192, 1)).time;
    CHECK(f1.dp_exposed_s == Approx(f1.dp_comm_s).epsilon(1e-12));
    CHECK(f1.fsdp_copies_s == 0);
}

TEST_CASE("torchtitan's HSDP gathers inside the node and all-reduces each layer's shard across nodes behind the compute", "[stacks][time][fsdp]") {
    // Llama-3-8B (8,030,261,248 parameters) on 4 nodes of 8 x H100 SXM, 8 x NDR a node,
    // HYBRID_SHARD: sharded over a node's 8 GPUs, replicated over the 4 nodes; one
    // 8,192-token sequence a GPU, per-op checkpointing.
    ScenarioInput in;
    in.model = "llama-3-8b";
    in.gpu = "h100-sxm";
    in.gpus = 32;
    in.gpus_per_node = 8;
    in.inter_node = "ib-ndr";
    in.nics_per_node = 8;
    in.dp = 32;
    in.fsdp = FsdpStrategy::HybridShard;
    in.seq_len = 8192;
    in.micro_batch = 1;
    in.recompute = Recompute::PerOp;
    in.stack = Stack::Torchtitan;
    const Scenario s = resolved(in);
    const TimeBreakdown t = estimate_time(s).time;
    const double P = 8030261248.0;
    // Per rank and step, by the ring formulas: inside the node two all-gathers of the
    // bf16 weights and one reduce-scatter of the fp32 gradients over 8 ranks,
    // 7/8 x (2 x 2P + 4P) = 7P bytes; across nodes the all-reduce of the rank's fp32
    // shard (4P / 8 bytes) over the 4 replicas, 2 x 3/4 x P / 2 = 0.75 P.
    CHECK(app::describe_setup(s).find("HSDP: sharded inside the node") != std::string::npos);
    CHECK(t.dp_intra_bytes == Approx(7 * P).epsilon(1e-6));
    CHECK(t.dp_inter_bytes == Approx(0.75 * P).epsilon(1e-6));
    // A layer's all-reduce (27 M fp32 elements of a 218 M-parameter layer over 4 nodes)
    // takes a few ms where its backward takes tens: only the ends wait -- the first
    // gathers (embedding half and layer 0) and the last reductions (layer 0's and the
    // embedding's reduce-scatter and their all-reduces).
    const TierCosts tc = tier_costs(s.cluster);
    const double ring = ring_latency_s(8, 1, tc.intra, tc.intra);
    const double emb = 128256.0 * 4096, layer = (P - 2 * emb - 4096) / 32;
    auto gather = [&](double bytes) { return allgather_s(bytes, 8, tc.intra) + ring; };
    auto across = [&](double bytes) { return allreduce_s(bytes / 8, 4, tc.inter) + tc.inter.latency_s; };
    const double ends = gather(emb * 2) + gather(layer * 2) + gather(emb * 4) + gather(layer * 4) + across(emb * 4) + across(layer * 4);
    CHECK(t.dp_exposed_s - t.fsdp_copies_s - t.overlap_contention_s == Approx(ends).epsilon(0.01));
    // FSDP1's HYBRID_SHARD (the Trainer's, llm-foundry's) keeps them all exposed.
    in.stack = Stack::GenericEager;
    const TimeBreakdown f1 = estimate_time(resolved(in)).time;
    CHECK(f1.dp_exposed_s == Approx(f1.dp_comm_s).epsilon(1e-12));
    CHECK(t.dp_exposed_s - t.fsdp_copies_s - t.overlap_contention_s < 0.3 * f1.dp_exposed_s);
    CHECK(t.dp_exposed_s < f1.dp_exposed_s);
}

TEST_CASE("the compute FSDP2's overlapped collectives slow matches copy-engine collectives' measured gain", "[stacks][time][fsdp]") {
    // pytorch/pytorch PR #179937: torchtitan Llama-3-8B on 8 x H100, TP 1, two 4,096-token
    // sequences a GPU: FSDP2's collectives moved to copy-engine kernels that hold no SM
    // raise 9,369 to 9,593 tokens/s a GPU, 8,192 / 9,369 - 8,192 / 9,593 = 20.4 ms a step.
    const TimeBreakdown t = estimate_time(fsdp8_scenario(Stack::Torchtitan, 4096, 2)).time;
    const double measured = 8192 / 9369.0 - 8192 / 9593.0;
    CHECK(measured == Approx(0.0204).epsilon(0.01));
    CHECK(t.overlap_contention_s == Approx(measured).epsilon(0.25));
}
