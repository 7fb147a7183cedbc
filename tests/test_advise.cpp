// advise: the practitioners' symptoms (../shared/seeds) get the right diagnosis
// and the remedies the reports recommend; every remedy's effect is what
// `simulate` gives for the changed scenario.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "helpers.hpp"

using nlohmann::json;

namespace {

json advise(std::vector<std::string> args) { return tp_test::cli_json("advise", std::move(args)); }

std::string str(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// Replays a remedy's scenario through `trainplan simulate` flags.
json simulate_remedy(const json& rem) {
    const auto& h = rem["hardware"];
    const auto& t = rem["training"];
    const auto& p = rem["parallel"];
    const auto& run = rem["run"];
    std::vector<std::string> a{rem["model"]["id"].get<std::string>(), "--gpu", h["gpu"].get<std::string>(),
                               "--gpus", str(h["gpus"]), "--gpus-per-node", str(h["gpus_per_node"]),
                               "--intra-node", h["intra_node"].get<std::string>(), "--method", t["method"].get<std::string>(),
                               "--precision", t["precision"].get<std::string>(), "--optimizer", t["optimizer"].get<std::string>(),
                               "--zero", str(t["zero"]), "--recompute", t["recompute"].get<std::string>(),
                               "--flash-attention", t["flash_attention"].get<bool>() ? "on" : "off", "--seq-len", str(t["seq_len"]),
                               "--micro-batch", str(t["micro_batch"]), "--grad-accum", str(t["grad_accum"]),
                               "--offload-optimizer", t["optimizer_offload"].get<std::string>(), "--lora-rank", str(t["lora_rank"]),
                               "--tp", str(p["tp"]), "--pp", str(p["pp"]), "--vp", str(p["vp"]), "--schedule", p["schedule"].get<std::string>(),
                               "--sustained-clock", str(run["sustained_clock"])};
    if (!h["inter_node"].get<std::string>().empty()) a.insert(a.end(), {"--inter-node", h["inter_node"].get<std::string>()});
    if (h["nics_per_node"].get<int>() > 0) a.insert(a.end(), {"--nics-per-node", str(h["nics_per_node"])});
    if (p["sequence_parallel"].get<bool>()) a.push_back("--sp");
    if (run["loader_workers"].get<int>() > 0)
        a.insert(a.end(), {"--loader-workers", str(run["loader_workers"]), "--worker-samples-per-s", str(run["worker_samples_per_s"])});
    if (run["storage_bytes_per_s"].get<double>() > 0) a.insert(a.end(), {"--storage-gb-s", std::to_string(run["storage_bytes_per_s"].get<double>() / 1e9)});
    return tp_test::cli_json("simulate", std::move(a));
}

void remedies_match_simulate(const json& rep) {
    for (const auto& rem : rep["remedies"]) {
        CAPTURE(rem["title"].get<std::string>());
        const json sim = simulate_remedy(rem);
        CHECK(sim["throughput"]["tokens_per_s"].get<double>() == Approx(rem["tokens_per_s"].get<double>()).epsilon(1e-6));
        CHECK(sim["memory"]["total_bytes"].get<double>() == Approx(rem["memory"]["total_bytes"].get<double>()).epsilon(1e-9));
    }
}

std::string top(const json& rep) { return rep["remedies"].at(0)["title"].get<std::string>(); }

}  // namespace

TEST_CASE("seed 000: 7B full fine-tune on a 24 GB card -- memory; LoRA/QLoRA or ZeRO-3 + offload first", "[advise][seeds]") {
    const json rep = advise({"llama-2-7b", "--gpu", "rtx-4090"});
    CHECK(rep["diagnosis"]["bottleneck"] == "memory");
    const std::string first = top(rep);
    CHECK((first.rfind("LoRA", 0) == 0 || first.rfind("QLoRA", 0) == 0 || first.rfind("ZeRO-3", 0) == 0));
    bool lora = false, qlora = false, offload = false;
    for (const auto& r : rep["remedies"]) {
        const std::string t = r["title"].get<std::string>();
        lora |= t.rfind("LoRA", 0) == 0;
        qlora |= t.rfind("QLoRA", 0) == 0;
        offload |= t.find("offload") != std::string::npos;
        CHECK(r["memory"]["fits"] == true);
        if (t.find("LoRA") != std::string::npos) CHECK(r["changes_result"] == true);
    }
    CHECK(lora);
    CHECK(qlora);
    CHECK(offload);
    remedies_match_simulate(rep);
}

TEST_CASE("seed 000: 2 x RTX 4090 DDP on PCIe 3.0 x8 -- communication; accumulation and NVLink hardware quantified", "[advise][seeds]") {
    const json rep = advise({"gpt2-large", "--node", "2x-rtx-4090", "--gpus", "2", "--intra-node", "pcie3-x8", "--micro-batch", "4",
                             "--seq-len", "1024"});
    CHECK(rep["diagnosis"]["bottleneck"] == "communication");
    CHECK(rep["diagnosis"]["headline"].get<std::string>().find("pcie3-x8") != std::string::npos);
    CHECK(top(rep).find("gradient accumulation") != std::string::npos);
    bool nvlink = false;
    for (const auto& r : rep["remedies"]) {
        const std::string intra = r["hardware"]["intra_node"].get<std::string>();
        if (intra.find("nvlink") != std::string::npos || intra.find("nvswitch") != std::string::npos) {
            nvlink = true;
            CHECK(r["speedup"].get<double>() > 1.0);
        }
    }
    CHECK(nvlink);
    remedies_match_simulate(rep);
}

TEST_CASE("seed 000: utilization swinging 0-100 % with one loader worker -- data pipeline", "[advise][seeds]") {
    const json rep = advise({"llama-2-7b", "--gpu", "rtx-4090", "--method", "qlora", "--micro-batch", "4", "--loader-workers", "1",
                             "--util-swings", "--gpu-util", "45"});
    CHECK(rep["diagnosis"]["bottleneck"] == "data pipeline");
    CHECK(top(rep).find("loader workers") != std::string::npos);
    // Observed 45 % busy: the observed throughput is 45 % of the busy-time prediction.
    CHECK(rep["throughput"]["observed_tokens_per_s"].get<double>() == Approx(0.45 * 4 * 2048 / rep["remedies"][0]["step_s"].get<double>()).epsilon(0.02));
    CHECK(rep["diagnosis"]["observation_gap"].get<std::string>().find("data pipeline") != std::string::npos);
    remedies_match_simulate(rep);
}

TEST_CASE("seed 000: thermal wall at 88 C -- thermal; cooling first", "[advise][seeds]") {
    const json rep = advise({"llama-2-7b", "--gpu", "rtx-4090", "--method", "qlora", "--gpu-temp", "88"});
    CHECK(rep["diagnosis"]["bottleneck"] == "thermal");
    CHECK(top(rep).find("cooling") != std::string::npos);
    // A measured clock gives the factor directly: 2160 of 2520 MHz boost.
    const json clocked = advise({"llama-2-7b", "--gpu", "rtx-4090", "--method", "qlora", "--gpu-clock-mhz", "2016"});
    CHECK(clocked["diagnosis"]["bottleneck"] == "thermal");
    CHECK(clocked["remedies"][0]["speedup"].get<double>() > 1.1);
    remedies_match_simulate(rep);
}

TEST_CASE("seeds 000/002: FP32 left on -- mixed precision first", "[advise][seeds]") {
    const json rep = advise({"gpt2-large", "--gpu", "a100-sxm-80gb", "--precision", "fp32", "--micro-batch", "4", "--seq-len", "1024"});
    CHECK(rep["diagnosis"]["bottleneck"] == "compute");
    CHECK(top(rep) == "bf16 mixed precision");
    CHECK(rep["remedies"][0]["speedup"].get<double>() >= 2.0);
    remedies_match_simulate(rep);
}

TEST_CASE("seed 004: 25 GbE between nodes -- communication; InfiniBand quantified", "[advise][seeds]") {
    const json rep = advise({"llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "16", "--gpus-per-node", "8", "--inter-node", "eth-25g",
                             "--nics-per-node", "1", "--zero", "1", "--micro-batch", "4", "--global-batch", "256"});
    CHECK(rep["diagnosis"]["bottleneck"] == "communication");
    CHECK(rep["diagnosis"]["headline"].get<std::string>().find("eth-25g") != std::string::npos);
    bool ib = false;
    for (const auto& r : rep["remedies"])
        if (r["hardware"]["inter_node"].get<std::string>().rfind("ib-", 0) == 0) {
            ib = true;
            CHECK(r["speedup"].get<double>() >= 1.4);  // seed 004: "> 40 % more throughput"
        }
    CHECK(ib);
    remedies_match_simulate(rep);
}

TEST_CASE("advise rejects bad observations with the limit named", "[advise][bad-input]") {
    const auto r = tp_test::cli({"advise", "llama-2-7b", "--gpu", "rtx-4090", "--gpu-util", "140"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --gpu-util = 140 exceeds the maximum 100\n");
    const auto s = tp_test::cli({"advise", "llama-2-7b", "--gpu", "rtx-4090", "--storage", "tape"});
    CHECK(s.code == 2);
    CHECK(s.err == "error: --storage = \"tape\" is not one of: hdd, sata-ssd, nvme, network\n");
}
