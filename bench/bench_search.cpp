// Issue 14 benchmark: the exact layout search for GPT-3 175B on 1,024 A100-80GB
// (global batch 1536, sequence 2048; Megatron-LM Table 1's batch), with one and
// two threads; then the same space by brute force (every configuration
// evaluated) to show the answers agree and what the bounds save.
//   trainplan_bench_search [reps]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainplan/app/presets.hpp"
#include "trainplan/io.hpp"
#include "trainplan/search.hpp"

using namespace trainplan;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
    app::FilePresets presets({TRAINPLAN_SOURCE_DIR});
    ScenarioInput in;
    in.model = "gpt3-175b";
    in.gpu = "a100-sxm-80gb";
    in.gpus = 1024;
    in.seq_len = 2048;
    auto s = resolve_scenario(in, presets);
    if (!s) { std::fprintf(stderr, "%s\n", s.error().message().c_str()); return 2; }
    const std::int64_t gb = 1536;
    double best_step = 0;
    double per_thread[3] = {0, 0, 0};
    for (unsigned threads : {1u, 2u}) {
        PlanResult r;
        double best = 1e300;
        for (int i = 0; i < reps; ++i) {
            const auto t0 = Clock::now();
            r = plan_layouts(*s, SearchSpace{}, 10, RankBy::Throughput, threads, gb);
            best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
        }
        per_thread[threads] = best;
        best_step = r.top.empty() ? 0 : r.top.front().time.time.step_s;
        const auto& l = r.top.front().scenario.setup;
        std::printf("exact search, %u thread%s: space %lld configurations, best of %d runs %.3f s; %lld memory + %lld time + %lld bound "
                    "evaluations, %lld pruned; best step %.4f s (tp%d pp%d dp%d v%d mb%lld zero%d %s%s)\n",
                    threads, threads > 1 ? "s" : "", static_cast<long long>(r.evaluated), reps, best,
                    static_cast<long long>(r.memory_evaluations), static_cast<long long>(r.time_evaluations),
                    static_cast<long long>(r.bound_evaluations), static_cast<long long>(r.pruned), best_step, l.layout.tp, l.layout.pp,
                    l.layout.dp, l.layout.vp, static_cast<long long>(l.micro_batch), l.zero_stage, to_string(l.recompute),
                    l.tp_comm_overlap ? " overlap" : "");
    }
    std::printf("speed-up, 2 threads over 1: %.2fx (the machine's other load counts: see README)\n", per_thread[1] / per_thread[2]);
    SearchSpace brute;
    brute.exhaustive = true;
    for (unsigned threads : {1u, 2u}) {
        const auto t0 = Clock::now();
        const PlanResult r = plan_layouts(*s, brute, 10, RankBy::Throughput, threads, gb);
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("brute force, %u thread%s: %lld configurations evaluated in %.3f s; best step %.4f s (%s)\n", threads,
                    threads > 1 ? "s" : "", static_cast<long long>(r.memory_evaluations), secs,
                    r.top.empty() ? 0.0 : r.top.front().time.time.step_s,
                    !r.top.empty() && r.top.front().time.time.step_s == best_step ? "same as the exact search" : "DIFFERS");
    }
    SearchSpace front;
    front.pareto = true;
    const auto t0 = Clock::now();
    const PlanResult p = plan_layouts(*s, front, 10, RankBy::Throughput, 2, gb);
    std::printf("Pareto front (step time vs headroom), 2 threads: %zu points in %.3f s\n", p.pareto.size(),
                std::chrono::duration<double>(Clock::now() - t0).count());
    return 0;
}
