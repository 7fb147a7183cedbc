// Context parallelism (cp): the K/V ring's volume and time, its overlap with
// the attention blocks, the activations split over cp, the process groups and
// the rules -- each derived by hand from Megatron-Core's context-parallel docs
// (docs/source/api-guide/context_parallel.rst) and the ring-attention paper
// (Liu et al. 2023, arXiv 2310.01889). Then the data-parallel gradient
// traffic: the reduce dtype (--grad-reduce-bf16) and DeepSpeed ZeRO-2's
// per-micro-batch reduction.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "trainplan/sharding.hpp"
#include "trainplan/time.hpp"

using namespace trainplan;
using nlohmann::json;

namespace {

json sim(std::vector<std::string> args) { return tp_test::cli_json("simulate", std::move(args)); }

// Llama-3-8B: 32 layers, hidden 4096, 32 query heads and 8 KV heads of 128
// (kv_dim 1024), on one 8 x H100 SXM node (NVSwitch gen3: 450 GB/s x 0.82 =
// 369 GB/s, 8.4 us per step; hardware/link/nvswitch-h100.toml).
std::vector<std::string> job(std::vector<std::string> extra) {
    std::vector<std::string> a{"llama-3-8b", "--gpu", "h100-sxm", "--seq-len", "8192", "--micro-batch", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

}  // namespace

TEST_CASE("context parallelism: K/V ring volume and time, TP2CP2 at 8K as in Megatron-Core's Figure 1", "[context-parallel][time]") {
    // The docs' example: TP2CP2, sequence 8K, "each GPU processes 4K tokens";
    // each rank exchanges the K and V of its chunk with its CP peer, and only
    // the KV heads travel under GQA. TP splits the KV heads, so per rank and
    // ring step:
    //   4096 tokens x 2 (K, V) x 1024 / 2 (TP) x 2 B = 8,388,608 B.
    // cp - 1 = 1 step forward; backward gathers K/V again and reduce-scatters
    // their gradients: 2 x the bytes. Per layer and micro-batch:
    //   (8.4 us + 8,388,608 / 369e9) + (8.4 us + 2 x 8,388,608 / 369e9) = 85.00 us,
    // 32 layers, one micro-batch (global batch 2 = micro-batch 1 x dp 2).
    const json j = sim(job({"--gpus", "8", "--tp", "2", "--cp", "2", "--sequence-parallel", "--global-batch", "2"}));
    const double bus = 450e9 * 0.82, lat = 8.4e-6, kv = 4096.0 * 2 * 1024 / 2 * 2;
    CHECK(kv == 8'388'608.0);
    const double per_layer = (lat + kv / bus) + (lat + 2 * kv / bus);
    CHECK(j["time"]["cp_comm_s"].get<double>() == Approx(32 * per_layer).epsilon(1e-9));
    // Hidden: one block of attention outlasts a ring step even at the full
    // 989.4 TFLOP/s bf16 peak. A block is 1/cp of the rank's causal attention:
    //   4 x (4096 / 2) FLOPs per query-key pair x 4096 queries x 8192 keys x 1/2 (causal) / 2 (cp)
    //   = 6.87e10 FLOPs -> >= 69.5 us forward, >= 2.5 x that backward (Dao 2023),
    // against 8.4 + 22.7 = 31.1 us and 8.4 + 45.5 = 53.9 us of sending.
    const double block = 4.0 * 2048 * 4096 * 8192 * 0.5 / 2;
    CHECK(block / 989.4e12 > lat + kv / bus);
    // What is left is the attention slowed beside the ring's kernels, which hold 16 of
    // the H100's 132 SMs while they run: 132 / 116 - 1 = 13.8 % of the ring's time.
    CHECK(j["time"]["cp_exposed_s"].get<double>() == Approx(32 * per_layer * (132.0 / 116 - 1)).epsilon(1e-9));
}

TEST_CASE("context parallelism: EasyContext's ring-attention throughput from 512K to 700K tokens falls as published", "[context-parallel][time][published]") {
    // jzhang38/EasyContext README 'Speed': Llama-2-7B, zigzag ring attention over 8 x
    // A100, ZeRO-3 with parameters and optimizer offloaded, full checkpointing:
    // 2133 tokens/s at 512K and 1603 at 700K, a ratio of 1.331. Per token, the linear
    // layers cost the same at both lengths and causal attention grows with the
    // length, so the ratio is set by attention's share of the step; the model's
    // must come out within 3 % of the published one (the absolute rates are
    // validation cases of their own).
    auto tps = [](const char* seq) {
        const json j = tp_test::cli_json("simulate", {"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--cp", "8", "--zero", "3",
                                                      "--offload-params", "cpu", "--offload-optimizer", "cpu", "--recompute", "full",
                                                      "--stack", "generic-eager", "--framework", "deepspeed", "--seq-len", seq,
                                                      "--micro-batch", "1", "--grad-accum", "2"});
        return j["throughput"]["tokens_per_s"].get<double>();
    };
    const double ratio = tps("512000") / tps("700000");
    CHECK(ratio == Approx(2133.0 / 1603.0).epsilon(0.03));
    // And not the linear-only ratio of 1 a model without attention's quadratic
    // cost would give, nor the s^2 ratio 700/512 = 1.37 of attention alone.
    CHECK(ratio > 1.1);
    CHECK(ratio < 700.0 / 512.0);
}

TEST_CASE("context parallelism across nodes: the ring step the attention block cannot hide is exposed", "[context-parallel][time]") {
    // TP 8 fills a node, so the CP pair of each rank sits on the other node and
    // the ring crosses HDR InfiniBand: 25 GB/s x 0.94 = 23.5 GB/s per GPU (one
    // NIC per GPU), 22.4 us per step (hardware/link/ib-hdr.toml). Per step:
    //   4096 tokens x 2 x 1024 / 8 x 2 B = 2,097,152 B: 22.4 + 89.2 = 111.6 us forward,
    //   22.4 + 178.5 = 200.9 us backward.
    // One attention block per rank: 4 x 512 x 4096 x 8192 x 1/2 / 2 = 1.72e10 FLOPs,
    // >= 17.4 us forward and 43.5 us backward at the 989.4 TFLOP/s peak, and
    // at most 4x that at 25 % of peak. So per layer the exposed time lies
    // between comm - (attention at 25 %) and comm - (attention at peak).
    const json j = sim(job({"--gpus", "16", "--gpus-per-node", "8", "--intra-node", "nvswitch-h100", "--inter-node", "ib-hdr",
                            "--tp", "8", "--cp", "2", "--sequence-parallel", "--global-batch", "1"}));
    const double bus = 25e9 * 0.94, lat = 22.4e-6, kv = 4096.0 * 2 * 1024 / 8 * 2;
    const double fwd = lat + kv / bus, bwd = lat + 2 * kv / bus;
    const double layers = 32;
    CHECK(j["time"]["cp_comm_s"].get<double>() == Approx(layers * (fwd + bwd)).epsilon(1e-9));
    const double block = 4.0 * 512 * 4096 * 8192 * 0.5 / 2, peak = 989.4e12;
    const double attn_fast = block / peak, attn_slow = block / (0.25 * peak);
    const double exposed = j["time"]["cp_exposed_s"].get<double>();
    CHECK(exposed <= layers * ((fwd - attn_fast) + (bwd - 2.5 * attn_fast)) * (1 + 1e-9));
    CHECK(exposed >= layers * ((fwd - attn_slow) + (bwd - 2.5 * attn_slow)));
    CHECK(j["time"]["communication_s"].get<double>() >= exposed);
}

TEST_CASE("context parallelism divides activations by cp and keeps the step's tokens", "[context-parallel][memory]") {
    // Megatron-Core docs: "The activation memory footprint per GPU is also CP
    // times smaller" -- every stored activation is per token and each rank
    // keeps seq / cp tokens (flash attention: no s x s term). Same 8 GPUs,
    // same micro-batch; cp 2 halves dp (8 -> 4).
    const json one = sim(job({"--gpus", "8", "--global-batch", "8"}));
    const json two = sim(job({"--gpus", "8", "--cp", "2", "--global-batch", "4"}));
    CHECK(two["memory"]["activations_bytes"].get<double>() == Approx(one["memory"]["activations_bytes"].get<double>() / 2).epsilon(1e-12));
    CHECK(two["memory"]["logits_bytes"].get<double>() == Approx(one["memory"]["logits_bytes"].get<double>() / 2).epsilon(1e-12));
    // The model FLOPs per token do not depend on how a sequence is split
    // (6N + 12 L h s, PaLM Appendix B).
    CHECK(two["throughput"]["model_flops_per_token"].get<double>() == one["throughput"]["model_flops_per_token"].get<double>());
}

TEST_CASE("context parallelism: groups and shards span dp x cp", "[context-parallel][sharding]") {
    Scenario s;
    s.model = tp_test::model("llama-3-8b");
    s.cluster.gpu = tp_test::gpu("h100-sxm");
    s.cluster.num_gpus = 32;
    s.cluster.gpus_per_node = 8;
    s.setup.layout = {2, 1, 4, 1, 1, true, Schedule::OneF1B, 4};  // tp 2, dp 4, cp 4
    s.setup.seq_len = 8192;
    s.setup.zero_stage = 1;
    REQUIRE(validate(s).empty());
    const ShardPlan p = shard_plan(s);
    // TP 2 x CP 4 = 8 ranks fill a node: the CP ring stays on NVLink; the
    // 4 data-parallel replicas sit one per node.
    CHECK(p.cp_group.size == 4);
    CHECK(p.cp_group.tier == Tier::IntraNode);
    // The CP ranks hold the same weights: gradients reduce over dp x cp = 16
    // ranks, 4 per node, and the distributed optimizer shards over all 16.
    CHECK(p.dp_group.size == 16);
    CHECK(p.dp_group.per_node == 4);
    CHECK(p.dp_group.tier == Tier::InterNode);
    CHECK(p.dense.optimizer == 16);
}

TEST_CASE("context parallelism: bad layouts are refused with the constraint named", "[context-parallel][bad-input]") {
    auto run = [](std::vector<std::string> a) {
        std::vector<std::string> full{"fit"};
        full.insert(full.end(), a.begin(), a.end());
        return tp_test::cli(full);
    };
    auto r = run(job({"--gpus", "8", "--cp", "3"}));
    CHECK(r.code == 2);
    CHECK(r.err.find("must be a multiple of tp x pp x cp = 3") != std::string::npos);
    r = run(job({"--gpus", "6", "--cp", "3"}));
    CHECK(r.code == 2);
    CHECK(r.err.find("seq_len = 8192 must be divisible by 2 x cp = 6") != std::string::npos);
    r = run(job({"--gpus", "2", "--cp", "2", "--flash-attention", "off"}));
    CHECK(r.code == 2);
    CHECK(r.err.find("cp = 2 needs flash_attention = true") != std::string::npos);
}

TEST_CASE("--grad-reduce-bf16: Megatron reduces (and keeps) its gradients in 16 bits", "[time][memory][sharding]") {
    // Megatron keeps fp32 main grads (4 B/param) and all-reduces them; with
    // --grad-reduce-in-bf16 the main-grad buffer is bf16 (Megatron-Core DDP
    // grad_reduce_in_fp32 = False) and the all-reduce moves half the bytes.
    // Llama-2-7B, Psi = 6,738,415,616, DDP over 8 GPUs of one node: NCCL ring
    // all-reduce moves 2 x 7/8 x S per rank: 7 Psi in fp32, 3.5 Psi in bf16.
    const double psi = 6'738'415'616.0;
    const std::vector<std::string> a{"llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--framework", "megatron", "--global-batch", "8"};
    std::vector<std::string> b = a;
    b.push_back("--grad-reduce-bf16");
    const json fp32 = sim(a), bf16 = sim(b);
    CHECK(fp32["time"]["dp_intra_node_bytes"].get<double>() == Approx(7.0 * psi).epsilon(1e-12));
    CHECK(bf16["time"]["dp_intra_node_bytes"].get<double>() == Approx(3.5 * psi).epsilon(1e-12));
    CHECK(fp32["memory"]["gradients_bytes"].get<double>() == Approx(4.0 * psi).epsilon(1e-12));
    CHECK(bf16["memory"]["gradients_bytes"].get<double>() == Approx(2.0 * psi).epsilon(1e-12));
}

TEST_CASE("DeepSpeed ZeRO-2 reduces every micro-batch; ZeRO-1 once per step", "[time][sharding]") {
    // deepspeed/runtime/zero/stage_1_and_2.py reduces a gradient bucket when
    // partition_gradients (ZeRO-2) or at the accumulation boundary (ZeRO-1), and
    // reduces it with an all-reduce, each rank keeping its partition's slice
    // (average_tensor -> allreduce_and_scatter -> allreduce_bucket: dist.all_reduce).
    // Llama-2-7B (Psi = 6,738,415,616), 16-bit gradients (DeepSpeed
    // convention), 8 GPUs of one node, 4 micro-batches per step. Per rank:
    //   all-reduce of 2 Psi: 2 x 7/8 x 2 Psi = 3.5 Psi, all-gather of the
    //   updated 16-bit weights: 7/8 x 2 Psi = 1.75 Psi.
    //   ZeRO-1: 3.5 + 1.75 = 5.25 Psi;  ZeRO-2: 4 x 3.5 + 1.75 = 15.75 Psi.
    // Megatron's distributed optimizer reduce-scatters its fp32 main gradients
    // once per step: 7/8 x 4 Psi = 3.5 Psi, then gathers the weights: 5.25 Psi.
    const double psi = 6'738'415'616.0;
    auto run = [](const char* framework, const char* zero, bool overlap_comm = false) {
        std::vector<std::string> a{"llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--framework", framework, "--zero", zero, "--global-batch", "32"};
        if (overlap_comm) a.insert(a.end(), {"--ds-overlap-comm", "on"});
        return sim(a);
    };
    const json z1 = run("deepspeed", "1"), z2 = run("deepspeed", "2"), mg = run("megatron", "1");
    CHECK(z1["time"]["dp_intra_node_bytes"].get<double>() == Approx(5.25 * psi).epsilon(1e-12));
    CHECK(z2["time"]["dp_intra_node_bytes"].get<double>() == Approx(15.75 * psi).epsilon(1e-12));
    CHECK(mg["time"]["dp_intra_node_bytes"].get<double>() == Approx(5.25 * psi).epsilon(1e-12));
    CHECK(z2["time"]["dp_comm_s"].get<double>() > z1["time"]["dp_comm_s"].get<double>());
    // overlap_comm off (DeepSpeed's default for stages 1-2): average_tensor runs on
    // the compute stream, the reduction is all exposed; on: on its own stream
    // under backward, all but the bucket still open when backward ends.
    const json z2o = run("deepspeed", "2", true);
    CHECK(z2["time"]["dp_exposed_s"].get<double>() == Approx(z2["time"]["dp_comm_s"].get<double>()).epsilon(1e-12));
    CHECK(z2o["time"]["dp_exposed_s"].get<double>() < 0.5 * z2["time"]["dp_exposed_s"].get<double>());
    // DeepSpeed before v0.12.4 (ds_reduce_per_rank): average_tensor ->
    // allreduce_no_retain -> allreduce_and_copy all-reduces each bucket one
    // destination rank's slice at a time, after get_accelerator().synchronize()
    // under overlap_comm. The same bytes in ceil(Psi / 5e8) = 14 buckets x 8
    // ranks = 112 collectives per reduce instead of 1, each 8 latency steps of
    // 8.4 us (NVSwitch gen3; min(2 x 7, 2 log2 8 + 2) = 8): 4 reduces x 111 x 8
    // x 8.4 us = 29.837 ms more, and none of it hidden although overlap_comm is on.
    auto z2r_args = std::vector<std::string>{"llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--framework", "deepspeed", "--zero", "2",
                                             "--global-batch", "32", "--ds-overlap-comm", "on", "--ds-reduce-per-rank", "on"};
    const json z2r = sim(z2r_args);
    CHECK(z2r["time"]["dp_comm_s"].get<double>() - z2["time"]["dp_comm_s"].get<double>() == Approx(4 * 111 * 8 * 8.4e-6).epsilon(1e-6));
    CHECK(z2r["time"]["dp_exposed_s"].get<double>() == Approx(z2r["time"]["dp_comm_s"].get<double>()).epsilon(1e-12));
    CHECK(z2r["time"]["dp_intra_node_bytes"].get<double>() == Approx(15.75 * psi).epsilon(1e-12));
}

TEST_CASE("overlap_grad_reduce off: the gradient reduction waits for the end of backward", "[time][sharding]") {
    // Llama-2-7B (Psi = 6,738,415,616) under Megatron's DDP (fp32 main
    // gradients, 4 Psi bytes) over 8 H100 on NVSwitch gen3 (450 GB/s x 0.82,
    // 8.4 us per step). NCCL ring all-reduce: 2 x 7/8 x 4 Psi = 7 Psi bytes per
    // rank; min(2 x 7, 2 log2 8 + 2) = 8 latency steps:
    //   8 x 8.4 us + 7 Psi / 369e9 = 127.9 ms, all of it after the last
    // backward when nothing overlaps it. With the overlap (the default) the
    // backward of a micro-batch of 2048 tokens (>= 6 x 6.7e9 x 2048 x 2/3 FLOPs
    // = 55 ms at the 989 TFLOP/s peak) hides all but the last bucket.
    const double psi = 6'738'415'616.0;
    const double allreduce = 8 * 8.4e-6 + 7.0 * psi / (450e9 * 0.82);
    const std::vector<std::string> a{"llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "8", "--framework", "megatron"};
    std::vector<std::string> b = a;
    b.insert(b.end(), {"--overlap-grad-reduce", "off"});
    const json on = sim(a), off = sim(b);
    CHECK(off["time"]["dp_comm_s"].get<double>() == Approx(allreduce).epsilon(1e-9));
    CHECK(off["time"]["dp_exposed_s"].get<double>() == Approx(allreduce).epsilon(1e-9));
    CHECK(on["time"]["dp_exposed_s"].get<double>() < 0.5 * allreduce);
    // DeepSpeed's engine without ZeRO all-reduces the gradients after backward
    // (engine.py backward -> allreduce_gradients -> buffered_allreduce_fallback):
    // 16-bit gradients, 2 x 7/8 x 2 Psi = 3.5 Psi bytes, all exposed whatever
    // overlap_grad_reduce says.
    const json ds = sim({"llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "8", "--framework", "deepspeed"});
    const double ds_allreduce = 8 * 8.4e-6 + 3.5 * psi / (450e9 * 0.82);
    CHECK(ds["time"]["dp_comm_s"].get<double>() == Approx(ds_allreduce).epsilon(1e-9));
    CHECK(ds["time"]["dp_exposed_s"].get<double>() == Approx(ds_allreduce).epsilon(1e-9));
}
