// The uneven pipeline split of Megatron-Core (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split): hand derivations from
// megatron/core/transformer/transformer_block.py get_num_layers_to_build.
#include <catch2/catch.hpp>

#include <string>

#include "helpers.hpp"
#include "trainplan/io.hpp"
#include "trainplan/memory.hpp"
#include "trainplan/rules.hpp"
#include "trainplan/time.hpp"

using namespace trainplan;

namespace {

// Llama-3.1-405B shapes (126 layers) on 64 H100s, tp 8 x pp 8, one micro-batch each.
std::string scenario(int layers, bool emb, bool loss, int vp = 1) {
    return "[model]\nname = \"x\"\nnum_layers = " + std::to_string(layers) +
           "\nhidden_size = 16384\nnum_heads = 128\nnum_kv_heads = 8\nhead_dim = 128\nffn_hidden_size = 53248\n"
           "vocab_size = 128256\nmax_seq_len = 8192\nactivation = \"swiglu\"\nnorm = \"rmsnorm\"\nposition = \"rope\"\n"
           "[hardware]\ngpu = \"h100-sxm\"\ngpus = 64\ngpus_per_node = 8\nintra_node = \"nvswitch-h100\"\ninter_node = \"ib-ndr\"\n"
           "[training]\nprecision = \"bf16\"\nframework = \"megatron\"\nflash_attention = true\nrecompute = \"none\"\n"
           "seq_len = 8192\nmicro_batch = 1\nglobal_batch = 64\n"
           "[parallel]\ntp = 8\npp = 8\ndp = 1\nsequence_parallel = true\n" +
           (vp > 1 ? "vp = " + std::to_string(vp) + "\n" : std::string()) +
           "account_for_embedding_in_pipeline_split = " + (emb ? "true" : "false") +
           "\naccount_for_loss_in_pipeline_split = " + (loss ? "true" : "false") + "\n";
}

Result<Scenario> resolved(const std::string& text) {
    auto in = parse_scenario_toml(text, "split.toml");
    if (!in) return in.error();
    return resolve_scenario(*in, tp_test::presets());
}

}  // namespace

TEST_CASE("pipeline split counting the embedding and the loss: layers per stage (Megatron-Core get_num_layers_to_build)", "[pipeline]") {
    // 126 layers + embedding + loss = 128 units; 128 / pp 8 = 16 per stage; with
    // vp 8, 2 per chunk. The first chunk of stage 0 builds 2 - 1 = 1 layer (the
    // embedding takes the other slot), the last chunk of stage 7 builds 1 (the
    // loss): stage 0 and stage 7 hold 15 layers, stages 1..6 hold 16.
    ParallelLayout lay;
    lay.pp = 8;
    lay.vp = 8;
    lay.split_counts_embedding = lay.split_counts_loss = true;
    CHECK(layers_on_stage(126, lay, 0) == 15);
    CHECK(layers_on_stage(126, lay, 1) == 16);
    CHECK(layers_on_stage(126, lay, 6) == 16);
    CHECK(layers_on_stage(126, lay, 7) == 15);
    int total = 0;
    for (int i = 0; i < 8; ++i) total += layers_on_stage(126, lay, i);
    CHECK(total == 126);
    // Only the loss counted, 127 layers: 128 / 4 = 32 per stage, the last builds 31.
    lay.pp = 4;
    lay.split_counts_embedding = false;
    CHECK(layers_on_stage(127, lay, 0) == 32);
    CHECK(layers_on_stage(127, lay, 3) == 31);
}

TEST_CASE("pipeline split: the rules follow Megatron-Core's divisibility assertions", "[pipeline][rules]") {
    // 126 layers do not split into pp 8 x vp 8 = 64 chunks; 126 + 2 = 128 do.
    auto plain = resolved(scenario(126, false, false, 8));
    REQUIRE(!plain);
    CHECK(plain.error().message().find("num_layers = 126 must be divisible by pp x vp = 64") != std::string::npos);
    CHECK(resolved(scenario(126, true, true, 8)));
    // Embedding only: 127 units over pp 8 fail Megatron's "num_layers should be
    // divisible by pipeline_model_parallel_size".
    auto one = resolved(scenario(126, true, false));
    REQUIRE(!one);
    CHECK(one.error().message().find("num_layers + counted embedding / loss = 127 must be divisible by pp = 8") != std::string::npos);
}

TEST_CASE("pipeline split: the stage with the most work sets the time; memory per stage holds its layers", "[pipeline][time]") {
    // Two independent paths. One layer's forward + backward on a stage, for one
    // step, from plain splits: 128 layers over pp 8 put 16 on the last stage, 120
    // put 15; both last stages also run the head, so the difference is one layer.
    auto s128 = resolved(scenario(128, false, false));
    auto s120 = resolved(scenario(120, false, false));
    REQUIRE(s128);
    REQUIRE(s120);
    const double layer = estimate_time(*s128).time.compute_s - estimate_time(*s120).time.compute_s;
    REQUIRE(layer > 0);
    // Counting the embedding and the loss, 126 layers: stages 1..6 run 16 layers
    // and nothing else; stage 7 runs 15 layers and the head (16384 x 128256 GEMMs,
    // 2.1 B parameters vs 3.2 B per layer: 0.66 layer), stage 0 15 layers and the
    // embedding lookup. A middle stage is the critical one: 16 layers.
    auto split = resolved(scenario(126, true, true));
    REQUIRE(split);
    CHECK(estimate_time(*split).time.compute_s == Approx(16 * layer).epsilon(1e-9));
    // Memory: each stage holds the layers the split gives it.
    const MemoryEstimate m = estimate_memory(*split, true);
    REQUIRE(m.stages.size() == 8);
    CHECK(m.stages[0].layers == 15);
    CHECK(m.stages[3].layers == 16);
    CHECK(m.stages[7].layers == 15);
}
