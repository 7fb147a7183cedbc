// Step time, throughput and cost: hand-derived checks and the practitioners'
// reported effects (../shared/seeds) on stated scenarios.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "trainplan/time.hpp"

using nlohmann::json;

namespace {

json sim(std::vector<std::string> args) { return tp_test::cli_json("simulate", std::move(args)); }

double step(const json& j) { return j["time"]["step_s"].get<double>(); }

}  // namespace

TEST_CASE("simulate --json carries the design's output names", "[time][cli]") {
    const json j = sim({"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--zero", "1", "--global-batch", "64"});
    for (const char* k : {"step_s", "compute_s", "communication_s", "bubble_s", "optimizer_s", "offload_s", "data_s"})
        CHECK(j["time"].contains(k));
    for (const char* k : {"tokens_per_s", "tflops_per_gpu", "mfu", "hfu"}) CHECK(j["throughput"].contains(k));
}

TEST_CASE("one A100 updating Llama-2-7B with Adam: the optimizer step is memory-bound", "[time][optimizer]") {
    // Hand-derived: DeepSpeed mixed-precision AdamW on Psi = 6,738,415,616
    // parameters, one GPU. Per parameter the step reads the 16-bit gradient, reads
    // and writes the fp32 master (4 B) and both fp32 moments (8 B), writes the
    // 16-bit weight (2 B); clipping reads the gradient again and zeroing writes
    // it: 3 x 2 + 2 x 12 + 2 = 32 B, at the A100-80GB's measured HBM rate
    // (2039 GB/s x 0.88, hardware-facts efficiency.hbm_a100_80gb: 1800 of 2039):
    // 32 Psi / 1794 GB/s = 0.1202 s.
    const json j = sim({"llama-2-7b", "--gpu", "a100-sxm-80gb", "--seq-len", "512"});
    const double psi = 6'738'415'616.0;
    CHECK(j["time"]["optimizer_s"].get<double>() == Approx(32 * psi / (2039e9 * 0.88)).epsilon(1e-3));
}

TEST_CASE("Megatron without gradient accumulation fusion adds one pass over the gradients per micro-batch", "[time][megatron]") {
    // --no-gradient-accumulation-fusion: each weight-gradient GEMM writes a 16-bit
    // .grad and Megatron's DDP hook runs `param.main_grad.add_(param.grad.data)`:
    // read 2 B, read 4 B, write 4 B per trainable parameter, every micro-batch.
    // Llama-2-7B, Psi = 6,738,415,616, full fine-tune on one A100-80GB at its
    // measured HBM rate (2039 GB/s x 0.88): 10 Psi / 1794 GB/s = 37.55 ms per
    // micro-batch, 150.2 ms over 4 micro-batches.
    const double psi = 6'738'415'616.0;
    const std::vector<std::string> job{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--seq-len", "4096",
                                       "--grad-accum", "4"};
    auto compute = [&](const char* fusion, const char* framework = "megatron") {
        auto a = job;
        a.insert(a.end(), {"--grad-accum-fusion", fusion, "--framework", framework});
        return sim(a)["time"]["compute_s"].get<double>();
    };
    CHECK(compute("off") - compute("on") == Approx(4 * 10 * psi / (2039e9 * 0.88)).epsilon(1e-6));
    // Only Megatron keeps fp32 main grads that way: DeepSpeed's engine is untouched.
    CHECK(compute("off", "deepspeed") == compute("on", "deepspeed"));
}

TEST_CASE("torch.optim.AdamW's foreach path passes over the tensors once per op", "[time][optimizer]") {
    // Hand-derived from torch/optim/adamw.py _multi_tensor_adamw (torch 2.x, no
    // amsgrad): mul_(params) 2p; lerp_(exp_avgs, grads) 2s + g; mul_(exp_avg_sqs)
    // 2s; addcmul_(exp_avg_sqs, g, g) 2s + 2g; sqrt -> denom 2s; div_ and add_(eps)
    // 4s; addcdiv_(params, exp_avgs, denom) 2p + 2s: 4p + 14s + 3g; and
    // clip_grad_norm_ (foreach): the norm reads the gradients, the in-place scale
    // reads and writes them: + 3g. Pure bf16 (p = s = g = 2 B): 8 + 28 + 12 = 48 B
    // per parameter. Llama-2-7B, Psi = 6,738,415,616, on one A100-80GB at its
    // measured HBM rate 2039 GB/s x 0.88: 48 Psi / 1794 GB/s = 0.1803 s.
    const double psi = 6'738'415'616.0;
    const std::vector<std::string> job{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--seq-len", "512", "--precision", "bf16",
                                       "--framework", "pytorch-amp"};
    auto with = [&](const char* stack) {
        auto a = job;
        a.insert(a.end(), {"--stack", stack});
        return sim(a)["time"]["optimizer_s"].get<double>();
    };
    CHECK(with("hf-fused") == Approx(48 * psi / (2039e9 * 0.88)).epsilon(1e-3));
    // torchtitan's fused AdamW: one kernel reads g, p, m, v and writes p, m, v; the
    // clip reads g once more: 3 x 2 + 2 x (2 + 2) + 2 x 2 = 18 B (the fused count above).
    CHECK(with("torchtitan") == Approx(18 * psi / (2039e9 * 0.88)).epsilon(1e-3));
    // Mixed precision under autocast keeps fp32 parameters, gradients and moments
    // (p = s = g = 4 B): 16 + 56 + 24 = 96 B.
    auto amp = job;
    amp[amp.size() - 3] = "bf16-mixed";
    amp.insert(amp.end(), {"--stack", "generic-eager"});
    CHECK(sim(amp)["time"]["optimizer_s"].get<double>() == Approx(96 * psi / (2039e9 * 0.88)).epsilon(1e-3));
}

TEST_CASE("PyTorch DDP copies gradients into its buckets and back", "[time][collectives]") {
    // torch/csrc/distributed/c10d/reducer.cpp (gradient_as_bucket_view=False, the
    // default): mark_variable_ready_dense writes each gradient into its bucket,
    // copy_bucket_to_grad writes the reduced bucket back: each reads and writes
    // the gradients once. Llama-2-7B under autocast keeps fp32 gradients (4 B),
    // Psi = 6,738,415,616: 4 x 4 Psi bytes at the A100-80GB's measured HBM rate
    // (2039 GB/s x 0.88) = 0.0601 s on top of the all-reduce, here left
    // unoverlapped so the exposed time is the all-reduce plus the copies.
    const json j = sim({"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "2", "--framework", "pytorch-amp", "--seq-len", "512",
                        "--overlap-grad-reduce", "false"});
    const double psi = 6'738'415'616.0;
    const double copies = j["time"]["dp_exposed_s"].get<double>() - j["time"]["dp_comm_s"].get<double>();
    CHECK(copies == Approx(16 * psi / (2039e9 * 0.88)).epsilon(1e-6));
    // Megatron's DDP reduces its contiguous main-grad buffer in place: no copies.
    const json m = sim({"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "2", "--framework", "megatron", "--seq-len", "512",
                        "--overlap-grad-reduce", "false"});
    CHECK(m["time"]["dp_exposed_s"].get<double>() == Approx(m["time"]["dp_comm_s"].get<double>()).epsilon(1e-12));
}

TEST_CASE("torch DDP's all-reduce adds its whole time to the step (2 x RTX 3090 over NVLink)", "[time][collectives]") {
    // huggingface/transformers#9371 (moyix's 2 x RTX 3090 with an NVLink bridge,
    // run_clm.py, fp32, per-device batch 4, block 128; stas00's table of the log):
    // GPT-2 large trained 400 steps on one GPU in 98.5939 s and 200 steps of DDP
    // in 65.7918 s: 328.96 - 246.48 = 82.5 ms more per step. GPT-2 medium, the same
    // way: 167.18 - 123.46 = 43.7 ms. The model's extra time is the all-reduce and
    // DDP's bucket copies, none of it hidden behind backward.
    auto extra = [](const char* model) {
        const std::vector<std::string> job{model, "--gpu", "rtx-3090", "--precision", "fp32", "--framework", "pytorch-amp",
                                           "--micro-batch", "4", "--seq-len", "128", "--flash-attention", "off"};
        auto two = job;
        two.insert(two.end(), {"--node", "2x-rtx-3090-nvlink", "--gpus", "2"});
        return sim(two)["time"]["step_s"].get<double>() - sim(job)["time"]["step_s"].get<double>();
    };
    CHECK(extra("gpt2-large") == Approx(0.0825).epsilon(0.15));
    CHECK(extra("gpt2-medium") == Approx(0.0437).epsilon(0.15));
    // The same box with NCCL_P2P_DISABLE=1 (moyix's table, DDP_no_NV column):
    // through host memory, 761.1 - 246.5 = 514.6 ms per step for GPT-2 large at
    // block 128, 446.8 - 199.2 = 247.6 ms for GPT-2 medium at block 256 (the
    // 2x-rtx-3090 node: no bridge, no P2P).
    auto extra_nop2p = [](const char* model, const char* block) {
        const std::vector<std::string> job{model, "--gpu", "rtx-3090", "--precision", "fp32", "--framework", "pytorch-amp",
                                           "--micro-batch", "4", "--seq-len", block, "--flash-attention", "off"};
        auto two = job;
        two.insert(two.end(), {"--node", "2x-rtx-3090", "--gpus", "2"});
        return sim(two)["time"]["step_s"].get<double>() - sim(job)["time"]["step_s"].get<double>();
    };
    CHECK(extra_nop2p("gpt2-large", "128") == Approx(0.5146).epsilon(0.15));
    CHECK(extra_nop2p("gpt2-medium", "256") == Approx(0.2476).epsilon(0.15));
    // With the all-reduce hidden behind backward (as Megatron's
    // --overlap-grad-reduce is), the same job adds only what the hidden all-reduce's
    // 16 SMs cost the backward under it, 82 / 66 - 1 = 24.2 % of the RTX 3090's
    // compute while it runs, and the last bucket. (At block 256, whose backward
    // outlasts the all-reduce; at 128 the two take about as long.)
    const json meg = sim({"gpt2-large", "--gpu", "rtx-3090", "--precision", "fp32", "--framework", "megatron", "--micro-batch", "4",
                          "--seq-len", "256", "--flash-attention", "off", "--node", "2x-rtx-3090-nvlink", "--gpus", "2"});
    CHECK(meg["time"]["dp_exposed_s"].get<double>() < 0.3 * meg["time"]["dp_comm_s"].get<double>());
    // (The last bucket, 25 MB, crosses the bridge in under a millisecond.)
    CHECK(meg["time"]["overlap_contention_s"].get<double>() > (82.0 / 66 - 1) * (meg["time"]["dp_comm_s"].get<double>() - 0.001));
}

TEST_CASE("pipeline bubble is (p - 1) micro-batch slots of 1F1B", "[time][pipeline]") {
    // Narayanan et al. 2021, Sec. 2.2: bubble fraction (p - 1)/m of the ideal time.
    const json j = sim({"llama-2-13b", "--gpu", "a100-sxm-80gb", "--gpus", "4", "--pp", "4", "--global-batch", "16"});
    const double m = 16, p = 4;
    const double per_mb = j["time"]["compute_s"].get<double>() / m;
    // Each slot also carries the two point-to-point transfers of that micro-batch.
    const double p2p_per_mb = j["time"]["pp_comm_s"].get<double>() / m;
    CHECK(j["time"]["bubble_s"].get<double>() == Approx((p - 1) * (per_mb + p2p_per_mb)));
}

TEST_CASE("tied embeddings: the first and last pipeline stages all-reduce the embedding gradient once a step", "[time][pipeline]") {
    // BLOOM-176B as BigScience ran it (tr11: TP 4, PP 12, DP 8 on 48 nodes of 8
    // A100s, 4 Omni-Path links per node), global batch 16 at micro-batch 2: one
    // micro-batch per replica. Hand derivation:
    //  - per micro-batch, one activation send each way: 2 x 2048 x 14,336 x 2 B / 4
    //    (scatter-gather over TP) = 29.36 MB at 12.5 GB/s x 0.34 x 4 links / 8
    //    GPUs = 2.125 GB/s per GPU, 13.82 ms + 22.4 us each;
    //  - the tied word embedding, 250,880 x 14,336 / 4 = 899,153,920 elements per
    //    TP rank, its fp32 gradient (3.597 GB) all-reduced between stages 0 and 11:
    //    a two-rank ring moves S per rank, 1.693 s + 2 x 22.4 us. BigScience's
    //    figure for that step (DeepSpeed pipe/engine.py _exec_reduce_tied_grads on
    //    the fp32 _hp_grad) at the 135 Gb/s NCCL reached per node: about 1.7 s.
    const json j = sim({"bloom-176b", "--gpu", "a100-sxm-80gb", "--gpus", "384", "--gpus-per-node", "8", "--inter-node", "omnipath-100",
                        "--nics-per-node", "4", "--framework", "megatron", "--zero", "1", "--recompute", "full", "--flash-attention", "off",
                        "--tp", "4", "--pp", "12", "--micro-batch", "2", "--global-batch", "16", "--seq-len", "2048"});
    const double bus = 12.5e9 * 0.34 * 4 / 8;
    const double send = 22.4e-6 + 2048.0 * 2 * 14336 * 2 / 4 / bus;
    const double tied = 250880.0 * 14336 / 4 * 4 / bus + 2 * 22.4e-6;
    CHECK(j["time"]["pp_comm_s"].get<double>() == Approx(2 * send + tied).epsilon(1e-3));
    CHECK(j["time"]["tied_embedding_s"].get<double>() == Approx(tied).epsilon(1e-3));
    // An untied model (Llama-2-70B: separate input and output matrices) has no such pair.
    // Its pp_comm is the two sends alone: 4096 x 8192 x 2 B / 8 = 8.39 MB over
    // one HDR port per GPU (25 GB/s x 0.94), where a tied 32,000 x 8,192 / 8
    // fp32 gradient would add 5.6 ms.
    const json untied = sim({"llama-2-70b", "--gpu", "a100-sxm-80gb", "--gpus", "64", "--gpus-per-node", "8", "--inter-node", "ib-hdr",
                             "--nics-per-node", "8", "--framework", "megatron", "--tp", "8", "--pp", "8", "--micro-batch", "1",
                             "--global-batch", "1", "--seq-len", "4096"});
    const double msg = 4096.0 * 8192 * 2 / 8;
    CHECK(untied["time"]["pp_comm_s"].get<double>() == Approx(2 * (22.4e-6 + msg / (25e9 * 0.94))).epsilon(1e-3));
    CHECK(untied["time"]["tied_embedding_s"].get<double>() == 0.0);
}

TEST_CASE("data-parallel all-reduce over a through-host PCIe link: NCCL ring formula", "[time][collectives]") {
    // GPT-2 XL: 1,557,611,200 parameters, 16-bit gradients. Ring all-reduce over
    // n = 2 ranks moves 2 (n-1)/n S = S bytes per rank at the bus bandwidth
    // (6.0 GB/s through host memory: 15.75 GB/s x 0.381, the rate 2 x RTX 3090
    // DDP measured in huggingface/transformers#9371), plus 2 steps of 14 us latency.
    const json j = sim({"gpt2-xl", "--node", "2x-rtx-4090", "--gpus", "2", "--micro-batch", "1", "--seq-len", "512"});
    const double bytes = 1'557'611'200.0 * 2;
    CHECK(j["time"]["dp_comm_s"].get<double>() == Approx(bytes / (15.75e9 * 0.381) + 2 * 14e-6).epsilon(1e-6));
}

TEST_CASE("seeds: two RTX 4090s on a desktop PCIe board scale clearly worse than two A100 over NVLink", "[time][seeds]") {
    // Seed 000: "two cards give only ~1.3x over one". Same data-parallel job:
    // GPT-2 XL, DeepSpeed ZeRO-1 (the default framework) over 2 GPUs, micro-batch 2,
    // 1024 tokens, 4 micro-batches per GPU and step.
    const std::vector<std::string> job{"gpt2-xl", "--gpus", "2", "--zero", "1", "--micro-batch", "2", "--seq-len", "1024"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> a = job;
        a.insert(a.end(), extra.begin(), extra.end());
        return sim(a);
    };
    const json consumer = with({"--node", "2x-rtx-4090", "--global-batch", "16"});
    const json nvlink = with({"--gpu", "a100-sxm-80gb", "--global-batch", "16"});
    const double eff_consumer = consumer["throughput"]["scaling_efficiency"].get<double>();
    const double eff_nvlink = nvlink["throughput"]["scaling_efficiency"].get<double>();
    std::printf("scaling efficiency, 2 x RTX 4090 (PCIe 4.0 x8/x8, no P2P): %.0f %%; 2 x A100 SXM (NVLink): %.0f %%\n",
                100 * eff_consumer, 100 * eff_nvlink);
    CHECK(eff_nvlink >= 0.9);
    CHECK(eff_consumer <= 0.8);
    CHECK(eff_nvlink - eff_consumer >= 0.2);
    // Speed-up over one card 2 x efficiency: at most the reported ~1.3x (the seed
    // names no job), well short of 2x.
    CHECK(2 * eff_consumer <= 1.55);
    // Without accumulation the same box is communication-bound: DeepSpeed
    // all-reduces the 16-bit gradients (2 x 1/2 x 3.1 GB per rank) on the compute
    // stream (overlap_comm off) through host memory at 6.0 GB/s, ~0.52 s, and
    // gathers the weights (~0.15 s), against ~0.2 s of compute per step: two
    // cards are slower than one.
    const json no_accum = with({"--node", "2x-rtx-4090", "--global-batch", "4"});
    CHECK(2 * no_accum["throughput"]["scaling_efficiency"].get<double>() < 1.0);
}

TEST_CASE("seeds: InfiniBand vs 25 GbE between nodes is worth more than 40 % throughput", "[time][seeds]") {
    // Seed 004: "cross-node: InfiniBand vs ordinary Ethernet gives >40 % more throughput".
    // Llama-2-7B, 2 nodes x 8 A100, ZeRO-1, global batch 256 x 2048 tokens.
    const std::vector<std::string> job{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "16", "--gpus-per-node", "8", "--zero", "1",
                                       "--micro-batch", "4", "--global-batch", "256"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> a = job;
        a.insert(a.end(), extra.begin(), extra.end());
        return sim(a)["throughput"]["tokens_per_s"].get<double>();
    };
    const double ib = with({"--inter-node", "ib-hdr", "--nics-per-node", "8"});
    const double eth = with({"--inter-node", "eth-25g", "--nics-per-node", "1"});
    std::printf("tokens/s: 8 x HDR InfiniBand %.0f, one 25 GbE port %.0f (%.2fx)\n", ib, eth, ib / eth);
    CHECK(ib / eth >= 1.4);
}

TEST_CASE("seeds: full recompute costs 25-35 % more step time, selective a few percent", "[time][seeds]") {
    // Seeds 000/004: "gradient checkpointing: +20-30 % compute"; Korthikanti et al.:
    // one extra forward ~ +33 % of the 3-pass compute; selective 2.7 % FLOPs for GPT-3.
    const std::vector<std::string> job{"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--zero", "1", "--micro-batch", "2",
                                       "--seq-len", "4096", "--global-batch", "64"};
    auto with = [&](const char* r) {
        std::vector<std::string> a = job;
        a.insert(a.end(), {"--recompute", r});
        return step(sim(a));
    };
    const double none = with("none"), full = with("full");
    CHECK(full / none - 1 >= 0.25);
    CHECK(full / none - 1 <= 0.35);
    // Selective recompute matters with eager attention (it repeats the s x s work).
    const std::vector<std::string> gpt3{"gpt3-175b", "--gpu", "a100-sxm-80gb", "--gpus", "64", "--tp", "8", "--pp", "8", "--sp",
                                        "--flash-attention", "off", "--framework", "megatron", "--global-batch", "64"};
    auto with3 = [&](const char* r) {
        std::vector<std::string> a = gpt3;
        a.insert(a.end(), {"--recompute", r});
        return step(sim(a));
    };
    const double sel = with3("selective") / with3("none") - 1;
    CHECK(sel > 0.0);
    CHECK(sel <= 0.06);
}

TEST_CASE("seeds: fp32 is 2x or more slower than bf16 mixed on tensor-core GPUs", "[time][seeds]") {
    // Datacenter parts: fp32 (no TF32, PyTorch's default) runs on CUDA cores at
    // 1/16 (A100: 19.5 vs 312) to 1/15 (H100) of the bf16 tensor rate.
    for (const char* gpu : {"a100-sxm-80gb", "h100-sxm"}) {
        const std::vector<std::string> job{"llama-3.2-1b", "--gpu", gpu, "--micro-batch", "2", "--seq-len", "2048"};
        auto with = [&](const char* p) {
            std::vector<std::string> a = job;
            a.insert(a.end(), {"--precision", p});
            return step(sim(a));
        };
        CAPTURE(gpu);
        CHECK(with("fp32") / with("bf16-mixed") >= 2.0);
    }
    // GeForce: bf16 with fp32 accumulate runs at exactly 2x the fp32 rate
    // (RTX 4090: 165.2 vs 82.6 TFLOP/s), and the optimizer step costs about the
    // same either way, so the whole step slows by close to, but under, 2x.
    const std::vector<std::string> job{"llama-3.2-1b", "--gpu", "rtx-4090", "--micro-batch", "2", "--seq-len", "2048"};
    auto with = [&](const char* p) {
        std::vector<std::string> a = job;
        a.insert(a.end(), {"--precision", p});
        return step(sim(a));
    };
    const double ratio = with("fp32") / with("bf16-mixed");
    CHECK(ratio >= 1.7);
    CHECK(ratio <= 2.0);
}

TEST_CASE("thermal throttling and a starving data loader show up in the step", "[time][seeds]") {
    const std::vector<std::string> job{"llama-2-7b", "--gpu", "rtx-4090", "--method", "qlora", "--micro-batch", "2"};
    const json base = sim(job);
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> a = job;
        a.insert(a.end(), extra.begin(), extra.end());
        return sim(a);
    };
    // 80 % sustained clock slows what the SMs do, not what waits on memory
    // traffic alone: the step grows, by less than the 1/0.8 = 1.25 of a purely
    // clock-bound step, because the optimizer step, the element-wise kernels and
    // bitsandbytes' dequantization stay bandwidth-bound. The GEMMs are about half
    // of this 7B QLoRA step: forward, its full recompute and the input-gradient
    // GEMMs, 3 x 2 x 6.7e9 x 4096 tokens = 1.65e14 FLOP, ~1.0 s at the 4090's
    // 165 TFLOP/s of a ~1.9 s step; half the step at 1/0.8 gives ~1.125: > 1.10.
    const json hot = with({"--sustained-clock", "0.8"});
    const double slow = step(hot) / step(base);
    CHECK(slow > 1.10);
    CHECK(slow < 1.25);
    CHECK(hot["time"]["optimizer_s"].get<double>() == base["time"]["optimizer_s"].get<double>());
    // Two workers at 1 sample/s each deliver 2 samples/s: a 2-sample step needs 1 s of loading.
    const json starved = with({"--loader-workers", "2", "--worker-samples-per-s", "1"});
    const double busy = step(base);
    CHECK(step(starved) == Approx(std::max(busy, 1.0)));
    CHECK(starved["time"]["data_s"].get<double>() == Approx(std::max(0.0, 1.0 - busy)));
}

TEST_CASE("thermal throttling stretches the math, not the memory-bound ops (issue 12)", "[time][issue12]") {
    // Full training of GPT-2 Large on one RTX 4090: element-wise (HBM-bound) ops are
    // ~18 % of its compute time. At 60 % of the boost clock only the rest is stretched:
    // compute_hot = memory_bound + (compute - memory_bound) / 0.6. Before, the whole
    // compute time was divided by the clock.
    const std::vector<std::string> job{"gpt2-large", "--gpu", "rtx-4090", "--micro-batch", "4", "--seq-len", "1024"};
    const json base = sim(job);
    auto hot_args = job;
    hot_args.insert(hot_args.end(), {"--sustained-clock", "0.6"});
    const json hot = sim(hot_args);
    const double mb = base["time"]["memory_bound_s"].get<double>(), compute = base["time"]["compute_s"].get<double>();
    REQUIRE(mb > 0.05 * compute);
    CHECK(hot["time"]["memory_bound_s"].get<double>() == Approx(mb));
    CHECK(hot["time"]["compute_s"].get<double>() == Approx(mb + (compute - mb) / 0.6));
    CHECK(hot["time"]["compute_s"].get<double>() < compute / 0.6);
    CHECK(hot["time"]["thermal_s"].get<double>() == Approx((compute - mb) * (1 / 0.6 - 1)));
}

TEST_CASE("time, energy and cost to train a token budget", "[time][cost]") {
    const json j = sim({"llama-3-8b", "--gpu", "h100-sxm", "--gpus", "64", "--zero", "1", "--global-batch", "512", "--seq-len",
                        "8192", "--tokens", "1e12", "--rent", "2.5", "--electricity", "0.1", "--pue", "1.3"});
    const double tps = j["throughput"]["tokens_per_s"].get<double>();
    const double seconds = 1e12 / tps;
    CHECK(j["cost"]["train_time_s"].get<double>() == Approx(seconds));
    CHECK(j["cost"]["gpu_hours"].get<double>() == Approx(64 * seconds / 3600));
    CHECK(j["cost"]["rent_cost_usd"].get<double>() == Approx(2.5 * 64 * seconds / 3600));
    // Power at the wall: DGX H100 lists 10.2 kW maximum for 8 x H100 SXM (NVIDIA
    // DGX H100 datasheet); training draws somewhat below the maximum, so 8 GPUs
    // at PUE 1 fall between 80 % and 100 % of it (and 64 GPUs x PUE 1.3 scale that).
    const double per_8_at_pue1 = j["cost"]["power_w"].get<double>() / 8 / 1.3;
    CHECK(per_8_at_pue1 >= 0.8 * 10.2e3);
    CHECK(per_8_at_pue1 <= 10.2e3);
    // DGX A100: 6.5 kW maximum for 8 x A100 SXM (DGX A100 datasheet).
    const json a = sim({"llama-3-8b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--zero", "1", "--pue", "1", "--tokens", "1e9"});
    CHECK(a["cost"]["power_w"].get<double>() >= 0.8 * 6.5e3);
    CHECK(a["cost"]["power_w"].get<double>() <= 6.5e3);
}

TEST_CASE("bad run options are rejected with the limit named", "[time][bad-input]") {
    const auto r = tp_test::cli({"simulate", "llama-2-7b", "--gpu", "rtx-4090", "--pue", "0.5"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --pue = 0.5 must be at least 1\n");
    const auto w = tp_test::cli({"simulate", "llama-2-7b", "--gpu", "rtx-4090", "--loader-workers", "4"});
    CHECK(w.code == 2);
    CHECK(w.err == "error: --loader-workers needs --worker-samples-per-s (how fast one worker prepares samples)\n");
}

struct XlaRow {
    double m, n, k, flops;  // one b = 1 entry of XLA's table: the shape and its measured FLOP/s
};
// The scenario XLA's sm_90 matmul table is read against: bf16 on an H100 SXM at
// the boost clock (the table's five-run bursts; the preset's power-saturated
// rate, which a training step's GEMMs run at, is set aside).
static trainplan::Scenario xla_h100_burst() {
    trainplan::Scenario s;
    s.model = tp_test::model("llama-2-7b");
    s.cluster.gpu = tp_test::gpu("h100-sxm");
    s.cluster.gpu.sustained_matmul_flops = 0;
    s.setup.precision = trainplan::Precision::BF16Mixed;
    return s;
}
// The model's FLOP/s on a row's shape.
static double modelled_flops(const trainplan::Scenario& s, const XlaRow& r) {
    return 2.0 * r.m * r.n * r.k / trainplan::matmul_seconds(s, r.m, r.n, r.k);
}

TEST_CASE("GEMM shape efficiency against XLA's measured H100 matmul table", "[time][gemm]") {
    // Measured bf16 x bf16 -> bf16 matmuls on sm_90 (H100 SXM: values above the
    // PCIe card's reach), FLOP/s as XLA's matmul_perf_table_gen recorded them
    // (median kernel time of 5 runs): openxla/xla
    // xla/service/gpu/model/matmul_interpolator_data.h, kDefaultMatmulPTable key
    // "sm_90", entries with b = 1 (tensorflow/tensorflow @372d578b,
    // third_party/xla/...). The shapes of training: m x n >= 4096 x 2048, k >= 1024.
    const XlaRow rows[] = {
        {4096, 4096, 4096, 783328793548203}, {4096, 4096, 2048, 738736406437117}, {4096, 4096, 1024, 677439636593059},
        {4096, 2048, 4096, 758434522012648}, {4096, 2048, 2048, 716066571523841}, {4096, 2048, 1024, 593227527071823},
        {2048, 4096, 4096, 753643516181744}, {2048, 4096, 2048, 715350982011992}, {2048, 4096, 1024, 594212409518539},
    };
    const trainplan::Scenario s = xla_h100_burst();
    std::vector<double> errors;
    for (const XlaRow& r : rows) {
        const double modelled = modelled_flops(s, r);
        const double e = modelled / r.flops - 1.0;
        INFO(r.m << " x " << r.n << " x " << r.k << ": modelled " << modelled / 1e12 << " TFLOP/s, measured " << r.flops / 1e12);
        CHECK(std::abs(e) < 0.10);
        errors.push_back(std::abs(e));
    }
    std::sort(errors.begin(), errors.end());
    CHECK(errors[errors.size() / 2] < 0.04);
}

TEST_CASE("an output of few tiles splits its reduction over the idle SMs: XLA's deep, narrow rows", "[time][gemm]") {
    // XLA's sm_90 bf16 table as updated later (the same file and key at ROCm/xla
    // @ea2c45f2ca, 2026-07-31), b = 1 rows whose output has at most 32 tiles of
    // 128 x 128 on the H100's 132 SMs and whose reduction is 4096 deep: cuBLAS splits
    // k (split-K) instead of leaving three quarters of the SMs idle. One slice per
    // tile would give 512 x 512 x 4096 84 TFLOP/s against the 187.5 measured; the
    // weight gradients of LoRA adapters and of small models' square layers have
    // this shape (a few output tiles, the tokens as the reduction).
    const XlaRow rows[] = {
        {512, 512, 4096, 187454927374301}, {256, 1024, 4096, 177068242744063}, {1024, 512, 4096, 312134251162790},
        {512, 1024, 4096, 300936609865470}, {1024, 256, 4096, 187193483960948}, {256, 2048, 4096, 296286375275938},
    };
    const trainplan::Scenario s = xla_h100_burst();
    for (const XlaRow& r : rows) {
        const double modelled = modelled_flops(s, r);
        INFO(r.m << " x " << r.n << " x " << r.k << ": modelled " << modelled / 1e12 << " TFLOP/s, measured " << r.flops / 1e12);
        CHECK(std::abs(modelled / r.flops - 1.0) < 0.30);
    }
}

TEST_CASE("batched GEMMs (eager attention's per-head matmuls) share their waves: XLA's b > 1 rows", "[time][gemm]") {
    // The same XLA sm_90 bf16 table, its batched entries (b GEMMs of m x n x k in
    // one kernel, as torch.matmul runs q k^T and p v over batch x heads). The
    // batch's tiles fill the SMs together; timing each GEMM of the batch alone
    // would leave most SMs idle when one GEMM has few tiles: b = 4 of
    // 1024 x 512 x 2048 (32 tiles each on 132 SMs) ran at 514 TFLOP/s, and
    // alone-each would give 175.
    struct Row {
        double b, m, n, k, flops;
    };
    const Row rows[] = {
        {4, 1024, 2048, 2048, 712739345502821}, {2, 4096, 4096, 2048, 763011394582711}, {4, 2048, 2048, 2048, 725746417032781},
        {2, 2048, 4096, 1024, 678724288242730}, {4, 1024, 1024, 2048, 626088527113702}, {4, 512, 4096, 1024, 592245904026475},
        {4, 1024, 512, 2048, 514244168582375},  {2, 512, 2048, 2048, 525314003913894},  {4, 256, 2048, 1024, 358870930481283},
    };
    const trainplan::Scenario s = xla_h100_burst();
    std::vector<double> errors;
    for (const Row& r : rows) {
        const double flops = 2.0 * r.b * r.m * r.n * r.k;
        const double modelled = flops / trainplan::matmul_seconds(s, r.m, r.n, r.k, r.b);
        const double e = modelled / r.flops - 1.0;
        INFO(r.b << " x " << r.m << " x " << r.n << " x " << r.k << ": modelled " << modelled / 1e12 << " TFLOP/s, measured " << r.flops / 1e12);
        CHECK(std::abs(e) < 0.20);
        errors.push_back(std::abs(e));
    }
    std::sort(errors.begin(), errors.end());
    CHECK(errors[errors.size() / 2] < 0.10);
    // One GEMM of the batch alone is a third of the rate the batch reaches.
    const double alone = 2.0 * 1024 * 512 * 2048 / trainplan::matmul_seconds(s, 1024, 512, 2048);
    CHECK(alone < 0.5 * 514244168582375.0);
}

TEST_CASE("a training step's GEMMs run at the power-saturated rate where it is measured", "[time][gemm][hardware]") {
    // stas00/ml-engineering commit 082816f, compute/accelerator/README.md MAMF/MSMF table:
    // H200 SXM bf16 holds 708.5 TFLOP/s at 8192 x 8448 x 20480 once at ~693 W (SM clock
    // 1465 MHz), against 841.9 in a burst at 1980 MHz; B200 1456.3 at 9472 x 8192 x 20480
    // (~994 W, 1339 MHz), against 1770.9.
    struct Row {
        const char* gpu;
        double m, n, k, msmf_tflops;
    };
    for (const Row& r : {Row{"h200", 8192, 8448, 20480, 708.5}, Row{"b200", 9472, 8192, 20480, 1456.3}}) {
        CAPTURE(r.gpu);
        trainplan::Scenario s;
        s.model = tp_test::model("llama-2-7b");
        s.cluster.gpu = tp_test::gpu(r.gpu);
        s.setup.precision = trainplan::Precision::BF16Mixed;
        const double flops = 2.0 * r.m * r.n * r.k;
        const double sustained = flops / trainplan::matmul_seconds(s, r.m, r.n, r.k) / 1e12;
        CHECK(sustained == Approx(r.msmf_tflops).epsilon(0.05));
        // Without the sustained figure the same GEMM runs at the burst rate: the
        // preset's bf16 peak x matmul_efficiency over the sustained figure, by hand
        // 989.4 x 0.803 / 708.5 = 1.1214 (H200), 2250 x 0.776 / 1456.3 = 1.1989 (B200).
        s.cluster.gpu.sustained_matmul_flops = 0;
        const double burst = flops / trainplan::matmul_seconds(s, r.m, r.n, r.k) / 1e12;
        CHECK(burst / sustained == Approx(std::string(r.gpu) == "h200" ? 1.1214 : 1.1989).epsilon(0.002));
    }
    // H100 SXM: no MSMF of its own; the H200's (same GH100 die, clocks and 700 W).
    CHECK(trainplan::power_limited_share(tp_test::gpu("h100-sxm")) == Approx(708.5 / (989.4 * 0.803)).epsilon(1e-3));
    // A100 SXM (400 W): cuBLAS 8192^3 on randn inputs holds 257 TFLOP/s, 295 on
    // zeros (Horace He, thonking.ai 2024: switching power against the limit),
    // against the 271.2 burst MAMF (0.869 x 312): 257 / 271.2 = 0.9477.
    CHECK(trainplan::power_limited_share(tp_test::gpu("a100-sxm-80gb")) == Approx(257.0 / (312.0 * 0.869)).epsilon(1e-3));
    // No sustained figure: the burst rate stands.
    CHECK(trainplan::power_limited_share(tp_test::gpu("l40s")) == 1.0);
    // simulate says which rate its GEMMs run at.
    const auto r = tp_test::cli({"simulate", "llama-2-7b", "--gpu", "h100-sxm"});
    CHECK(r.out.find("(GEMMs at the rate this GPU holds at its power limit, 89 % of a short burst's: 708.5 of 794.5 bf16 TFLOP/s, SM clock "
                     "1465 MHz)") != std::string::npos);
    CHECK(tp_test::cli({"simulate", "llama-2-7b", "--gpu", "l40s"}).out.find("power limit") == std::string::npos);
}

TEST_CASE("FP8 GEMMs run at the measured FP8 rate, a smaller share of their peak than bf16's", "[time][gemm][hardware][fp8]") {
    // stas00/ml-engineering compute/accelerator/README.md, MAMF table: H100 SXM bf16
    // 794.5 of 989.4 (80.3 %), FP8 1,402.6 of 1,978.9 (70.9 %); H200 FP8 1,453.4 (73.4 %).
    // A dense FP8 GEMM is not twice a bf16 one: 1,402.6 / 794.5 = 1.765.
    const auto rate = [](const char* gpu, trainplan::Precision p, bool fp8_figure = true) {
        trainplan::Scenario s;
        s.model = tp_test::model("llama-2-7b");
        s.cluster.gpu = tp_test::gpu(gpu);
        if (!fp8_figure) s.cluster.gpu.fp8_matmul_efficiency = 0;
        s.setup.precision = p;
        const double m = 8192, n = 8448, k = 20480;
        return 2.0 * m * n * k / trainplan::matmul_seconds(s, m, n, k) / 1e12;
    };
    using trainplan::Precision;
    CHECK(rate("h100-sxm", Precision::FP8Mixed) / rate("h100-sxm", Precision::BF16Mixed) == Approx(1402.6 / 794.5).epsilon(0.01));
    // At the power limit: stas00 commit 082816f's MSMF run on an H200 held 1,288.7 FP8
    // TFLOP/s (1,491.9 in its burst); the model's 1,453.4 x the bf16 share 708.5 / 794.5
    // lands within 6 % of it.
    CHECK(rate("h200", Precision::FP8Mixed) == Approx(1288.7).epsilon(0.06));
    // Without the FP8 figure the bf16 fraction stood in: 0.803 / 0.734 = 1.094 faster.
    CHECK(rate("h200", Precision::FP8Mixed, false) / rate("h200", Precision::FP8Mixed) == Approx(0.803 / 0.734).epsilon(0.002));
    // A preset giving an FP8 fraction for a card with no FP8 tensor cores is refused.
    const std::string text = "name = \"old\"\nsource = \"test\"\nmemory_gib = 79.65\nmemory_bandwidth_gb_s = 2039\n"
                             "bf16_tflops = 312\nfp8_matmul_efficiency = 0.7\n";
    const auto r = trainplan::parse_gpu_toml(text, "old.toml", "old");
    REQUIRE(!r);
    CHECK(r.error().diagnostics.front().key == "fp8_matmul_efficiency");
    // Transformer Engine keeps the LM head in 16 bits under fp8: what a larger vocabulary
    // adds to the compute (the head's GEMMs, the loss's passes) is the same under
    // fp8-mixed as under bf16-mixed, not 794.5 / 1402.6 of it.
    const auto vocab_cost = [](Precision p) {
        trainplan::Scenario s;
        s.model = tp_test::model("llama-3-8b");
        s.cluster.gpu = tp_test::gpu("h100-sxm");
        s.setup.precision = p;
        s.setup.seq_len = 4096;
        const double small = trainplan::estimate_time(s).time.compute_s;
        s.model.vocab *= 2;
        return trainplan::estimate_time(s).time.compute_s - small;
    };
    CHECK(vocab_cost(Precision::FP8Mixed) == Approx(vocab_cost(Precision::BF16Mixed)).epsilon(0.01));
    // simulate names the FP8 rate it uses: 1,978.9 x 0.709 = 1,403.0 in a burst, x the
    // power-limited share 708.5 / (989.4 x 0.803) = 0.8918 -> 1,251.2 TFLOP/s.
    const auto out = tp_test::cli({"simulate", "llama-2-7b", "--gpu", "h100-sxm", "--precision", "fp8-mixed"}).out;
    CHECK(out.find("(FP8 GEMMs at 1251.2 of 1979 fp8 TFLOP/s: the measured FP8 burst rate, 70.9 % of peak where bf16 reaches 80.3 %, at the "
                   "same power-limited share)") != std::string::npos);
}

TEST_CASE("a fused attention kernel runs at the head dimension it is compiled for", "[time][attention]") {
    // FlashAttention 1 (flash-attn v0.2.2 fmha_api.cpp run_fmha_fwd) has kernels for
    // d <= 32, 64 and 128 only: a head of 96 runs on the d = 128 kernel, its matmul
    // tiles 128 wide. FlashAttention 2 rounds to a multiple of 32
    // (static_switch.h HEADDIM_SWITCH): 96 has its own kernel. Two models with the
    // same hidden size and q width, 3072 = 32 x 96 = 24 x 128, have the same GEMMs
    // and the same attention FLOPs, F = 4 x 3072 x s x tokens, of which a causal
    // kernel runs half: under FlashAttention 2 their step is the same; under
    // FlashAttention 1 the d = 96 model's attention takes 128 / 96 of the other's,
    // F/2 x (1 / e_fwd + 2.5 / e_bwd) / peak x 1/3 more per layer (2.5: the
    // backward's five matmuls to the forward's two, Dao 2023).
    auto compute = [](std::int64_t heads, std::int64_t d, trainplan::AttentionKernel k) {
        trainplan::Scenario s;
        s.model = tp_test::model("llama-2-7b");
        s.model.hidden = 3072;
        s.model.num_heads = heads;
        s.model.num_kv_heads = heads;
        s.model.head_dim = d;
        s.model.ffn = 8192;
        s.cluster.gpu = tp_test::gpu("a100-sxm-80gb");
        s.setup.stack = trainplan::Stack::MegatronCore;
        s.setup.framework = trainplan::Framework::Megatron;
        s.setup.precision = trainplan::Precision::BF16Mixed;
        s.setup.attention_kernel = k;
        s.setup.seq_len = 2048;
        s.setup.micro_batch = 1;
        return trainplan::estimate_time(s).time.compute_s;
    };
    using trainplan::AttentionKernel;
    CHECK(compute(32, 96, AttentionKernel::Flash2) == Approx(compute(24, 128, AttentionKernel::Flash2)).epsilon(1e-12));
    const trainplan::Efficiencies e = trainplan::efficiencies(tp_test::gpu("a100-sxm-80gb"), AttentionKernel::Flash1);
    const double half_f = 0.5 * 4.0 * 3072 * 2048 * 2048;
    const double attention = half_f / 312e12 * (1.0 / e.attention_fwd + 2.5 / e.attention_bwd);
    CHECK(compute(32, 96, AttentionKernel::Flash1) - compute(24, 128, AttentionKernel::Flash1) ==
          Approx(32 * attention / 3.0).epsilon(1e-9));
}

TEST_CASE("torch.autocast casts every fp32 matmul weight to 16 bits each forward, and its gradient back", "[time][autocast]") {
    // Under torch.autocast with fp32 weights each linear's weight is cast to bf16 in
    // forward (read 4 B, write 2 B; at::autocast::cached_cast keeps the copy for the
    // autocast region), the cast's backward writes its gradient in fp32 (read 2,
    // write 4), and AccumulateGrad adds it into .grad (read 4 + 4, write 4) from the
    // step's second micro-batch on. Llama-2-7B's matmul weights: 6,738,415,616
    // parameters less the embedding (32000 x 4096, a lookup, not cast) and the 65
    // RMSNorm scales (65 x 4096, fp32-list ops): 6,607,077,376. Four micro-batches:
    // (6 + 6) x 4 + 12 x 3 = 84 B per element, at the A100-80GB's measured HBM rate
    // (2039 GB/s x 0.88). Held in 16 bits (precision bf16), nothing is cast; the
    // stack's fused element-wise kernels (megatron-core) make the two runs' other
    // traffic the same.
    const double psi_mm = 6'738'415'616.0 - 32000.0 * 4096 - 65.0 * 4096;
    auto compute = [](const char* precision) {
        return sim({"llama-2-7b", "--gpu", "a100-sxm-80gb", "--seq-len", "2048", "--grad-accum", "4", "--stack", "megatron-core",
                    "--framework", "pytorch-amp", "--precision", precision})["time"]["compute_s"]
            .get<double>();
    };
    CHECK(compute("bf16-mixed") - compute("bf16") == Approx(84 * psi_mm / (2039e9 * 0.88)).epsilon(1e-6));
}

TEST_CASE("a ring across nodes runs at the pace of its slower tier, not the sum of both", "[time][collectives]") {
    // NCCL runs an all-gather / reduce-scatter over several nodes as one ring whose
    // chunks cross NVLink and the network at once. mosaicml/llm-foundry's benchmark
    // table (the reference collection) measures MPT-13B under FSDP on H100s at
    // micro-batch 2 at 39.79 % MFU on one node and 39.95 % on four (8 x 400 Gb/s
    // each): the gathers that leave the node cost nothing more. Summing an
    // intra-node and an inter-node phase had the four nodes 16 % slower.
    const std::string dir = std::string(TRAINPLAN_SOURCE_DIR) + "/validation/cases/";
    auto mfu = [&](const char* id) { return sim({"--scenario", dir + id + ".toml"})["throughput"]["mfu"].get<double>(); };
    CHECK(mfu("mpt_h100_80gb_bf16_13b_s2048_g32_mb2_31") / mfu("mpt_h100_80gb_bf16_13b_s2048_g8_mb2_33") ==
          Approx(39.95 / 39.79).epsilon(0.05));
}
