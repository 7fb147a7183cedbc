// Hardware: GPUs, the links between them, and the cluster a scenario runs on.
#pragma once

#include <algorithm>
#include <string>

namespace trainplan {

enum class NumericFormat { FP32, TF32, BF16, FP16, FP8 };

struct GpuSpec {
    std::string id, name, vendor, architecture, source, notes;
    bool consumer = false;                  // GeForce: no P2P, half-rate fp32 accumulate
    double memory_gb_marketed = 0;
    // What a process can allocate: the CUDA total (cudaMemGetInfo, deviceQuery's
    // totalGlobalMem), which is nvidia-smi's total less what the driver reserves
    // (`nvidia-smi -q` "FB Memory Usage: Reserved", R510 drivers and later). The
    // preset's cuda_memory_mib where sourced, else its nvidia-smi total.
    double capacity_bytes = 0;
    double smi_total_bytes = 0;             // nvidia-smi's total (the preset's memory_gib)
    double memory_bandwidth_Bps = 0;
    double fp32_flops = 0;                  // non-tensor
    double tf32_flops = 0;                  // dense tensor; 0 when unsupported
    double bf16_flops = 0;                  // dense tensor, fp32 accumulate
    double fp16_flops = 0;                  // dense tensor, fp32 accumulate
    double fp8_flops = 0;                   // dense, 0 when unsupported
    double tdp_w = 0;
    int pcie_gen = 0;
    int pcie_lanes = 16;
    std::string nvlink;                     // link preset id, empty when none
    int nvlink_gpus = 0;                    // GPUs one NVLink domain joins (2 for a bridge); 0 = the whole node
    bool p2p = true;                        // peer access over PCIe (an NVLink bridge gives it to its pair regardless)
    double matmul_efficiency = 0;           // 0 = not given (time model uses its default)
    // Dense 16-bit GEMM rate once a long run of them holds the board at its power
    // limit and the SM clock has settled below boost ("maximum sustainable matmul
    // FLOPS"); matmul_efficiency is a short burst's. 0 = not given: the burst rate is
    // taken as sustained.
    double sustained_matmul_flops = 0;
    double sustained_clock_mhz = 0;         // the SM clock that rate was measured at; 0 = not given
    // Large fp32 GEMMs on the CUDA cores (no TF32): fraction of fp32_flops that
    // cuBLAS SGEMM sustains. 0 = not given: the tensor-core matmul_efficiency stands in.
    double sgemm_efficiency = 0;
    // FP8 tensor-core GEMMs: the measured FP8 "Maximum Achievable Matmul FLOPS" over
    // fp8_flops, a short burst like matmul_efficiency (H100 SXM: 1,402.6 of 1,978.9,
    // where bf16 reaches 80.3 %). 0 = not given: matmul_efficiency stands in.
    double fp8_matmul_efficiency = 0;
    double memory_bandwidth_efficiency = 0; // 0 = not given
    double price_usd = 0;                   // 0 = not given
    int sm_count = 0;                       // streaming multiprocessors (GEMM wave quantization); 0 = not given
    double boost_clock_mhz = 0;             // 0 = not given

    // Dense peak for the given format (falls back to the next-wider supported format;
    // bf16 without a bf16 rate runs at the CUDA-core fp32 rate, never the fp16 one).
    [[nodiscard]] double peak_flops(NumericFormat f) const;
    // Tensor cores that take fp16 but not bf16 (Volta, Turing): the preset gives an fp16
    // rate and no bf16 rate.
    [[nodiscard]] bool has_bf16_tensor_cores() const { return bf16_flops > 0 || fp16_flops <= 0; }
    // The clock the modelled GEMM rate assumes (a run's sustained_clock is a fraction of
    // it): where the preset gives a power-saturated rate, the clock that rate settled
    // at; else boost.
    [[nodiscard]] double reference_clock_mhz() const { return sustained_clock_mhz > 0 ? sustained_clock_mhz : boost_clock_mhz; }
    // That clock in words: "boost" or "the 1465 MHz its GEMMs settle at under power".
    [[nodiscard]] std::string reference_clock_name() const;
};

enum class LinkKind { PCIe, NVLink, NVSwitch, InfiniBand, RoCE, Ethernet, InfinityFabric, ICI };
[[nodiscard]] const char* to_string(LinkKind k);

struct LinkSpec {
    std::string id, name, source, notes;
    LinkKind kind = LinkKind::PCIe;
    double bandwidth_Bps = 0;  // per direction (per GPU intra-node, per port for NICs)
    double efficiency = 0;     // achievable collective fraction, 0 = not given
    double latency_s = 0;      // 0 = not given
    bool p2p = true;           // PCIe: GPUs reach each other directly
    // NVLink SHARP: a switch that reduces and multicasts (NVSwitch gen3 and
    // later with multicast objects); NCCL sets NVLS buffers up on it (memory.cpp).
    bool nvls = false;
};

struct NodeSpec {
    std::string id, name, gpu, intra_node, inter_node, source, notes;
    int gpus_per_node = 1;
    int nics_per_node = 0;
    double system_power_kw = 0;
    double price_usd = 0;
    double host_ram_bytes = 0;  // CPU memory of one node, 0 = not given
};

// The machines one scenario runs on.
struct ClusterSpec {
    GpuSpec gpu;
    int num_gpus = 1;
    int gpus_per_node = 1;
    LinkSpec intra_node;   // between GPUs of one node
    LinkSpec inter_node;   // between nodes (unused on one node)
    int nics_per_node = 0; // 0 = one per GPU
    // CPU memory of one node (offloaded optimizer states and weights, paged
    // optimizer pages live there); 0 = unknown, not checked.
    double host_ram_bytes = 0;

    [[nodiscard]] int num_nodes() const { return (num_gpus + gpus_per_node - 1) / gpus_per_node; }
    // GPUs on one node (a cluster smaller than a node fills only part of it): what
    // shares a node's host RAM and NVMe.
    [[nodiscard]] int gpus_on_node() const { return std::max(1, std::min(gpus_per_node, num_gpus)); }
};

}  // namespace trainplan
