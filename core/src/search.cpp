#include "trainplan/search.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <tuple>

#include "trainplan/moves.hpp"

namespace trainplan {

namespace {

struct Config {
    int tp, pp, vp, ep;
    bool sp;
    Schedule schedule;
    std::int64_t mb;
    int zero;
    Recompute recompute;
    Offload offload;
};

// Layout identity for de-duplication: the best configuration per parallel layout.
using LayoutKey = std::tuple<int, int, int, int>;  // tp, pp, dp, ep (best vp, schedule, ... inside)

std::vector<int> divisors(int n) {
    std::vector<int> d;
    for (int i = 1; i <= n; ++i)
        if (n % i == 0) d.push_back(i);
    return d;
}

struct Outcome {
    double score = 0;  // higher is better
    size_t index = 0;  // position in the enumeration: tie-breaker, determinism
    Config cfg{};
    MemoryBreakdown memory;
    TimeEstimate time;
};

bool better(const Outcome& a, const Outcome& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.index < b.index;
}

void apply(Scenario& s, const Config& c, std::int64_t global_batch) {
    TrainingSetup& t = s.setup;
    ParallelLayout& p = t.layout;
    p.tp = c.tp;
    p.pp = c.pp;
    p.vp = c.vp;
    p.ep = c.ep;
    p.sequence_parallel = c.sp;
    p.schedule = c.schedule;
    p.dp = s.cluster.num_gpus / (c.tp * c.pp);
    t.micro_batch = c.mb;
    t.grad_accum = global_batch / (c.mb * p.dp);
    t.zero_stage = c.zero;
    t.recompute = c.recompute;
    t.optimizer_offload = c.offload;
    if (t.fsdp != FsdpStrategy::None && c.zero != 3) t.fsdp = FsdpStrategy::None;
}

}  // namespace

PlanResult plan_layouts(const Scenario& base, const SearchSpace& space, size_t top_n, RankBy rank, unsigned threads,
                        std::int64_t global_batch) {
    const auto t0 = std::chrono::steady_clock::now();
    PlanResult res;
    const ModelSpec& m = base.model;
    const int n = base.cluster.num_gpus;
    const std::int64_t gb = global_batch > 0 ? global_batch : base.setup.global_batch();

    // ---- enumerate. Each dimension is set on a working scenario and that
    // stage's rules (rules.hpp) are checked as soon as they can be decided.
    std::vector<Config> configs;
    RuleOptions ropt;
    ropt.tp_within_node = !space.allow_tp_across_nodes;
    ropt.global_batch = gb;
    Scenario w = base;
    TrainingSetup& wt = w.setup;
    ParallelLayout& wl = wt.layout;
    auto broken = [&](RuleStage stage, std::int64_t count = 1) {
        const auto r = first_broken(w, stage, ropt);
        if (r) res.rejected[static_cast<size_t>(*r)] += count;
        return r.has_value();
    };
    wl.vp = 1;
    wl.ep = 1;
    wl.schedule = Schedule::OneF1B;
    const std::vector<int> tps = space.vary_tp ? divisors(n) : std::vector<int>{base.setup.layout.tp};
    for (int tp : tps) {
        if (n % tp) continue;
        wl.tp = tp;
        if (broken(RuleStage::TensorParallel)) continue;
        const std::vector<int> pps = space.vary_pp ? divisors(n / tp) : std::vector<int>{base.setup.layout.pp};
        for (int pp : pps) {
            if ((n / tp) % pp) continue;
            wl.pp = pp;
            wl.dp = n / (tp * pp);
            wl.vp = 1;
            wl.schedule = Schedule::OneF1B;
            if (broken(RuleStage::Pipeline) || broken(RuleStage::Schedule)) continue;
            const int dp = wl.dp;
            std::vector<std::pair<int, Schedule>> schedules{{1, Schedule::OneF1B}};
            if (!space.vary_schedule) schedules = {{base.setup.layout.vp, base.setup.layout.schedule}};
            else if (pp > 1) {
                schedules.push_back({1, Schedule::GPipe});
                for (int v = 2; v <= space.max_vp; ++v)
                    if (m.num_layers % (std::int64_t{pp} * v) == 0) schedules.push_back({v, Schedule::Interleaved});
            }
            std::vector<int> eps{space.vary_ep ? 1 : base.setup.layout.ep};
            if (m.is_moe() && space.vary_ep) eps = divisors(m.moe.num_experts);
            std::vector<bool> sps{base.setup.layout.sequence_parallel && tp > 1};
            if (tp > 1 && space.vary_sp) sps = {false, true};
            std::vector<std::int64_t> mbs{base.setup.micro_batch};
            if (space.vary_micro_batch) {
                mbs.clear();
                for (std::int64_t mb = 1; mb <= space.max_micro_batch; mb *= 2) mbs.push_back(mb);
            }
            std::vector<int> zeros{base.setup.zero_stage};
            // One GPU shards nothing, but ZeRO-Offload (stage 2 + CPU optimizer) still applies.
            if (space.vary_zero) zeros = dp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 2};
            std::vector<Recompute> recs{base.setup.recompute};
            if (space.vary_recompute) recs = {Recompute::None, Recompute::Selective, Recompute::Full};
            std::vector<Offload> offs{base.setup.optimizer_offload};
            if (space.vary_offload) offs = {Offload::None, Offload::CPU};
            for (auto [v, sched] : schedules) {
                wl.vp = v;
                wl.schedule = sched;
                if (broken(RuleStage::Schedule)) continue;
                for (int ep : eps) {
                    wl.ep = ep;
                    if (broken(RuleStage::Experts)) continue;
                    for (bool sp : sps)
                        for (std::int64_t mb : mbs) {
                            wt.micro_batch = mb;
                            wt.grad_accum = std::max<std::int64_t>(1, gb / (mb * dp));
                            if (broken(RuleStage::Batch)) continue;
                            for (int z : zeros)
                                for (Offload o : offs) {
                                    // Setup rules do not read the recompute policy: one
                                    // check covers (and counts) all its variants.
                                    wt.zero_stage = z;
                                    wt.optimizer_offload = o;
                                    if (broken(RuleStage::Setup, static_cast<std::int64_t>(recs.size()))) continue;
                                    for (Recompute r : recs) configs.push_back({tp, pp, v, ep, sp, sched, mb, z, r, o});
                                }
                        }
                }
            }
        }
    }

    // ---- evaluate in parallel: contiguous chunks, best per layout per chunk.
    const LayerGraph graph = build_layer_graph(m, base.setup);
    unsigned nthreads = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
    nthreads = static_cast<unsigned>(std::min<size_t>(nthreads, std::max<size_t>(1, configs.size() / 256)));
    struct Local {
        std::map<LayoutKey, Outcome> best;
        std::int64_t oom = 0, feasible = 0;
    };
    std::vector<Local> locals(nthreads);
    auto worker = [&](unsigned w) {
        Scenario s = base;
        Local& L = locals[w];
        const size_t lo = configs.size() * w / nthreads, hi = configs.size() * (w + 1) / nthreads;
        for (size_t i = lo; i < hi; ++i) {
            const Config& c = configs[i];
            apply(s, c, gb);
            const MemoryEstimate me = estimate_memory(s, graph);
            if (!me.peak().fits()) { ++L.oom; continue; }
            ++L.feasible;
            Outcome o;
            o.index = i;
            o.cfg = c;
            o.memory = me.peak();
            o.time = estimate_time(s, graph);
            o.score = rank == RankBy::Cost && o.time.cost.rent_cost_usd > 0 ? -o.time.cost.rent_cost_usd
                                                                             : o.time.throughput.tokens_per_s;
            const LayoutKey key{c.tp, c.pp, s.setup.layout.dp, c.ep};
            auto it = L.best.find(key);
            if (it == L.best.end() || better(o, it->second)) L.best[key] = o;
        }
    };
    std::vector<std::thread> pool;
    for (unsigned w = 1; w < nthreads; ++w) pool.emplace_back(worker, w);
    worker(0);
    for (auto& th : pool) th.join();

    std::map<LayoutKey, Outcome> best;
    for (const Local& L : locals) {
        res.out_of_memory += L.oom;
        res.feasible += L.feasible;
        for (const auto& [k, o] : L.best) {
            auto it = best.find(k);
            if (it == best.end() || better(o, it->second)) best[k] = o;
        }
    }
    res.evaluated = static_cast<std::int64_t>(configs.size());
    std::vector<Outcome> ranked;
    ranked.reserve(best.size());
    for (auto& [k, o] : best) ranked.push_back(o);
    std::sort(ranked.begin(), ranked.end(), better);
    if (ranked.size() > top_n) ranked.resize(top_n);
    for (const Outcome& o : ranked) {
        PlanCandidate pc;
        pc.scenario = base;
        apply(pc.scenario, o.cfg, gb);
        pc.memory = o.memory;
        pc.time = o.time;
        pc.cost_usd = o.time.cost.rent_cost_usd;
        res.top.push_back(std::move(pc));
    }
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

namespace {

// Largest value in [1, limit] for which fits() holds, assuming it holds up to
// some point and not beyond (memory grows with micro-batch and sequence); 0 if none.
template <class Fits>
std::int64_t largest_fitting(Fits fits, std::int64_t limit) {
    if (limit < 1 || !fits(1)) return 0;
    std::int64_t lo = 1, hi = 2;
    while (hi <= limit && fits(hi)) { lo = hi; hi *= 2; }
    hi = std::min(hi, limit + 1);
    while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
    }
    return lo;
}

}  // namespace

std::int64_t max_micro_batch(const Scenario& s, std::int64_t limit) {
    Scenario x = s;
    const LayerGraph g = build_layer_graph(x.model, x.setup);
    return largest_fitting([&](std::int64_t mb) { x.setup.micro_batch = mb; return estimate_memory(x, g).peak().fits(); }, limit);
}

std::int64_t max_seq_len(const Scenario& s, std::int64_t limit) {
    Scenario x = s;
    const LayerGraph g = build_layer_graph(x.model, x.setup);
    if (x.model.position == PositionKind::Learned) limit = std::min(limit, x.model.max_seq_len);
    return largest_fitting([&](std::int64_t seq) { x.setup.seq_len = seq; return estimate_memory(x, g).peak().fits(); }, limit);
}

int min_gpus(const Scenario& base, const SearchSpace& space, double target, int max_gpus, PlanCandidate* best, unsigned threads,
             std::int64_t global_batch) {
    const std::int64_t gb = global_batch > 0 ? global_batch : base.setup.global_batch();
    const int node = growth_node_size(base.cluster);
    for (int g : gpu_ladder(node, 1, max_gpus)) {
        Scenario s = base;
        s.cluster.num_gpus = g;
        s.cluster.gpus_per_node = std::min(node, g);
        // Keep the global batch: it must split over the data-parallel ranks.
        const PlanResult r = plan_layouts(s, space, 1, RankBy::Throughput, threads, gb);
        if (r.top.empty()) continue;
        if (target > 0 && !(r.top.front().time.throughput.tokens_per_s >= target)) continue;
        if (best) *best = r.top.front();
        return g;
    }
    return 0;
}

}  // namespace trainplan
