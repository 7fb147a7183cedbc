// Prints the time of one memory evaluation (budget <= 1 us) and of `trainplan
// fit` end to end as a process (budget <= 50 ms). Figures, not pass/fail.
//
// TRAINPLAN_BENCH_ITERS=N runs exactly N iterations of each measured evaluation path
// and skips the layout search and the end-to-end run, so that instruction counts under
// `valgrind --tool=callgrind` are comparable between versions; TRAINPLAN_BENCH_PATH=
// memory|both|full|full-both restricts the run to one path (per-path counts: the run with
// N iterations minus the run with 0).
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

    const char* iters_env = std::getenv("TRAINPLAN_BENCH_ITERS");
    const bool fixed = iters_env != nullptr;
    const long fixed_n = fixed ? std::strtol(iters_env, nullptr, 10) : 0;
    const char* path_env = std::getenv("TRAINPLAN_BENCH_PATH");
    const std::string only = path_env ? path_env : "";
    auto runs_path = [&](const char* name) { return only.empty() || only == name; };
    auto iterations = [&](const char* name, int otherwise) {
        return !runs_path(name) ? 0 : fixed ? static_cast<int>(fixed_n) : otherwise;
    };

    // Fast path: layer graph built once per model/setup, then the evaluation alone.
    const LayerGraph g = build_layer_graph(s->model, s->setup);
    double sink = 0;
    const int n = iterations("memory", 2'000'000);
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        s->setup.micro_batch = 1 + (i & 1);
        sink += estimate_memory(*s, g).peak().total;
    }
    const double per_eval = std::chrono::duration<double>(Clock::now() - t0).count() / n;

    // Including the op-graph build (what a single `fit` does).
    const int m = iterations("full", 200'000);
    t0 = Clock::now();
    for (int i = 0; i < m; ++i) sink += estimate_memory(*s).peak().total;
    const double per_full = std::chrono::duration<double>(Clock::now() - t0).count() / m;

    // Memory + time: one full evaluation of a configuration (what a search does).
    const int nb = iterations("both", 500'000);
    t0 = Clock::now();
    for (int i = 0; i < nb; ++i) {
        s->setup.micro_batch = 1 + (i & 1);
        sink += estimate_memory(*s, g).peak().total + estimate_time(*s, g).time.step_s;
    }
    const double per_both = std::chrono::duration<double>(Clock::now() - t0).count() / nb;

    // Memory + time fresh: the layer graph built for every evaluation, as the GUI does on
    // a changed input (build once, then memory and time on it). Budget <= 2 us
    // (docs/design.md, "Budgets").
    const int nf = iterations("full-both", 200'000);
    t0 = Clock::now();
    for (int i = 0; i < nf; ++i) {
        s->setup.micro_batch = 1 + (i & 1);
        const LayerGraph fresh = build_layer_graph(s->model, s->setup);
        sink += estimate_memory(*s, fresh).peak().total + estimate_time(*s, fresh).time.step_s;
    }
    const double per_full_both = std::chrono::duration<double>(Clock::now() - t0).count() / nf;

    std::printf("memory evaluation (Llama-2-70B, 64 x H100, tp8 pp4 v2, 3 stage kinds): %.3f us\n", per_eval * 1e6);
    std::printf("memory + time evaluation (same scenario):                             %.3f us  [budget 1 us, search path]\n", per_both * 1e6);
    std::printf("memory evaluation including the layer-graph build:                    %.3f us\n", per_full * 1e6);
    std::printf("memory + time evaluation including the layer-graph build (fresh):     %.3f us  [budget 2 us]\n", per_full_both * 1e6);
    if (fixed) return sink > 0 || n + m + nb + nf == 0 ? 0 : 1;

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
