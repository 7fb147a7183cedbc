// Feasibility rules: every constraint a scenario must meet to be a possible
// configuration, each with a stable id. One table serves scenario validation
// (validate()), the layout search (rejections counted by rule id) and the
// pre-checks of remedies (fit, advise, size, the GUI).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainplan/training.hpp"

namespace trainplan {

enum class Rule : int {
    // ranges (generous enough for 10T-parameter models and 100,000-GPU clusters,
    // tight enough that every product stays exact in 64-bit arithmetic)
    SeqLenRange, MicroBatchRange, GradAccumRange, GpusRange, GpusPerNodeRange, ZeroRange, LayoutPositive,
    // layout
    WorldEqualsLayout,       // tp x pp x cp x dp = gpus
    TpDividesHeads, TpDividesKvHeads, TpDividesFfn,
    CpDividesSeq,            // seq_len splits into 2 x cp load-balanced chunks
    CpNeedsFlashAttention,   // ring attention is a fused (flash) attention kernel
    TpWithinNode,            // search policy only (RuleOptions::tp_within_node)
    PpVpWithinLayers,        // pp x vp <= num_layers
    VpNeedsInterleaved, InterleavedNeedsPp, InterleavedDividesLayers,
    PipelineSplitDivides,    // with the embedding / loss counted, pp divides L + e + l (Megatron-Core)
    EpNeedsMoe, EpDividesExperts, EpDividesDp,
    // batch
    GlobalBatchDivides,      // the global batch asked for splits over micro-batch x dp
    InterleaveNeedsMicrobatches,
    // setup
    ZeroWithPipeline, ParamOffloadNeedsZero3, OptimizerOffloadNeedsZero, OptimizerInBackwardNoAccumulation,
    LoraRankPositive, LoraTargetsNonEmpty, Fp8NeedsHardware, Fp8ParamsNeedFp8, KbitUpcastNeedsBnb, Bf16NeedsHardware, SeqWithinLearnedPositions, GpuHasMemory,
    // what the training stack can run (data/defaults.toml [stack.*] tensor_parallel, ...)
    StackTensorParallel, StackContextParallel, StackPipelineParallel, StackExpertParallel, StackTpCommOverlap, StackActivationOffload, StackFusedLinearCe,
    Count
};
inline constexpr std::size_t kRuleCount = static_cast<std::size_t>(Rule::Count);

// When in the layout search a rule can first be decided: the search sets the
// dimensions in this order and checks each stage's rules as soon as it can.
enum class RuleStage { Base, TensorParallel, Pipeline, Schedule, Experts, Batch, Setup };

struct RuleInfo {
    const char* id;       // stable, e.g. "tp-divides-heads"
    const char* key;      // the scenario key a violation is reported against
    RuleStage stage;
    const char* summary;  // one line, for rejection tables
};
[[nodiscard]] const RuleInfo& rule_info(Rule r);
[[nodiscard]] inline const char* rule_id(Rule r) { return rule_info(r).id; }

struct RuleOptions {
    bool tp_within_node = false;       // the search keeps TP inside a node unless told otherwise
    std::int64_t global_batch = 0;     // > 0: the batch the search must split (GlobalBatchDivides)
};

struct Violation {
    Rule rule;
    std::string key;
    std::string message;  // names the key, its value and the limit
};

// Every broken rule, in table order. Range rules come first; when one of them
// fails the structural rules are skipped (they would divide by zero).
[[nodiscard]] std::vector<Violation> check_rules(const Scenario& s, const RuleOptions& opt = {});

// The first broken rule of one stage (no message built: the search's fast path).
[[nodiscard]] std::optional<Rule> first_broken(const Scenario& s, RuleStage stage, const RuleOptions& opt = {});

// Rejections counted by rule, as the search reports them.
using RuleCounts = std::array<std::int64_t, kRuleCount>;

}  // namespace trainplan
