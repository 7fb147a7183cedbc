// Layout search: every valid parallel layout and training configuration for a
// model on a number of GPUs, evaluated through the memory and time models,
// ranked; plus inverse queries (largest micro-batch / sequence, fewest GPUs).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainplan/rules.hpp"
#include "trainplan/time.hpp"

namespace trainplan {

enum class RankBy { Throughput, Cost };

struct SearchSpace {
    bool vary_tp = true, vary_pp = true, vary_sp = true, vary_ep = true;
    bool vary_micro_batch = true, vary_zero = true, vary_recompute = true, vary_offload = true, vary_schedule = true;
    bool allow_tp_across_nodes = false;
    // Interleaved chunks per stage tried: every v in 2..max_vp that splits the
    // layers evenly (Megatron-LM takes any such v, not only powers of two).
    int max_vp = 16;
    std::int64_t max_micro_batch = 64;
};

struct PlanCandidate {
    Scenario scenario;
    MemoryBreakdown memory;
    TimeEstimate time;
    double cost_usd = 0;  // to train the token budget, when a rent is given
};

struct PlanResult {
    std::vector<PlanCandidate> top;  // best first
    std::int64_t evaluated = 0;      // configurations evaluated
    std::int64_t feasible = 0;
    std::int64_t out_of_memory = 0;
    // Combinations skipped by feasibility rule (rules.hpp), counted where the
    // search first decides them (a tp that does not divide the heads is one
    // rejection, not one per micro-batch under it).
    RuleCounts rejected{};
    double seconds = 0;              // wall time of the search
};

// Searches around `base` (its model, hardware, method, precision, optimizer,
// sequence length, global batch and GPU count are kept; everything in `space`
// is varied). Deterministic for any thread count (0 = hardware concurrency).
// global_batch: sequences per step to split over dp x micro-batch x accumulation
// (0 = the base scenario's).
[[nodiscard]] PlanResult plan_layouts(const Scenario& base, const SearchSpace& space, size_t top_n = 10,
                                      RankBy rank = RankBy::Throughput, unsigned threads = 0, std::int64_t global_batch = 0);

// Inverse queries on a fixed layout.
[[nodiscard]] std::int64_t max_micro_batch(const Scenario& s, std::int64_t limit = 4096);  // 0: none fits
[[nodiscard]] std::int64_t max_seq_len(const Scenario& s, std::int64_t limit = 16 * 1024 * 1024);  // 0: none fits

// Fewest GPUs on the GPU ladder (moves.hpp: powers of two below a node, then
// whole nodes; a one-node scenario grows as 8-GPU servers) for which some layout
// fits and, if target_tokens_per_s > 0, reaches it. 0 when none up to max_gpus.
// `best` receives the winning plan (its cluster has the node size used).
[[nodiscard]] int min_gpus(const Scenario& base, const SearchSpace& space, double target_tokens_per_s, int max_gpus,
                           PlanCandidate* best = nullptr, unsigned threads = 0, std::int64_t global_batch = 0);

}  // namespace trainplan
