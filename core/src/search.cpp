#include "trainplan/search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "trainplan/enums.hpp"
#include "trainplan/memory.hpp"
#include "trainplan/moves.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/policy.hpp"

namespace trainplan {

namespace {

// ---------------------------------------------------------------------------
// The space. Three levels, each generated from the enum tables and the rule
// table (rules.hpp), each rule checked as soon as its stage is set:
//   shape    tp x cp x pp x schedule/vp x ep x sp x micro-batch: the step's
//            work, layout and pipeline (what compute, bubble, TP/CP/PP/EP
//            traffic read)
//   setup    zero stage x FSDP strategy x optimizer offload x parameter offload
//            (what only memory, DP traffic, the optimizer and offload read)
//   leaf     variant (recompute x recompute_method/layers x activation
//            offload) x DP-side values (grad_reduce_bf16 x overlap_grad_reduce
//            x tp_comm_overlap), in time order: the first value of each list
//            is the fastest (see the bound argument below).
// A new dimension joins a level by its row in kSetupAxes (setup) or a loop in
// the shape enumeration (shape); a new recompute or offload variant is a new
// row of its enum table and joins by itself.

struct Shape {
    int tp, pp, dp, vp, ep, cp;
    bool sp;
    Schedule schedule;
    std::int64_t mb, ga;
    int variants;  // index into the recompute/offload variant lists (one per deepest stage)
};

// A leaf of the memory-relevant kind: recompute variant x activation offload.
// `full_layers` is how many layers of the deepest stage full recompute
// repeats (0 when recompute is not full; `deepest` when every layer is).
struct Variant {
    Recompute rec;
    RecomputeMethod method;
    int layers;
    bool act_offload;
    int full_layers;
    bool all_layers;
};
// The time order argued above plan_layouts: y is proven no slower than x (same
// shape, setup and DP-side leaf values).
bool no_slower(const Variant& y, const Variant& x) {
    if (y.act_offload) return false;  // offload adds a term >= 0; with it on, recompute is not ordered
    if (y.rec == Recompute::None) return true;
    if (x.rec == Recompute::Full && x.all_layers) return true;
    if (y.rec == Recompute::Full && x.rec == Recompute::Full) return y.full_layers <= x.full_layers;
    return y.rec == x.rec && y.method == x.method && y.layers == x.layers;
}
// A linear extension of no_slower: offload off before on, then none, then
// selective and per-op, then full by the layers it repeats.
int variant_key(const Variant& v, int deepest) {
    const int k = v.rec == Recompute::None ? 0 : v.rec != Recompute::Full ? 1 : 2 + (v.all_layers ? deepest : v.full_layers);
    return (v.act_offload ? 4 + deepest : 0) + k;
}
// Dominated DP-side leaf values: grad_reduce_bf16, tp_comm_overlap; all on first.
using Dp2 = std::array<bool, 2>;

// Setup dimensions: schema key, the values (from the enum table, in table
// order) and how one is set. FSDP: only HYBRID_SHARD is a model point of its
// own; FULL_SHARD, SHARD_GRAD_OP and NO_SHARD are spellings of ZeRO 3, 2 and 0
// (sharding.cpp reads fsdp only to place a hybrid shard group), so they would
// count one configuration twice.
struct SetupAxis {
    const char* key;
    std::vector<int> (*values)(const Scenario& base, const SearchSpace& sp);
    void (*set)(TrainingSetup& t, int v);
};
template <class E>
std::vector<int> all_of() {
    std::vector<int> v;
    for (const EnumEntry& e : enum_table<E>().entries) v.push_back(e.value);
    return v;
}
const SetupAxis kSetupAxes[] = {
    // The ZeRO stages and hybrid sharding the stack's loop offers (StackConventions::zero_stages).
    {"zero",
     [](const Scenario& b, const SearchSpace& sp) {
         return sp.vary_zero ? policy().stack(b.setup.stack).zero_stages : std::vector<int>{b.setup.zero_stage};
     },
     [](TrainingSetup& t, int v) { t.zero_stage = v; }},
    {"fsdp",
     [](const Scenario& b, const SearchSpace& sp) {
         if (!sp.vary_zero) return std::vector<int>{static_cast<int>(b.setup.fsdp)};
         std::vector<int> v{static_cast<int>(FsdpStrategy::None)};
         if (policy().stack(b.setup.stack).hybrid_shard) v.push_back(static_cast<int>(FsdpStrategy::HybridShard));
         return v;
     },
     [](TrainingSetup& t, int v) { t.fsdp = static_cast<FsdpStrategy>(v); }},
    {"optimizer_offload",
     [](const Scenario& b, const SearchSpace& sp) { return sp.vary_offload ? all_of<Offload>() : std::vector<int>{static_cast<int>(b.setup.optimizer_offload)}; },
     [](TrainingSetup& t, int v) { t.optimizer_offload = static_cast<Offload>(v); }},
    {"param_offload",
     [](const Scenario& b, const SearchSpace& sp) { return sp.vary_offload ? all_of<Offload>() : std::vector<int>{static_cast<int>(b.setup.param_offload)}; },
     [](TrainingSetup& t, int v) { t.param_offload = static_cast<Offload>(v); }},
};
constexpr size_t kSetupDims = std::size(kSetupAxes);
using SetupCombo = std::array<int, kSetupDims>;

// CPU time of the calling thread (not wall time: the search is measured on
// shared machines).
double thread_cpu_s() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#else
    return 0;  // no per-thread CPU clock: the figures read 0
#endif
}

std::vector<int> divisors(int n) {
    std::vector<int> d;
    for (int i = 1; i <= n; ++i)
        if (n % i == 0) d.push_back(i);
    return d;
}
std::vector<std::int64_t> divisors64(std::int64_t n, std::int64_t limit) {
    std::vector<std::int64_t> lo, hi;
    for (std::int64_t i = 1; i * i <= n; ++i)
        if (n % i == 0) {
            lo.push_back(i);
            if (i != n / i) hi.push_back(n / i);
        }
    lo.insert(lo.end(), hi.rbegin(), hi.rend());
    std::vector<std::int64_t> out;
    for (auto d : lo)
        if (d <= limit) out.push_back(d);
    return out;
}

// An FSDP strategy fixes the ZeRO stage (training.hpp): other pairings are not
// configurations at all (the resolver refuses them), so they are skipped, not rejected.
bool setup_consistent(const TrainingSetup& t) { return t.zero_stage == fsdp_zero_stage(t.fsdp, t.zero_stage); }

void apply_shape(Scenario& s, const Shape& h) {
    TrainingSetup& t = s.setup;
    ParallelLayout& p = t.layout;
    p.tp = h.tp;
    p.pp = h.pp;
    p.dp = h.dp;
    p.vp = h.vp;
    p.ep = h.ep;
    p.sequence_parallel = h.sp;
    p.schedule = h.schedule;
    p.cp = h.cp;
    t.micro_batch = h.mb;
    t.grad_accum = h.ga;
}
void apply_setup(Scenario& s, const SetupCombo& c) {
    for (size_t i = 0; i < kSetupDims; ++i) kSetupAxes[i].set(s.setup, c[i]);
}
void apply_variant(Scenario& s, const Variant& v) {
    s.setup.recompute = v.rec;
    s.setup.recompute_method = v.method;
    s.setup.recompute_layers = v.layers;
    s.setup.activation_offload = v.act_offload;
}
void apply_dp(Scenario& s, const Dp2& d) {
    s.setup.grad_reduce_bf16 = d[0];
    s.setup.tp_comm_overlap = d[1];
}

// Ranking: by step time, then by enumeration index (the tie-break that makes
// the answer the same for any thread count and for brute force).
struct Leaf {
    std::int64_t index = 0;
    double step = 0, headroom = 0;
    int shape = 0, combo = 0, var = 0, ogr = 0, dp = 0;
};
bool better(const Leaf& a, const Leaf& b) {
    if (a.step != b.step) return a.step < b.step;
    return a.index < b.index;
}
using LayoutKey = std::tuple<int, int, int, int, int>;  // tp, pp, dp, ep, cp

// Best configuration per layout and the k best layouts so far, shared by the
// workers; `threshold` is the k-th best layout's step time (infinity until k
// layouts are known): a subtree whose lower bound exceeds it cannot change
// the answer.
struct TopK {
    size_t k;
    std::mutex mu;
    std::map<LayoutKey, Leaf> best;
    std::atomic<double> threshold{std::numeric_limits<double>::infinity()};
    void offer(const LayoutKey& key, const Leaf& l) {
        std::lock_guard lock(mu);
        auto it = best.find(key);
        if (it != best.end() && !better(l, it->second)) return;
        best[key] = l;
        if (best.size() < k) return;
        std::vector<double> steps;
        steps.reserve(best.size());
        for (const auto& [_, v] : best) steps.push_back(v.step);
        std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(k - 1), steps.end());
        threshold.store(steps[k - 1]);
    }
};

}  // namespace

// ---------------------------------------------------------------------------
// Why branch and bound returns the exact answer (and what the brute-force test
// in test_search.cpp checks on random spaces small enough to enumerate):
//
// step = compute + bubble + TP + PP + EP + exposed DP + optimizer + offload
// (+ a data stall that only raises it; time.cpp). Of these,
//  - compute, bubble, TP, PP and EP read the shape and the leaf dimensions, and
//    none of the setup dimensions (ZeRO, FSDP, offloads change the ShardPlan's
//    divisors and DP groups, which only the DP, optimizer and offload terms read);
//  - exposed DP, optimizer and offload are >= 0.
// So one evaluation per shape at its fastest leaf values gives a floor valid
// for every configuration under it: compute + bubble + TP + PP + EP ("shape
// bound": compute floor + bubble floor + model-parallel traffic floor).
// Leaf dimensions are listed fastest first: recompute none adds no recompute
// FLOPs (every other variant adds >= 0 to compute, and so to the bubble, per
// micro-batch; full recompute also repeats the TP all-reduce), while nothing
// on the DP side reads recompute; activation offload off adds no exposed copy
// (on adds max(0, copy - compute) >= 0 per micro-batch to offload_s and reads
// nothing else, time.cpp); tp_comm_overlap on multiplies TP traffic by
// tp_comm_exposed_fraction <= 1 (defaults.toml) and hides parameter gathers
// (max(0, ag - fwd) <= ag). Hence the step at the first leaf values, with
// activation offload off even where the space holds it on, is a floor for
// every leaf of a (shape, setup) node ("node bound"). (The data stall makes
// the step max(step without it, loader time): non-decreasing, so floors stay
// floors.)
// Shapes are visited in order of their bound; the search stops at the first
// shape whose bound exceeds the k-th best layout found so far, and skips a node
// whose bound does.
// DP-side leaf values: tp_comm_overlap on (above) and grad_reduce_bf16 on
// (reduces min(grad bytes, 2) per gradient instead of grad bytes, time.cpp,
// and the exposed reduce is non-decreasing in its size; keeps a 2-byte
// instead of a 4-byte gradient buffer where Megatron keeps fp32 main grads,
// memory.cpp, the same elsewhere) are never slower and never use more memory
// than off: the other values are dominated (for the Pareto front too: no more
// headroom, no faster, later index) and never evaluated.
// overlap_grad_reduce is NOT ordered by the model: on exposes max(0, rs -
// backward) + the last bucket, off the whole reduce rs, and the first can
// exceed the second when the backward is shorter than the last bucket
// (time.cpp). Memory does not read it, so each fitting variant is timed with
// both values and the node bound is the smaller of the two.
// None of these is read by compute, bubble or TP/PP/EP traffic except
// tp_comm_overlap, whose "on" is the one the shape bound uses.
// Recompute variants form a partial order in time (no_slower), not a chain:
// none adds nothing; selective and per-op each repeat a subset of one layer's
// forward (attention, or every other matmul and the element-wise ops: which
// is dearer depends on the shape); full repeats the forward and TP all-reduce
// of the layers recompute_method/layers picks (opgraph.cpp recompute_layers):
// uniform N recomputes every layer of the stage (N only sets the checkpoint
// group: memory, not time), block n the first n, so fewer layers is faster
// and stores more. Hence none <= {selective, per-op} <= full-every-layer and
// none <= block n <= block n' <= full-every-layer for n <= n'; selective,
// per-op and block n are not ordered among themselves. Activation offload
// only adds the exposed copy (offload term >= 0, compute untouched): a
// variant with it off is no slower than the same recompute with it on; with
// it on recompute is not ordered (recompute shrinks what is copied), so an
// offloaded variant dominates nothing. Variants are tried in a linear
// extension of that order (variant_key) and one is skipped once an earlier
// variant proven no slower fits; the fastest fitting one is the node's best.
// For the Pareto front every fitting variant is timed.
// Context parallelism is a shape dimension: it changes the tokens per GPU
// and adds the ring exchange (cp terms); the shape bound omits the exposed
// ring exchange (>= 0), so it stays a floor.
// Only strict inequalities prune, and ties go to the lower enumeration index,
// so every configuration of the true top-k is evaluated, whatever order the
// threads reach it in: the answer equals brute force for any thread count.
// Threads: the shape bounds are split statically (one evaluation each, even
// cost); the branch and bound hands shapes out in bound order from one atomic
// counter (tens of thousands of small subtrees: no thread waits for another's
// large one), and the incumbent (the k-th best layout's step) is one atomic
// every thread reads before opening a shape or a node. A thread that reads a
// stale (higher) incumbent only does more work; pruning is on strict
// inequality against a value that is always some real configuration's step,
// so what is pruned cannot be in the top k. Each thread keeps its counters
// in its own slot (padded to a cache line) and allocates nothing per leaf.

namespace {
SearchSpace stack_space(SearchSpace sp, Stack stack) {
    const StackConventions& c = policy().stack(stack);
    if (!c.tensor_parallel) sp.vary_tp = sp.vary_sp = false;
    if (!c.pipeline_parallel) sp.vary_pp = sp.vary_schedule = false;
    if (!c.context_parallel) sp.vary_cp = false;
    if (!c.expert_parallel) sp.vary_ep = false;
    if (!c.tp_comm_overlap) sp.vary_overlap = false;
    if (!c.activation_offload) sp.vary_activation_offload = false;
    return sp;
}
}  // namespace

PlanResult plan_layouts(const Scenario& base, const SearchSpace& asked, size_t top_n, RankBy rank, unsigned threads,
                        std::int64_t global_batch) {
    (void)rank;  // step time orders tokens/s and cost alike at a fixed GPU count
    // Only what the stack can run is searched (data/defaults.toml [stack.*]; rules
    // stack-*): the base's own values of the rest stay fixed.
    const SearchSpace space = stack_space(asked, base.setup.stack);
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_cpu_s();
    PlanResult res;
    const ModelSpec& m = base.model;
    const int n = base.cluster.num_gpus;
    const std::int64_t gb = global_batch > 0 ? global_batch : base.setup.global_batch();
    top_n = std::max<size_t>(top_n, 1);

    // ---- setup combinations and leaf values (the same for every shape).
    std::vector<SetupCombo> combos{SetupCombo{}};
    for (size_t d = 0; d < kSetupDims; ++d) {
        std::vector<SetupCombo> next;
        for (const SetupCombo& c : combos)
            for (int v : kSetupAxes[d].values(base, space)) {
                SetupCombo x = c;
                x[d] = v;
                next.push_back(x);
            }
        combos = std::move(next);
    }
    // Leaf lists in time order (fastest first). Recompute x activation offload:
    // one list per deepest-stage layer count (full recompute's layer choices
    // depend on it), in variant_key's order (a linear extension of no_slower).
    std::vector<std::vector<Variant>> var_lists;
    std::map<int, int> var_list_of;  // deepest stage's layers -> index into var_lists
    auto variants_for = [&](int deepest) {
        auto it = var_list_of.find(deepest);
        if (it != var_list_of.end()) return it->second;
        std::vector<Variant> v;
        auto full = [&](RecomputeMethod meth, int layers, bool off) {
            TrainingSetup t;
            t.recompute = Recompute::Full;
            t.recompute_method = meth;
            t.recompute_layers = layers;
            const int rc = recompute_layers(t, deepest).recomputed;
            v.push_back({Recompute::Full, meth, layers, off, rc, meth == RecomputeMethod::Uniform});
        };
        const std::vector<bool> offs = space.vary_activation_offload ? std::vector<bool>{false, true} : std::vector<bool>{base.setup.activation_offload};
        for (bool off : offs) {
            if (!space.vary_recompute) {
                if (base.setup.recompute == Recompute::Full) full(base.setup.recompute_method, base.setup.recompute_layers, off);
                else v.push_back({base.setup.recompute, base.setup.recompute_method, base.setup.recompute_layers, off, 0, false});
                continue;
            }
            for (int rv : all_of<Recompute>()) {
                const auto r = static_cast<Recompute>(rv);
                if (r != Recompute::Full) {
                    v.push_back({r, base.setup.recompute_method, base.setup.recompute_layers, off, 0, false});
                    continue;
                }
                // Uniform N (every layer recomputed, N per checkpoint group) for N
                // = 1..deepest; block n (the first n layers) for n = 1..deepest - 1
                // (block over every layer is uniform N = 1: the same point).
                // every-k is block ceil(layers / k) in the model (opgraph.cpp
                // recompute_layers: the same checkpointed, stored and recomputed
                // counts), so it would count points twice.
                for (int nl = 1; nl <= std::max(1, deepest); ++nl) full(RecomputeMethod::Uniform, nl, off);
                for (int nl = 1; nl < deepest; ++nl) full(RecomputeMethod::Block, nl, off);
            }
        }
        std::stable_sort(v.begin(), v.end(), [&](const Variant& a, const Variant& b) { return variant_key(a, deepest) < variant_key(b, deepest); });
        var_lists.push_back(std::move(v));
        var_list_of[deepest] = static_cast<int>(var_lists.size() - 1);
        return static_cast<int>(var_lists.size() - 1);
    };
    std::vector<Dp2> dps{Dp2{base.setup.grad_reduce_bf16, base.setup.tp_comm_overlap}};
    auto vary_dp = [&](size_t k) {
        std::vector<Dp2> next;
        for (const Dp2& d : dps)
            for (bool b : {true, false}) {
                Dp2 x = d;
                x[k] = b;
                next.push_back(x);
            }
        dps = std::move(next);
    };
    if (space.vary_grad_reduce) vary_dp(0);
    if (space.vary_overlap) vary_dp(1);
    // Lexicographic with true first: dps.front() is both on.
    std::stable_sort(dps.begin(), dps.end(), [](const Dp2& a, const Dp2& b) { return a > b; });
    const std::int64_t D = static_cast<std::int64_t>(dps.size());
    // overlap_grad_reduce is not ordered in time by the model (on adds the
    // unhidden last bucket, off the whole reduce; either can be larger) and
    // memory does not read it: every fitting variant is timed with each value.
    std::vector<bool> ogrs{base.setup.overlap_grad_reduce};
    if (space.vary_grad_reduce) ogrs = {true, false};
    const std::int64_t G = static_cast<std::int64_t>(ogrs.size());
    const std::int64_t J = static_cast<std::int64_t>(combos.size());

    // ---- enumerate shapes; count the valid setups of each.
    RuleOptions ropt;
    ropt.tp_within_node = space.tp_within_node;
    ropt.global_batch = gb;
    Scenario w = base;
    TrainingSetup& wt = w.setup;
    ParallelLayout& wl = wt.layout;
    auto broken = [&](RuleStage stage, std::int64_t count = 1) {
        const auto r = first_broken(w, stage, ropt);
        if (r) res.rejected[static_cast<size_t>(*r)] += count;
        return r.has_value();
    };
    std::vector<Shape> shapes;
    std::vector<std::vector<int>> valid_combos;  // per shape: indices into combos
    struct SetupCheck {
        std::vector<int> ok;  // indices into combos
        RuleCounts rejected{};
    };
    using LayoutCacheKey = std::array<int, 7>;  // tp, pp, dp, ep, vp, schedule, cp
    std::map<LayoutCacheKey, SetupCheck> combos_by_pp;
    std::int64_t space_size = 0;
    std::vector<std::int64_t> shape_offset;  // leaf index of each shape's first configuration
    wl.vp = 1;
    wl.ep = 1;
    wl.cp = 1;
    wl.schedule = Schedule::OneF1B;
    const std::vector<int> tps = space.vary_tp ? divisors(n) : std::vector<int>{base.setup.layout.tp};
    const std::vector<std::int64_t> mb_universe =
        space.vary_micro_batch ? divisors64(gb, space.max_micro_batch) : std::vector<std::int64_t>{base.setup.micro_batch};
    for (int tp : tps) {
        if (tp < 1 || n % tp) continue;
        wl.tp = tp;
        wl.pp = 1;
        wl.cp = 1;
        wl.dp = n / tp;
        if (broken(RuleStage::TensorParallel)) continue;
        // Context parallelism: its rules are TensorParallel-stage rules; with
        // cp = 1 they hold, so a cp > 1 that breaks one is counted once here.
        const std::vector<int> cps = space.vary_cp ? divisors(n / tp) : std::vector<int>{base.setup.layout.cp};
        for (int cp : cps) {
        if (cp < 1 || (n / tp) % cp) continue;
        wl.cp = cp;
        wl.pp = 1;
        wl.dp = n / (tp * cp);
        if (cp != 1 && broken(RuleStage::TensorParallel)) continue;
        const std::vector<int> pps = space.vary_pp ? divisors(n / (tp * cp)) : std::vector<int>{base.setup.layout.pp};
        for (int pp : pps) {
            if (pp < 1 || (n / (tp * cp)) % pp) continue;
            wl.pp = pp;
            wl.dp = n / (tp * pp * cp);
            wl.vp = 1;
            wl.schedule = Schedule::OneF1B;
            if (broken(RuleStage::Pipeline) || broken(RuleStage::Schedule)) continue;
            const int dp = wl.dp;
            // Schedules from the enum table: 1F1B; GPipe and every interleaving
            // depth 2..layers/pp when pipelined (the rule table rejects the
            // depths that do not split the layers).
            std::vector<std::pair<int, Schedule>> schedules;
            if (!space.vary_schedule) schedules = {{base.setup.layout.vp, base.setup.layout.schedule}};
            else
                for (int sv : all_of<Schedule>()) {
                    const auto sc = static_cast<Schedule>(sv);
                    if (sc == Schedule::Interleaved) {
                        if (pp < 2) continue;
                        const std::int64_t most = std::min<std::int64_t>(space.max_vp, m.num_layers / pp);
                        for (int v = 2; v <= most; ++v) schedules.push_back({v, sc});
                    } else if (sc == Schedule::OneF1B || pp > 1) {
                        schedules.push_back({1, sc});  // GPipe on one stage is 1F1B: one point
                    }
                }
            std::vector<int> eps{space.vary_ep ? 1 : base.setup.layout.ep};
            if (m.is_moe() && space.vary_ep) eps = divisors(m.moe.num_experts);
            std::vector<bool> sps{base.setup.layout.sequence_parallel && tp > 1};
            if (tp > 1 && space.vary_sp) sps = {false, true};
            for (auto [v, sched] : schedules) {
                wl.vp = v;
                wl.schedule = sched;
                if (broken(RuleStage::Schedule)) continue;
                for (int ep : eps) {
                    wl.ep = ep;
                    if (broken(RuleStage::Experts)) continue;
                    for (bool sp : sps)
                        for (std::int64_t mb : mb_universe) {
                            wt.micro_batch = mb;
                            wt.grad_accum = std::max<std::int64_t>(1, gb / (mb * dp));
                            if (broken(RuleStage::Batch)) continue;
                            // Setup rules read the layout (ZeRO >= 2 with pipelining)
                            // and the setup, not the micro-batch or SP: decided once
                            // per layout, counted per shape.
                            const LayoutCacheKey ck{tp, pp, dp, ep, v, static_cast<int>(sched), cp};
                            int deepest = 0;
                            for (int st = 0; st < pp; ++st) deepest = std::max(deepest, layers_on_stage(m.num_layers, wl, st));  // wl.pp == pp here
                            const int vl = variants_for(deepest);
                            const std::int64_t leaves_per_setup = static_cast<std::int64_t>(var_lists[static_cast<size_t>(vl)].size()) * G * D;
                            auto it = combos_by_pp.find(ck);
                            if (it == combos_by_pp.end()) {
                                SetupCheck sc;
                                const RuleCounts before = res.rejected;
                                for (std::int64_t j = 0; j < J; ++j) {
                                    apply_setup(w, combos[static_cast<size_t>(j)]);
                                    if (!setup_consistent(wt)) continue;
                                    if (broken(RuleStage::Setup, leaves_per_setup)) continue;
                                    sc.ok.push_back(static_cast<int>(j));
                                }
                                for (size_t r = 0; r < kRuleCount; ++r) sc.rejected[r] = res.rejected[r] - before[r];
                                res.rejected = before;
                                it = combos_by_pp.emplace(ck, std::move(sc)).first;
                            }
                            for (size_t r = 0; r < kRuleCount; ++r) res.rejected[r] += it->second.rejected[r];
                            const std::vector<int>& ok = it->second.ok;
                            if (ok.empty()) continue;
                            shapes.push_back({tp, pp, dp, v, ep, cp, sp, sched, mb, gb / (mb * dp), vl});
                            valid_combos.push_back(ok);
                            shape_offset.push_back(space_size);
                            space_size += static_cast<std::int64_t>(ok.size()) * leaves_per_setup;
                        }
                }
            }
        }
        }
    }
    res.evaluated = space_size;

    const LayerGraph graph = build_layer_graph(m, base.setup);
    const double headroom_needed = std::max(0.0, space.min_headroom_bytes);
    auto fits = [&](const MemoryBreakdown& b) { return b.fits() && b.headroom() >= headroom_needed; };
    // A configuration's place in the enumeration (shape, its k-th valid setup,
    // variant, overlap_grad_reduce, dominated DP-side values): the tie-break
    // shared with brute force.
    auto leaf_index = [&](size_t shape, std::int64_t k, std::int64_t v, std::int64_t g, std::int64_t d) {
        const std::int64_t V = static_cast<std::int64_t>(var_lists[static_cast<size_t>(shapes[shape].variants)].size());
        return shape_offset[shape] + ((k * V + v) * G + g) * D + d;
    };
    unsigned nthreads = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
    nthreads = static_cast<unsigned>(std::min<size_t>(nthreads, std::max<size_t>(1, shapes.size() / 8)));

    std::atomic<bool> cancel{false};
    std::atomic<size_t> done{0};
    auto report = [&](unsigned worker) {
        if (worker != 0 || !space.progress || shapes.empty()) return;
        if (!space.progress(static_cast<double>(done.load()) / static_cast<double>(shapes.size()))) cancel = true;
    };
    struct alignas(64) Counters {  // one cache line apart: no false sharing between workers
        std::int64_t mem = 0, time = 0, bound = 0, pruned = 0, feasible = 0, oom = 0;
        std::int64_t visited = 0;  // configurations under the shapes a worker opened
        std::vector<Leaf> points;  // pareto candidates
    };
    std::vector<Counters> counters(nthreads);
    // Each worker's CPU time (its own clock: what a core of its own would take,
    // whatever else the machine runs) is reported with the serial part.
    std::vector<double> worker_cpu(nthreads, 0.0);
    auto run_workers = [&](auto&& body) {
        auto timed = [&](unsigned t) {
            const double c0 = thread_cpu_s();
            body(t);
            worker_cpu[t] += thread_cpu_s() - c0;
        };
        std::vector<std::thread> pool;
        for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(timed, t);
        timed(0u);
        for (auto& th : pool) th.join();
    };

    TopK top{top_n, {}, {}};
    auto layout_of = [&](const Shape& h) { return LayoutKey{h.tp, h.pp, h.dp, h.ep, h.cp}; };

    if (space.exhaustive) {
        // ---- brute force: every configuration, memory then time.
        std::atomic<size_t> next{0};
        run_workers([&](unsigned wk) {
            Scenario s = base;
            Counters& C = counters[wk];
            for (size_t i; !cancel && (i = next++) < shapes.size();) {
                apply_shape(s, shapes[i]);
                const std::vector<Variant>& vars = var_lists[static_cast<size_t>(shapes[i].variants)];
                const std::int64_t V = static_cast<std::int64_t>(vars.size());
                for (size_t k = 0; k < valid_combos[i].size(); ++k) {
                    const int j = valid_combos[i][k];
                    apply_setup(s, combos[static_cast<size_t>(j)]);
                    for (std::int64_t r = 0; r < V; ++r)
                        for (std::int64_t g = 0; g < G; ++g)
                        for (std::int64_t o = 0; o < D; ++o) {
                            apply_variant(s, vars[static_cast<size_t>(r)]);
                            s.setup.overlap_grad_reduce = ogrs[static_cast<size_t>(g)];
                            apply_dp(s, dps[static_cast<size_t>(o)]);
                            const MemoryBreakdown mb = estimate_memory(s, graph).peak();
                            ++C.mem;
                            if (!fits(mb)) { ++C.oom; continue; }
                            ++C.feasible;
                            const TimeEstimate te = estimate_time(s, graph);
                            ++C.time;
                            Leaf l{leaf_index(i, static_cast<std::int64_t>(k), r, g, o), te.time.step_s, mb.headroom(), static_cast<int>(i), j,
                                   static_cast<int>(r), static_cast<int>(g), static_cast<int>(o)};
                            top.offer(layout_of(shapes[i]), l);
                            if (space.pareto) C.points.push_back(l);
                        }
                }
                ++done;
                report(wk);
            }
        });
    } else {
        // ---- shape bounds (one evaluation per shape, static split: deterministic).
        std::vector<double> shape_lb(shapes.size());
        // Visiting order: by bound, then by index (a total order, so the order
        // is the same for any thread count). Each worker sorts its own range;
        // the sorted ranges are merged after.
        std::vector<size_t> order(shapes.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        auto by_bound = [&](size_t a, size_t b) { return shape_lb[a] != shape_lb[b] ? shape_lb[a] < shape_lb[b] : a < b; };
        auto range_of = [&](unsigned wk) { return std::pair{shapes.size() * wk / nthreads, shapes.size() * (wk + 1) / nthreads}; };
        SetupCombo relaxed_setup{};
        for (size_t d = 0; d < kSetupDims; ++d) relaxed_setup[d] = kSetupAxes[d].values(base, space).front();
        run_workers([&](unsigned wk) {
            Scenario s = base;
            const auto [lo, hi] = range_of(wk);
            apply_setup(s, relaxed_setup);
            apply_dp(s, dps.front());
            s.setup.overlap_grad_reduce = ogrs.front();
            for (size_t i = lo; i < hi; ++i) {
                apply_shape(s, shapes[i]);
                apply_variant(s, var_lists[static_cast<size_t>(shapes[i].variants)].front());
                const TimeBreakdown tb = estimate_time(s, graph).time;
                shape_lb[i] = tb.compute_s + tb.bubble_s + tb.tp_comm_s + tb.pp_comm_s + tb.ep_comm_s;
            }
            counters[wk].bound += static_cast<std::int64_t>(hi - lo);
            std::sort(order.begin() + static_cast<std::ptrdiff_t>(lo), order.begin() + static_cast<std::ptrdiff_t>(hi), by_bound);
        });
        for (unsigned wk = 1; wk < nthreads; ++wk) {
            const auto [lo, hi] = range_of(wk);
            std::inplace_merge(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(lo), order.begin() + static_cast<std::ptrdiff_t>(hi), by_bound);
        }

        // ---- branch and bound over shapes in bound order.
        std::atomic<size_t> next{0};
        run_workers([&](unsigned wk) {
            Scenario s = base;
            Counters& C = counters[wk];
            std::vector<int> fitted;  // variants of the current node that fit
            std::vector<double> fitted_room;  // their headroom
            std::vector<double> first;  // node bound's step per overlap_grad_reduce value
            for (size_t pos; !cancel && (pos = next++) < order.size();) {
                const size_t i = order[pos];
                const std::vector<Variant>& vars = var_lists[static_cast<size_t>(shapes[i].variants)];
                const std::int64_t V = static_cast<std::int64_t>(vars.size());
                const std::int64_t leaves = static_cast<std::int64_t>(valid_combos[i].size()) * V * G * D;
                if (!space.pareto && shape_lb[i] > top.threshold.load()) {
                    // Sorted: every later shape is bounded out too (counted below).
                    next = order.size();
                    done = shapes.size();
                    break;
                }
                C.visited += leaves;
                apply_shape(s, shapes[i]);
                for (size_t k = 0; k < valid_combos[i].size(); ++k) {
                    const int j = valid_combos[i][k];
                    apply_setup(s, combos[static_cast<size_t>(j)]);
                    apply_dp(s, dps.front());
                    // Node bound: the fastest variant with activation offload off
                    // (a floor even where the space fixes offload on: offload only
                    // adds its exposed copy), the faster overlap_grad_reduce.
                    Variant floor_var = vars.front();
                    floor_var.act_offload = false;
                    apply_variant(s, floor_var);
                    first.clear();
                    for (bool ogr : ogrs) {
                        s.setup.overlap_grad_reduce = ogr;
                        first.push_back(estimate_time(s, graph).time.step_s);
                        ++C.bound;
                    }
                    const double node_lb = *std::min_element(first.begin(), first.end());
                    if (!space.pareto && node_lb > top.threshold.load()) { C.pruned += V * G * D; continue; }
                    C.pruned += V * G * (D - 1);  // dominated DP-side values (not both on)
                    fitted.clear();
                    fitted_room.clear();
                    for (std::int64_t r = 0; r < V; ++r) {
                        const Variant& x = vars[static_cast<size_t>(r)];
                        if (!space.pareto &&
                            std::any_of(fitted.begin(), fitted.end(), [&](int y) { return no_slower(vars[static_cast<size_t>(y)], x); })) {
                            C.pruned += G;  // a variant proven no slower, earlier, fits: dominated
                            continue;
                        }
                        apply_variant(s, x);
                        s.setup.overlap_grad_reduce = ogrs.front();  // memory does not read it
                        const MemoryBreakdown mb = estimate_memory(s, graph).peak();
                        ++C.mem;
                        if (!fits(mb)) { C.oom += G; continue; }
                        C.feasible += G;
                        if (space.pareto) {
                            // Off the front and out of the top: an earlier variant of
                            // this node, proven no slower at each overlap_grad_reduce
                            // value, fits with at least this headroom (it precedes
                            // this one in the front's order: faster, or as fast with
                            // as much room and a lower index).
                            bool covered = false;
                            for (size_t q = 0; q < fitted.size() && !covered; ++q)
                                covered = fitted_room[q] >= mb.headroom() && no_slower(vars[static_cast<size_t>(fitted[q])], x);
                            if (covered) continue;
                        }
                        for (std::int64_t g = 0; g < G; ++g) {
                            double step = first[static_cast<size_t>(g)];
                            if (r > 0 || x.act_offload) {
                                s.setup.overlap_grad_reduce = ogrs[static_cast<size_t>(g)];
                                step = estimate_time(s, graph).time.step_s;
                                ++C.time;
                            }
                            Leaf l{leaf_index(i, static_cast<std::int64_t>(k), r, g, 0), step, mb.headroom(), static_cast<int>(i), j,
                                   static_cast<int>(r), static_cast<int>(g), 0};
                            top.offer(layout_of(shapes[i]), l);
                            if (space.pareto) C.points.push_back(l);
                        }
                        fitted.push_back(static_cast<int>(r));
                        fitted_room.push_back(mb.headroom());
                    }
                }
                ++done;
                report(wk);
            }
        });
    }
    res.cancelled = cancel.load();
    std::int64_t visited = 0;
    for (const Counters& C : counters) visited += C.visited;
    // Shapes never opened were bounded out (or, when cancelled, not reached).
    if (!space.exhaustive && !res.cancelled) res.pruned += space_size - visited;

    std::vector<Leaf> points;
    for (Counters& C : counters) {
        res.memory_evaluations += C.mem;
        res.time_evaluations += C.time;
        res.bound_evaluations += C.bound;
        res.pruned += C.pruned;
        res.feasible += C.feasible;
        res.out_of_memory += C.oom;
        points.insert(points.end(), C.points.begin(), C.points.end());
    }

    auto materialize = [&](const Leaf& l) {
        PlanCandidate pc;
        pc.scenario = base;
        apply_shape(pc.scenario, shapes[static_cast<size_t>(l.shape)]);
        apply_setup(pc.scenario, combos[static_cast<size_t>(l.combo)]);
        apply_variant(pc.scenario, var_lists[static_cast<size_t>(shapes[static_cast<size_t>(l.shape)].variants)][static_cast<size_t>(l.var)]);
        pc.scenario.setup.overlap_grad_reduce = ogrs[static_cast<size_t>(l.ogr)];
        apply_dp(pc.scenario, dps[static_cast<size_t>(l.dp)]);
        pc.memory = estimate_memory(pc.scenario, graph).peak();
        pc.time = estimate_time(pc.scenario, graph);
        pc.cost_usd = pc.time.cost.rent_cost_usd;
        return pc;
    };
    std::vector<Leaf> ranked;
    for (const auto& [k, l] : top.best) ranked.push_back(l);
    std::sort(ranked.begin(), ranked.end(), better);
    if (ranked.size() > top_n) ranked.resize(top_n);
    for (const Leaf& l : ranked) res.top.push_back(materialize(l));

    if (space.pareto) {
        // Fastest first; a point joins the front when it has more headroom than
        // every faster (or equally fast, earlier) point.
        std::sort(points.begin(), points.end(), [](const Leaf& a, const Leaf& b) {
            if (a.step != b.step) return a.step < b.step;
            if (a.headroom != b.headroom) return a.headroom > b.headroom;
            return a.index < b.index;
        });
        double most = -std::numeric_limits<double>::infinity();
        for (const Leaf& l : points)
            if (l.headroom > most) {
                most = l.headroom;
                res.pareto.push_back(materialize(l));
            }
    }
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.thread_cpu_s = worker_cpu;
    res.serial_cpu_s = thread_cpu_s() - cpu0 - worker_cpu[0];
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
