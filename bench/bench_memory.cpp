// Prints the time of one memory evaluation (budget <= 1 us) and of `trainplan
// fit` end to end as a process (budget <= 50 ms). Figures, not pass/fail.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainplan/app/presets.hpp"
#include "trainplan/fit.hpp"
#include "trainplan/io.hpp"
#include "trainplan/time.hpp"
#include "trainplan/search.hpp"

using namespace trainplan;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
    app::FilePresets presets({TRAINPLAN_SOURCE_DIR});
    ScenarioInput in;
    in.model = "llama-2-70b";
    in.gpu = "h100-sxm";
    in.gpus = 64;
    in.tp = 8;
    in.pp = 4;
    in.vp = 2;
    in.sequence_parallel = true;
    in.recompute = Recompute::Selective;
    in.seq_len = 4096;
    in.global_batch = 512;
    auto s = resolve_scenario(in, presets);
    if (!s) { std::fprintf(stderr, "%s\n", s.error().message().c_str()); return 2; }

    // Fast path: layer graph built once per model/setup, then the evaluation alone.
    const LayerGraph g = build_layer_graph(s->model, s->setup);
    double sink = 0;
    const int n = 2'000'000;
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        s->setup.micro_batch = 1 + (i & 1);
        sink += estimate_memory(*s, g).peak().total;
    }
    const double per_eval = std::chrono::duration<double>(Clock::now() - t0).count() / n;

    // Including the op-graph build (what a single `fit` does).
    const int m = 200'000;
    t0 = Clock::now();
    for (int i = 0; i < m; ++i) sink += estimate_memory(*s).peak().total;
    const double per_full = std::chrono::duration<double>(Clock::now() - t0).count() / m;

    // Memory + time: one full evaluation of a configuration (what a search does).
    t0 = Clock::now();
    for (int i = 0; i < n / 4; ++i) {
        s->setup.micro_batch = 1 + (i & 1);
        sink += estimate_memory(*s, g).peak().total + estimate_time(*s, g).time.step_s;
    }
    const double per_both = std::chrono::duration<double>(Clock::now() - t0).count() / (n / 4);

    std::printf("memory evaluation (Llama-2-70B, 64 x H100, tp8 pp4 v2, 3 stage kinds): %.3f us  [budget 1 us]\n", per_eval * 1e6);
    std::printf("memory + time evaluation (same scenario):                             %.3f us  [budget 2 us]\n", per_both * 1e6);
    std::printf("memory evaluation including the layer-graph build:                    %.3f us\n", per_full * 1e6);

    // Layout search: GPT-3 175B on 1,024 A100-80GB, every dimension varied.
    {
        ScenarioInput gi;
        gi.model = "gpt3-175b";
        gi.gpu = "a100-sxm-80gb";
        gi.gpus = 1024;
        gi.framework = Framework::Megatron;
        auto g175 = resolve_scenario(gi, presets);
        if (!g175) { std::fprintf(stderr, "%s\n", g175.error().message().c_str()); return 2; }
        for (unsigned threads : {1u, 2u}) {
            const int reps = 50;
            std::int64_t evaluated = 0;
            t0 = Clock::now();
            for (int i = 0; i < reps; ++i) evaluated += plan_layouts(*g175, SearchSpace{}, 10, RankBy::Throughput, threads, 1536).evaluated;
            const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
            std::printf("layout search GPT-3 175B / 1024 x A100 (%u thread%s): %.1f ms per search, %.2f million configurations/s  [budget: search < 5 s, >= 1 M/s on 2 cores]\n",
                        threads, threads > 1 ? "s" : "", 1e3 * secs / reps, evaluated / secs / 1e6);
        }
    }

    // End to end: the installed/built binary as a user runs it.
    std::string exe = argc > 1 ? argv[1] : "";
    if (!exe.empty()) {
        const std::string cmd = exe + " fit llama-2-13b --gpu rtx-4090 > /dev/null";
        const int runs = 50;
        t0 = Clock::now();
        for (int i = 0; i < runs; ++i)
            if (std::system(cmd.c_str()) == -1) return 2;
        const double per_run = std::chrono::duration<double>(Clock::now() - t0).count() / runs;
        std::printf("trainplan fit llama-2-13b --gpu rtx-4090, end to end:  %.1f ms  [budget 50 ms]\n", per_run * 1e3);
    }
    return sink > 0 ? 0 : 1;
}
