// Layout search: every valid parallel layout and training configuration for a
// model on a number of GPUs, evaluated through the memory and time models,
// ranked; plus inverse queries (largest micro-batch / sequence, fewest GPUs).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainplan/rules.hpp"
#include "trainplan/time.hpp"

namespace trainplan {

enum class RankBy { Throughput, Cost };

struct SearchSpace {
    bool vary_tp = true, vary_pp = true, vary_sp = true, vary_ep = true;
    bool vary_micro_batch = true, vary_zero = true, vary_recompute = true, vary_offload = true, vary_schedule = true;
    bool vary_overlap = true;  // tp_comm_overlap (Megatron-Core TP and parameter-gather overlap) on and off
    bool vary_cp = true;       // context parallelism: every cp dividing gpus / (tp x pp)
    bool vary_activation_offload = true;  // saved activations to host and back (off, on)
    // grad_reduce_bf16 and overlap_grad_reduce, each on and off.
    bool vary_grad_reduce = true;
    // TP beyond one node is a valid layout (NVLink-less TP over the network);
    // true keeps TP inside a node (rule tp-within-node counts what it drops).
    bool tp_within_node = false;
    // Interleaved chunks per stage tried: every v in 2..max_vp that splits the
    // layers evenly (Megatron-LM takes any such v, not only powers of two).
    int max_vp = 1 << 20;
    // Micro-batches tried: every divisor of the global batch up to this.
    std::int64_t max_micro_batch = std::int64_t{1} << 40;
    // Only configurations that leave at least this much memory free per GPU
    // count as fitting ("fastest that keeps X GB headroom").
    double min_headroom_bytes = 0;
    // Evaluate every configuration (no bounds, no dominance): the reference
    // the branch-and-bound search is tested against.
    bool exhaustive = false;
    // Also return the Pareto front of step time against memory headroom
    // (PlanResult::pareto). At a fixed GPU count the cost per token is rent x
    // GPUs x step time / tokens per step, so it orders as step time does.
    bool pareto = false;
    // Progress in [0, 1], called on the calling thread only; return false to
    // cancel (the result then says cancelled and holds what was found so far).
    std::function<bool(double)> progress;
};

struct PlanCandidate {
    Scenario scenario;
    MemoryBreakdown memory;
    TimeEstimate time;
    double cost_usd = 0;  // to train the token budget, when a rent is given
};

struct PlanResult {
    std::vector<PlanCandidate> top;  // best first
    // The Pareto front (SearchSpace::pareto): no other fitting configuration
    // is at least as fast with at least as much headroom; fastest first.
    std::vector<PlanCandidate> pareto;
    // Valid configurations in the space (every one that passes the rules):
    // the branch-and-bound search proves the answer over all of them.
    std::int64_t evaluated = 0;
    // Work done (depends on the thread count's interleaving; the answer does not).
    std::int64_t memory_evaluations = 0, time_evaluations = 0, bound_evaluations = 0;
    std::int64_t pruned = 0;         // configurations decided by a bound or dominance without evaluation
    std::int64_t feasible = 0;       // among the evaluated: fit (all of them when exhaustive)
    std::int64_t out_of_memory = 0;  // among the evaluated: do not fit
    // Combinations skipped by feasibility rule (rules.hpp), counted where the
    // search first decides them (a tp that does not divide the heads is one
    // rejection, not one per micro-batch under it).
    RuleCounts rejected{};
    bool cancelled = false;
    double seconds = 0;              // wall time of the search
    // CPU seconds of each worker thread and of the serial part (enumeration,
    // sorting, merging) on the calling thread: serial + max(worker) is the
    // wall time with a free core per thread, measurable on a loaded machine.
    std::vector<double> thread_cpu_s;
    double serial_cpu_s = 0;
};

// Searches around `base` (its model, hardware, method, precision, optimizer,
// sequence length, global batch and GPU count are kept; everything in `space`
// is varied). Exact: the top list is the true best by the model (branch and
// bound, search.cpp argues why). Deterministic for any thread count (0 =
// hardware concurrency). The ranking is by step time: at a fixed GPU count and
// global batch, tokens/s and the cost to train a budget order the same way.
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
