// Hardware facts (issue 11 items 7 and 9): each check holds a preset or a hardware
// mechanism against a published figure (datasheet, whitepaper, recorded nvidia-smi
// output, measured GEMM rate) or a hand derivation, quoted next to the check.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "trainplan/collectives.hpp"
#include "trainplan/enums.hpp"
#include "trainplan/hardware.hpp"
#include "trainplan/io.hpp"
#include "trainplan/rules.hpp"
#include "trainplan/time.hpp"
#include "trainplan/units.hpp"

using namespace trainplan;

namespace {

constexpr double MiB = 1024.0 * 1024.0;
constexpr double TF = 1e12;

Scenario scenario(const std::string& model, const std::string& gpu, int gpus, const std::string& precision = "bf16-mixed",
                  int tp = 1, bool tf32 = false) {
    ScenarioInput in;
    in.model = model;
    in.gpu = gpu;
    in.gpus = gpus;
    in.tp = tp;
    in.dp = gpus / tp;
    in.seq_len = 1024;  // gpt2 learns 1024 positions
    in.micro_batch = 1;
    auto p = parse_enum<Precision>(precision);
    REQUIRE(p);
    in.precision = *p;
    in.tf32 = tf32;
    auto s = resolve_scenario(in, tp_test::presets());
    INFO((s ? std::string() : s.error().message()));
    REQUIRE(s);
    return *s;
}

bool breaks(const Scenario& s, Rule r) {
    for (const Violation& v : check_rules(s))
        if (v.rule == r) return true;
    return false;
}

}  // namespace

TEST_CASE("capacities are the driver's totals, not the marketed decimal GB", "[hardware][presets]") {
    // nvidia-smi "Memory-Usage" totals quoted in each preset:
    // Tesla V100-SXM2-32GB 32510 MiB; V100-SXM2-16GB 16160 MiB; RTX A6000 and RTX 6000 Ada
    // 49140 MiB (ECC off); A40 46068 MiB (ECC on, its default: 49140 x 15/16); RTX 5090 32607 MiB.
    CHECK(tp_test::gpu("v100-sxm2-32gb").smi_total_bytes == Approx(32510 * MiB).epsilon(0.001));
    CHECK(tp_test::gpu("v100-sxm2-16gb").smi_total_bytes == Approx(16160 * MiB).epsilon(0.001));
    CHECK(tp_test::gpu("rtx-a6000").smi_total_bytes == Approx(49140 * MiB).epsilon(0.001));
    CHECK(tp_test::gpu("rtx-6000-ada").smi_total_bytes == Approx(49140 * MiB).epsilon(0.001));
    CHECK(tp_test::gpu("a40").smi_total_bytes == Approx(49140 * MiB * 15 / 16).epsilon(0.001));
    CHECK(tp_test::gpu("rtx-5090").smi_total_bytes == Approx(32607 * MiB).epsilon(0.001));
    // Hopper with 94 / 96 GB HBM3: H100 NVL 95830 MiB, GH200 480GB (96 GB H100) 97871 MiB.
    CHECK(tp_test::gpu("h100-nvl").smi_total_bytes == Approx(95830 * MiB).epsilon(0.001));
    CHECK(tp_test::gpu("gh200").smi_total_bytes == Approx(97871 * MiB).epsilon(0.001));
    // A10 and AWS A10G: 23028 MiB (NVIDIA/DCGM issue #232 on a g5; NVML 24,146,608,128 B for an
    // A10 in mayooot/detect-gpu issue #3).
    CHECK(tp_test::gpu("a10").smi_total_bytes == Approx(24146608128.0).epsilon(0.001));
    CHECK(tp_test::gpu("a10g").smi_total_bytes == Approx(23028 * MiB).epsilon(0.001));
    // A card sold as "32 GB" holds more than 32e9 bytes: the old decimal reading lost 6 %.
    CHECK(tp_test::gpu("v100-sxm2-32gb").smi_total_bytes > 32e9);
}

TEST_CASE("an MI250X is two 64 GB devices to a process, not one 128 GB device", "[hardware][presets]") {
    // ROCm/OLCF: each GCD is a separate GPU; driver total per gfx90a device 68,702,699,520 B.
    const GpuSpec g = tp_test::gpu("mi250x");
    CHECK(g.capacity_bytes == Approx(68702699520.0).epsilon(0.001));
    // AMD: 383 TFLOP/s bf16 per OAM package of two GCDs.
    CHECK(g.peak_flops(NumericFormat::BF16) == Approx(383.0 / 2 * TF));
}

TEST_CASE("AMD Instinct presets count their compute units, which GEMM waves and overlapped collectives use", "[hardware][presets]") {
    // AMD's product pages: MI300X and MI325X 304 compute units (8 XCDs x 38), MI250X
    // 220 per package, 110 per GCD (the device a process sees).
    CHECK(tp_test::gpu("mi300x").sm_count == 304);
    CHECK(tp_test::gpu("mi325x").sm_count == 304);
    CHECK(tp_test::gpu("mi250x").sm_count == 110);
    // A collective overlapped with compute holds 16 of them ([overlap]
    // nccl_overlap_ctas): the compute beside it runs 304 / 288 - 1 = 5.6 % longer
    // (with no count it had run at full speed).
    CHECK(trainplan::overlap_contention(tp_test::gpu("mi300x")) == Approx(304.0 / 288.0 - 1.0));
}

TEST_CASE("RTX 6000 Ada has its bf16 tensor rate: the L40S's chip, not the fp32 rate", "[hardware][presets]") {
    // Hand derivation: AD102 does 1024 dense FP16/BF16 FLOP per SM per clock at full-rate
    // FP32 accumulate (RTX 4090 whitepaper: 330.3 TFLOP/s FP16-acc = 128 SM x 2520 MHz x 1024).
    // RTX 6000 Ada: 142 SM x 2505 MHz x 1024 = 364.2 TFLOP/s; the datasheet's 1457.0 TFLOP/s
    // (FP8, sparse) / 4 agrees.
    const GpuSpec ada = tp_test::gpu("rtx-6000-ada");
    CHECK(128 * 2520e6 * 1024 == Approx(330.3 * TF).epsilon(0.001));
    CHECK(ada.peak_flops(NumericFormat::BF16) == Approx(142 * 2505e6 * 1024).epsilon(0.001));
    CHECK(ada.peak_flops(NumericFormat::FP8) == Approx(1457.0 / 2 * TF).epsilon(0.001));
    // Same step on the two AD102 boards: within the clock (2505 vs 2520 MHz) and memory
    // bandwidth (960 vs 864 GB/s) differences, not the 4x of falling back to fp32.
    const double t_ada = estimate_time(scenario("llama-2-7b", "rtx-6000-ada", 1)).time.step_s;
    const double t_l40s = estimate_time(scenario("llama-2-7b", "l40s", 1)).time.step_s;
    CHECK(t_ada / t_l40s == Approx(1.0).margin(0.1));
}

TEST_CASE("GA102 pro and data-centre rates follow SMs x clock", "[hardware][presets]") {
    // A6000 datasheet: 154.8 TFLOP/s bf16 = 84 SM x 1800 MHz x 1024 (the per-SM rate).
    CHECK(84 * 1800e6 * 1024 == Approx(154.8 * TF).epsilon(0.001));
    // A40 datasheet 149.7 = 84 SM x 1740 MHz x 1024; RTX A5000: 64 SM x 1695 MHz x 1024 = 111.1
    // (datasheet 222.2 with sparsity).
    CHECK(tp_test::gpu("a40").peak_flops(NumericFormat::BF16) == Approx(84 * 1740e6 * 1024).epsilon(0.002));
    CHECK(tp_test::gpu("rtx-a5000").peak_flops(NumericFormat::BF16) == Approx(222.2 / 2 * TF).epsilon(0.002));
    CHECK(tp_test::gpu("rtx-a5000").peak_flops(NumericFormat::BF16) == Approx(64 * 1695e6 * 1024).epsilon(0.002));
}

TEST_CASE("GeForce large GEMMs reach the measured rate, not a default fraction of the spec", "[hardware][presets]") {
    // torch.matmul bf16, best square size (zzc0721/torch-performance-test-data database.md):
    // RTX 3090 76.34 / 76.68, RTX 4090 170.06 / 173.31 / 162.39 / 163.09, RTX 5090 236.03.
    auto sustained = [](const char* id) {
        const GpuSpec g = tp_test::gpu(id);
        return g.peak_flops(NumericFormat::BF16) * g.matmul_efficiency / TF;
    };
    CHECK(sustained("rtx-3090") == Approx(76.5).epsilon(0.02));
    CHECK(sustained("rtx-4090") == Approx(166.6).epsilon(0.03));
    CHECK(sustained("rtx-5090") == Approx(236.0).epsilon(0.03));
    // AWS A10G (no datasheet): torch.matmul bf16 69.47 TFLOP/s at 10240 (zzc0721 issue #126),
    // 55 % of the A10's datasheet 125: the A10G is not an A10 under another name.
    CHECK(sustained("a10g") == Approx(69.47).epsilon(0.02));
    CHECK(sustained("a10g") < 0.6 * tp_test::gpu("a10").peak_flops(NumericFormat::BF16) / TF);
}

TEST_CASE("Meta's 96 GB HBM2e H100 at 500 W: capacity from its logs, bandwidth and GEMM rate by hand", "[hardware][presets]") {
    const GpuSpec g = tp_test::gpu("h100-sxm-96gb-500w");
    // torchtitan's log lines give "memory: X GiB (Y %)" of this card: 47.32 GiB = 49.81 % (PR #808),
    // 49.59 GiB = 52.19 % (PR #822), 44.84 GiB = 47.19 % (PR #1884): 95.0 GiB allocatable.
    for (double ratio : {47.32 / 0.4981, 49.59 / 0.5219, 44.84 / 0.4719}) CHECK(g.capacity_bytes / units::GiB == Approx(ratio).epsilon(0.002));
    // Six HBM2e stacks (6144 bits) at the 1593 MHz memory clock Meta locks "NVIDIA H100" to
    // (tritonbench gpu_utils.py), double data rate: 2.447 TB/s; five stacks at that clock are the
    // H100 PCIe's 2.0 TB/s.
    CHECK(g.memory_bandwidth_Bps == Approx(1593e6 * 2 * 6144 / 8).epsilon(0.001));
    CHECK(1593e6 * 2 * 5120 / 8 == Approx(tp_test::gpu("h100-pcie").memory_bandwidth_Bps).epsilon(0.02));
    // Dense bf16 GEMMs at the power limit, interpolated in board watts per SM between two GH100
    // dies held at theirs: H100 PCIe 492.84 TFLOP/s over 114 SMs at 350 W (zzc0721 issue #95) and
    // H200 708.5 over 132 at 693 W (ml-engineering MSMF). 500 W / 132 SMs lies 0.330 of the way.
    const double w_pcie = 350.0 / 114, w_h200 = 693.0 / 132, w = 500.0 / 132;
    const double per_sm = 492.84 / 114 + (w - w_pcie) / (w_h200 - w_pcie) * (708.5 / 132 - 492.84 / 114);
    CHECK(burst_matmul_flops(g) * power_limited_share(g) / TF == Approx(132 * per_sm).epsilon(0.005));
    // Between the 350 W PCIe card's per-SM rate and the 700 W part's: below h100-sxm's.
    CHECK(burst_matmul_flops(g) * power_limited_share(g) < 0.9 * burst_matmul_flops(tp_test::gpu("h100-sxm")) * power_limited_share(tp_test::gpu("h100-sxm")));
}

TEST_CASE("fp32 GEMMs on A100 CUDA cores run at the measured cuBLAS SGEMM rate", "[hardware][presets][time]") {
    // cuBLAS SGEMM 5120 x 4096 x 4096 on an A100 80GB PCIe: 18.88 of 19.49 TFLOP/s
    // (Yinghan-Li/YHs_Sample issue #4); the tensor-core MAMF fraction (0.869 on SXM)
    // does not apply to CUDA-core math.
    for (const char* id : {"a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb"}) {
        const GpuSpec g = tp_test::gpu(id);
        CAPTURE(id);
        CHECK(g.peak_flops(NumericFormat::FP32) * g.sgemm_efficiency / TF == Approx(18.88).epsilon(0.01));
    }
    // An fp32 step: only its GEMMs speed up, by at most 0.969 / (0.869 x the
    // power-limited share) over the tensor-core fraction standing in (the measured
    // SGEMM rate is its own sustained figure).
    Scenario with = scenario("llama-3.2-1b", "a100-sxm-80gb", 1, "fp32");
    Scenario without = with;
    without.cluster.gpu.sgemm_efficiency = 0;
    const double r = estimate_time(with).time.compute_s / estimate_time(without).time.compute_s;
    CHECK(r < 0.99);
    CHECK(r >= 0.869 * trainplan::power_limited_share(with.cluster.gpu) / 0.969 - 1e-9);
    // bf16 never reads it.
    Scenario bf16 = scenario("llama-3.2-1b", "a100-sxm-80gb", 1), bf16_without = bf16;
    bf16_without.cluster.gpu.sgemm_efficiency = 0;
    CHECK(estimate_time(bf16).time.compute_s == Approx(estimate_time(bf16_without).time.compute_s).epsilon(1e-12));
}

TEST_CASE("bf16 on Volta is refused; fp16-mixed is the remedy", "[hardware][rules]") {
    // V100 tensor cores take fp16 only; torch.matmul on a V100S runs bf16 at 9.85 TFLOP/s
    // against 88.92 fp16 and 13.55 fp32 (zzc0721/torch-performance-test-data).
    Scenario bf16 = scenario("gpt2", "v100-sxm2-32gb", 1, "fp16-mixed");
    bf16.setup.precision = Precision::BF16Mixed;
    CHECK(breaks(bf16, Rule::Bf16NeedsHardware));
    bool names_remedy = false;
    for (const Violation& v : check_rules(bf16))
        if (v.rule == Rule::Bf16NeedsHardware) names_remedy = v.message.find("fp16-mixed") != std::string::npos;
    CHECK(names_remedy);
    CHECK_FALSE(breaks(scenario("gpt2", "v100-sxm2-32gb", 1, "fp16-mixed"), Rule::Bf16NeedsHardware));
    CHECK_FALSE(breaks(scenario("gpt2", "a100-sxm-80gb", 1, "bf16-mixed"), Rule::Bf16NeedsHardware));
    // Unless the scenario names a precision, a V100 trains in fp16-mixed.
    ScenarioInput in;
    in.model = "gpt2";
    in.gpu = "v100-sxm2-32gb";
    in.seq_len = 1024;
    auto s = resolve_scenario(in, tp_test::presets());
    REQUIRE(s);
    CHECK(s->setup.precision == Precision::FP16Mixed);
    // Without a bf16 rate the peak is the CUDA-core fp32 rate (15.7, V100 datasheet), never fp16's 125.
    CHECK(tp_test::gpu("v100-sxm2-32gb").peak_flops(NumericFormat::BF16) == Approx(15.7 * TF));
}

TEST_CASE("fp32 training with TF32 matmuls runs at the TF32 tensor rate", "[hardware][time]") {
    // A100 datasheet: 19.5 TFLOP/s fp32, 156 TF32 (dense).
    const TimeEstimate plain = estimate_time(scenario("gpt2", "a100-sxm-80gb", 1, "fp32"));
    const TimeEstimate tf32 = estimate_time(scenario("gpt2", "a100-sxm-80gb", 1, "fp32", 1, true));
    CHECK(plain.throughput.peak_flops == Approx(19.5 * TF));
    CHECK(tf32.throughput.peak_flops == Approx(156.0 * TF));
    CHECK(tf32.time.step_s < plain.time.step_s);
    // Volta has no TF32: the flag leaves the fp32 rate.
    CHECK(estimate_time(scenario("gpt2", "v100-sxm2-32gb", 1, "fp32", 1, true)).throughput.peak_flops == Approx(15.7 * TF));
}

TEST_CASE("H800 and A800: Hopper and Ampere with NVLink cut to 400 GB/s", "[hardware][presets]") {
    // 400 GB/s both directions = 200 GB/s per direction (H100: 900 = 450, A100: 600 = 300).
    const Scenario h800 = scenario("llama-2-7b", "h800-sxm", 8, "bf16-mixed", 8);
    const Scenario h100 = scenario("llama-2-7b", "h100-sxm", 8, "bf16-mixed", 8);
    CHECK(h800.cluster.intra_node.bandwidth_Bps == Approx(200e9));
    CHECK(h800.cluster.gpu.peak_flops(NumericFormat::BF16) == Approx(h100.cluster.gpu.peak_flops(NumericFormat::BF16)));
    CHECK(scenario("llama-2-7b", "a800-sxm-80gb", 8).cluster.intra_node.bandwidth_Bps == Approx(200e9));
    // Same GEMMs, slower tensor-parallel collectives: the bandwidth-bound part scales by
    // (450 GB/s x 0.82) / (200 GB/s x 0.80) = 2.31 (nvswitch-h100 / nvswitch-h800); the
    // per-hop latencies are equal, so the whole TP time grows by more than 1 and at most 2.31.
    const TimeEstimate a = estimate_time(h800), b = estimate_time(h100);
    CHECK(a.time.tp_comm_s / b.time.tp_comm_s > 1.2);
    CHECK(a.time.tp_comm_s / b.time.tp_comm_s <= (450.0 * 0.82) / (200.0 * 0.80) + 1e-9);
    CHECK(a.time.step_s > b.time.step_s);
}

TEST_CASE("an NVLink bridge joins two cards; more ring over PCIe", "[hardware][presets]") {
    CHECK(scenario("gpt2", "rtx-a6000", 2).cluster.intra_node.id == "nvlink3-bridge");
    CHECK(scenario("gpt2", "rtx-a6000", 8).cluster.intra_node.id == "pcie4-x16");
    // RTX 3090 has no peer access over PCIe (8x RTX 3090 p2pBandwidthLatencyTest:
    // 'CANNOT Access Peer', NVIDIA/nccl issue #1127): through host memory.
    CHECK(scenario("gpt2", "rtx-3090", 8).cluster.intra_node.id == "pcie4-x16-nop2p");
    CHECK(scenario("gpt2", "rtx-3090", 2).cluster.intra_node.id == "nvlink3-bridge");
    // RTX 4090: no NVLink, no P2P (NVIDIA/nccl issue #814: 20-22 GB/s through the host).
    CHECK(scenario("gpt2", "rtx-4090", 2).cluster.intra_node.id == "pcie4-x16-nop2p");
}

TEST_CASE("no-P2P PCIe rings move data at the busbw measured through host memory", "[hardware][presets][collectives]") {
    // 4x RTX 5090, PCIe 5.0, P2P disabled (NCCL through host memory): all_reduce_perf
    // busbw 35 GB/s (NVIDIA/nccl issue #1639). By hand, an all-reduce of 1 GiB on 4 GPUs
    // moves 2 (4-1)/4 x 2^30 B = 1.61e9 B per rank: 1.61e9 / 35e9 = 46.0 ms.
    const Scenario s5 = scenario("gpt2", "rtx-5090", 4);
    REQUIRE(s5.cluster.intra_node.id == "pcie5-x16-nop2p");
    const double gib = 1024.0 * MiB;
    const double t5 = allreduce_s(gib, 4, link_cost(s5.cluster.intra_node));
    CHECK(t5 == Approx(1.5 * gib / 35e9).epsilon(0.02));
    // Gen4 GeForce without P2P: NCCL moves its ring through pinned host buffers with
    // SM loads and stores (SHM transport), not with the copy engines that reach 20-22
    // GB/s one way (NVIDIA/nccl issue #814). 2 x RTX 3090 DDP with NCCL_P2P_DISABLE=1
    // (huggingface/transformers#9371) added 514.6 ms per step for GPT-2 large's 3.10 GB
    // of fp32 gradients: about 6.0 GB/s of bus bandwidth. 1 GiB over 8 cards then
    // takes 2 (8-1)/8 x 2^30 / 6.0e9 = 313.2 ms, not the 85-94 ms the copy-engine
    // figure gives.
    const Scenario s4 = scenario("gpt2", "rtx-4090", 8);
    REQUIRE(s4.cluster.intra_node.id == "pcie4-x16-nop2p");
    const double t4 = allreduce_s(gib, 8, link_cost(s4.cluster.intra_node));
    CHECK(t4 == Approx(1.75 * gib / 6.0e9).epsilon(0.02));
    // PCIe 3.0 without P2P: 2x RTX 2080 Ti behind one switch in a rented server,
    // all_reduce_perf 1 GiB out-of-place in 268,588 us (busbw 4.00 GB/s; AutoDL test post
    // in Anthony-Hoo/Anthony-Hoo.github.io, cited in the preset). 2 ranks move
    // 2 (2-1)/2 x 2^30 B = 1.07e9 B each.
    ScenarioInput in;
    in.model = "gpt2";
    in.gpu = "rtx-3090";
    in.gpus = 2;
    in.dp = 2;
    in.seq_len = 1024;
    in.micro_batch = 1;
    in.intra_node = "pcie3-x16-nop2p";
    auto s3 = resolve_scenario(in, tp_test::presets());
    REQUIRE(s3);
    REQUIRE(s3->cluster.intra_node.id == "pcie3-x16-nop2p");
    CHECK(allreduce_s(gib, 2, link_cost(s3->cluster.intra_node)) == Approx(268588e-6).epsilon(0.01));
}

TEST_CASE("the new GPUs are listed and suggested", "[hardware][presets]") {
    const auto r = tp_test::cli({"gpus"});
    REQUIRE(r.code == 0);
    for (const char* id : {"h800-sxm", "a800-sxm-80gb", "a40", "rtx-a5000", "a10g", "h100-sxm-96gb-500w"}) CHECK(r.out.find(id) != std::string::npos);
    const auto bad = tp_test::cli({"simulate", "gpt2", "--gpu", "h800"});
    CHECK(bad.code == 2);
    CHECK(bad.err.find("h800-sxm") != std::string::npos);
}

TEST_CASE("offloaded states are checked against the node's RAM, shared by the GPUs on the node", "[hardware][memory][offload]") {
    // ZeRO-3 with optimizer and parameter offload to the CPU (ZeRO-Infinity): the host keeps
    // the 16-bit weights (2 B), the fp32 master, m and v (12 B) and the fp32 gradients the
    // CPU Adam reads (4 B): 18 B per parameter, over the data-parallel ranks.
    // Llama-2-7B (6,738,415,616 params) on one GPU: 121.3 GB; Llama-2-70B
    // (68,976,648,192) over 4: 310.4 GB per GPU.
    const auto one = tp_test::cli({"fit", "llama-2-7b", "--node", "aws-g5-12xlarge", "--gpus", "1", "--zero", "3",
                                   "--offload-optimizer", "cpu", "--offload-params", "cpu", "--recompute", "full", "--json"});
    REQUIRE(one.code == 0);
    CHECK(one.out.find("\"cpu_bytes\": 121") != std::string::npos);
    // g5.12xlarge has 192 GiB (AWS): one GPU of the node may use all of it, 206.2 GB.
    CHECK(one.out.find("\"host_capacity_bytes\": 206158430208.0") != std::string::npos);
    // Four GPUs share it: 51.5 GB each, far below the 310 GB each needs for 70B.
    const auto four = tp_test::cli({"fit", "llama-2-70b", "--node", "aws-g5-12xlarge", "--gpus", "4", "--zero", "3",
                                    "--offload-optimizer", "cpu", "--offload-params", "cpu", "--recompute", "full"});
    CHECK(four.code == 1);
    CHECK(four.out.find("DOES NOT FIT in host memory: 310.4 GB per GPU offloaded") != std::string::npos);
    // --host-ram overrides the preset: 64 GiB cannot hold the 7B run's 121.3 GB either.
    const auto small = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a10g", "--zero", "3", "--offload-optimizer", "cpu",
                                     "--offload-params", "cpu", "--recompute", "full", "--host-ram", "64"});
    CHECK(small.code == 1);
    // Without a node RAM figure nothing is claimed about the host: the need is printed.
    const auto unknown = tp_test::cli({"fit", "llama-2-7b", "--gpu", "a10g", "--zero", "3", "--offload-optimizer", "cpu",
                                       "--offload-params", "cpu", "--recompute", "full"});
    CHECK(unknown.code == 0);
    CHECK(unknown.out.find("node RAM not given, not checked") != std::string::npos);
}

TEST_CASE("TP comm overlap needs peer access inside one node (Transformer Engine userbuffers)", "[hardware][time][overlap]") {
    // TE's userbuffers map the TP peers' buffers (CUDA multicast or IPC handles):
    // single-node TP with peer access only (TransformerEngine issue #1071). On a
    // NVSwitch node the exposed TP time is tp_comm_exposed_fraction (0.25, defaults.toml)
    // of the plain figure; on GeForce cards without P2P the flag changes nothing and
    // simulate says so.
    auto tp_time = [](const std::string& gpu, bool overlap) {
        Scenario s = scenario("llama-2-7b", gpu, 2, "bf16-mixed", 2);
        s.setup.tp_comm_overlap = overlap;
        return estimate_time(s);
    };
    const double a100_off = tp_time("a100-sxm-80gb", false).time.tp_comm_s;
    REQUIRE(a100_off > 0);
    CHECK(tp_time("a100-sxm-80gb", true).time.tp_comm_s == Approx(0.25 * a100_off));
    CHECK(tp_time("a100-sxm-80gb", true).warnings.empty());
    const double geforce_off = tp_time("rtx-4090", false).time.tp_comm_s;
    const TimeEstimate geforce_on = tp_time("rtx-4090", true);
    CHECK(geforce_on.time.tp_comm_s == Approx(geforce_off));
    REQUIRE(geforce_on.warnings.size() == 1);
    CHECK(geforce_on.warnings[0].message.find("no peer access") != std::string::npos);
}

TEST_CASE("ring all-gathers pay a hop latency per rank, as NCCL's tuning model charges them", "[hardware][collectives]") {
    // NCCL runs all-gather and reduce-scatter only as rings (src/graph/tuning.cc,
    // NVIDIA/nccl @01afd20: "if (coll != ncclCollAllReduce && a != NCCL_ALGO_RING)
    // continue"), and charges a ring nRanks - 1 steps, nNodes - 1 of them on the
    // network: latency = base + (nsteps - nInterSteps) x intraLat + nInterSteps x
    // interLat, with hwLat's Ring / LL128 per-step figures NVLink 1.9 us and
    // network 4.0 us (data/defaults.toml [link] ring_hop_us). On 192 DGX A100 nodes
    // (1536 ranks) over HDR InfiniBand, whose collective base latency is 22.4 us:
    // 22.4 + 1344 x 1.9 + 191 x 4.0 = 3,340.0 us per all-gather -- per layer, and
    // three times a micro-batch under ZeRO-3, 0.96 s on 96 layers.
    const Scenario s = scenario("gpt2", "a100-sxm-80gb", 1536);
    REQUIRE(s.cluster.gpus_per_node == 8);
    REQUIRE(s.cluster.inter_node.kind == LinkKind::InfiniBand);
    const TierCosts t = tier_costs(s.cluster);
    CHECK(ring_latency_s(8, 192, t.intra, t.inter) == Approx(3340.0e-6).epsilon(1e-9));
    // One node: no network step; 7 NVLink steps on the NVSwitch base 8.4 us = 21.7 us.
    CHECK(ring_latency_s(8, 1, t.intra, t.inter) == Approx(21.7e-6).epsilon(1e-9));
    // A ring is linear in the ranks, not logarithmic as a tree: 4x the nodes,
    // (5376 - 1344) x 1.9 + (767 - 191) x 4.0 = 9,964.8 us more.
    CHECK(ring_latency_s(8, 768, t.intra, t.inter) - ring_latency_s(8, 192, t.intra, t.inter) ==
          Approx(9964.8e-6).epsilon(1e-9));
}

TEST_CASE("a GPU preset whose sustained GEMM rate beats its burst rate is refused", "[hardware][bad-input]") {
    // H100 SXM: bf16 989.4 x matmul_efficiency 0.803 = 794.5 TFLOP/s in a burst; a
    // power-saturated rate above that is a typo, not a faster card.
    const std::string text = "name = \"hot\"\nsource = \"test\"\nmemory_gib = 79.65\nmemory_bandwidth_gb_s = 3350\n"
                             "bf16_tflops = 989.4\nmatmul_efficiency = 0.803\nsustained_matmul_tflops = 900\n";
    const auto r = parse_gpu_toml(text, "hot.toml", "hot");
    REQUIRE(!r);
    const Diagnostic& d = r.error().diagnostics.front();
    CHECK(d.key == "sustained_matmul_tflops");
    CHECK(d.message == "sustained_matmul_tflops = 900.0 must not exceed the burst GEMM rate, bf16 peak x matmul_efficiency = 794.5 TFLOP/s");
    CHECK(d.to_string().rfind("hot.toml:7", 0) == 0);
    // Just below the burst rate it is accepted (a share of ~1).
    const auto ok = parse_gpu_toml(text.substr(0, text.rfind("sustained")) + "sustained_matmul_tflops = 794.4\n", "ok.toml", "ok");
    REQUIRE(ok);
    CHECK(power_limited_share(*ok) == Approx(1.0).epsilon(1e-3));
}
