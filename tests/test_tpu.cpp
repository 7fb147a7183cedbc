// TPU v3 / v4 presets (hardware/gpu/tpu-v*.toml, hardware/link/ici-v*.toml,
// hardware/node/tpu-v*-pod.toml) against hand derivations from their sources.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "trainplan/collectives.hpp"
#include "trainplan/io.hpp"
#include "trainplan/units.hpp"

using namespace trainplan;

TEST_CASE("TPU v3 / v4 chip peaks follow from the MXU count and clock", "[hardware][tpu]") {
    // Each MXU is a 128 x 128 systolic array: 16,384 multiply-accumulates (2 FLOP)
    // per cycle (Cloud TPU system architecture docs). TPU v4: 2 TensorCores x 4
    // MXUs at 1050 MHz (Jouppi et al. ISCA 2023, Table 1);
    // TPU v3: 2 TensorCores x 2 MXUs at 940 MHz (Jouppi et al. CACM 2020).
    const double v4 = 2 * 4 * 16384.0 * 2 * 1050e6;  // 275.3 TFLOP/s
    const double v3 = 2 * 2 * 16384.0 * 2 * 940e6;   // 123.2 TFLOP/s
    CHECK(tp_test::gpu("tpu-v4").bf16_flops == Approx(v4).epsilon(0.002));
    CHECK(tp_test::gpu("tpu-v3").bf16_flops == Approx(v3).epsilon(0.002));
    // 32 GiB of HBM2 per chip (docs: "32 GiB").
    CHECK(tp_test::gpu("tpu-v4").capacity_bytes == Approx(32.0 * 1073741824.0));
}

TEST_CASE("TPU ICI: the pod's published all-reduce bandwidth per chip is the bus bandwidth", "[hardware][tpu]") {
    // Cloud TPU docs: v4 pod 4096 chips, "All-reduce bandwidth per Pod 1.1 PB/s";
    // v3 pod 1024 chips, 340 TB/s. Per chip: 1.1e15 / 4096 = 268.6 GB/s and
    // 340e12 / 1024 = 332.0 GB/s, taken whole ([link] ici efficiency 1).
    auto v4 = load_link(tp_test::presets(), "ici-v4", "intra_node");
    auto v3 = load_link(tp_test::presets(), "ici-v3", "intra_node");
    REQUIRE(v4);
    REQUIRE(v3);
    CHECK(link_cost(*v4).bus_Bps == Approx(1.1e15 / 4096).epsilon(0.001));
    CHECK(link_cost(*v3).bus_Bps == Approx(340e12 / 1024).epsilon(0.001));
    // The pod presets are one ICI domain of the pod's size.
    auto pod = load_node(tp_test::presets(), "tpu-v4-pod", "node");
    REQUIRE(pod);
    CHECK(pod->gpus_per_node == 4096);
    CHECK(pod->intra_node == "ici-v4");
}
