#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>

#include "commands.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/search.hpp"
#include "trainplan/units.hpp"

namespace trainplan::cli {

void setup_plan(CLI::App& app, PlanOptions& o) {
    setup_simulate(app, o.sim);
    app.remove_option(app.get_option("--json"));
    app.remove_option(app.get_option("--csv"));
    auto* g = "Search";
    app.add_option("--top", o.top, "How many layouts to list (default 10)")->group(g);
    app.add_option("--rank", o.rank, "throughput | cost (cost needs --tokens and --rent)")->group(g);
    app.add_option("--threads", o.threads, "Worker threads (default: all cores)")->group(g);
    app.add_flag("--fixed-layout", o.fixed_layout, "Keep --tp/--pp/--dp/--vp/--sp/--ep as given; vary the rest")->group(g);
    app.add_flag("--tp-within-node", o.tp_within_node, "Keep tensor parallelism inside one node (the search tries TP across nodes too)")->group(g);
    app.add_flag("--tp-across-nodes", o.tp_across_nodes, "Accepted for old scripts: TP across nodes is searched by default")->group(g);
    app.add_flag("--pareto", o.pareto, "List the Pareto front of step time against memory headroom (and cost per token) instead of the top layouts")->group(g);
    app.add_option("--min-headroom", o.min_headroom_gb, "Only layouts that leave at least this many GB (10^9 B) free per GPU (what the allocator gives back before an out-of-memory counts as free)")->group(g);
    app.add_flag("--exhaustive", o.exhaustive, "Evaluate every configuration (no bounds): slow; the reference the exact search is checked against")->group(g);
    app.add_flag("--max-micro-batch", o.q_max_mb, "Inverse query: the largest micro-batch that fits this layout")->group(g);
    app.add_flag("--max-seq-len", o.q_max_seq, "Inverse query: the longest sequence that fits this layout")->group(g);
    app.add_flag("--min-gpus", o.q_min_gpus, "Inverse query: the fewest GPUs with a layout that fits (and reaches --target-tokens-per-s)")->group(g);
    add_option_field(app, "target_tokens_per_s", o.target_tps, g);
    add_option_field(app, "max_gpus", o.max_gpus, g)->description("Upper limit for --min-gpus (default 65536)");
    app.add_flag("--json", o.json, "Machine-readable output");
    app.add_flag("--csv", o.csv, "CSV rows of the ranked layouts");
}

namespace {

using app::layout_text;

// The P10-P90 step-time band of a candidate (intervals.hpp; issue 13), nullopt without the residual table.
std::optional<RatioBand> time_band(const std::optional<IntervalTable>& table, const Scenario& s) {
    return app::prediction_band(table, BandKind::StepTime, s);
}

// " (lo-hi)" of a value that scales with step time (time, cost) or against it (throughput).
std::string band_text(const std::optional<RatioBand>& b, double v, bool inverse, const std::function<std::string(double)>& f) {
    if (!b) return {};
    return inverse ? fmt::format(" ({}-{})", f(v / b->p90), f(v / b->p10)) : fmt::format(" ({}-{})", f(v * b->p10), f(v * b->p90));
}

nlohmann::json candidate_json(const PlanCandidate& c, const std::optional<RatioBand>& band = std::nullopt) {
    const TimeBreakdown& t = c.time.time;
    nlohmann::json j = scenario_json(c.scenario);
    j["memory"] = memory_json(c.memory);
    j["time"] = {{"step_s", t.step_s}, {"compute_s", t.compute_s}, {"communication_s", t.communication_s},
                 {"bubble_s", t.bubble_s}, {"optimizer_s", t.optimizer_s}, {"offload_s", t.offload_s}, {"data_s", t.data_s}};
    j["throughput"] = {{"tokens_per_s", c.time.throughput.tokens_per_s}, {"tflops_per_gpu", c.time.throughput.model_tflops_per_gpu},
                       {"mfu", c.time.throughput.mfu}, {"hfu", c.time.throughput.hfu}};
    j["cost"] = {{"train_time_s", c.time.cost.train_time_s}, {"rent_cost_usd", c.time.cost.rent_cost_usd},
                 {"gpu_hours", c.time.cost.gpu_hours}, {"energy_kwh", c.time.cost.energy_kwh}};
    if (band) app::add_time_band(j, c.time, *band);
    return j;
}

// Rent per token at this layout (0 without a rent): rent x GPUs x step / tokens per step.
double usd_per_token(const PlanCandidate& c) {
    const Scenario& s = c.scenario;
    if (s.run.rent_usd_per_gpu_hour <= 0 || !(c.time.throughput.tokens_per_s > 0)) return 0;
    return s.run.rent_usd_per_gpu_hour * s.cluster.num_gpus / 3600.0 / c.time.throughput.tokens_per_s;
}

// Recompute with full recompute's method and layer count (uniform N: N
// layers per checkpoint group; block n: the first n layers of each stage).
std::string recompute_text(const TrainingSetup& t) {
    if (t.recompute != Recompute::Full || t.recompute_layers <= 0) return to_string(t.recompute);
    return fmt::format("full/{}{}", to_string(t.recompute_method), t.recompute_layers);
}

std::string setup_text(const TrainingSetup& t) {
    // (overlap, hybrid sharding and parameter offload are in layout_text)
    std::string x = sharding_text(t);
    if (t.optimizer_offload != Offload::None) x += fmt::format(" opt>{}", to_string(t.optimizer_offload));
    if (t.recompute != Recompute::None) x += fmt::format(" recompute {}", recompute_text(t));
    return x;
}

nlohmann::json search_json(const PlanResult& r) {
    return {{"space", r.evaluated}, {"memory_evaluations", r.memory_evaluations}, {"time_evaluations", r.time_evaluations},
            {"bound_evaluations", r.bound_evaluations}, {"pruned", r.pruned}, {"exhaustive", false}, {"cancelled", r.cancelled}};
}

}  // namespace

int run_plan(const PlanOptions& o, std::ostream& out, std::ostream& err) {
    FilePresets presets = command_presets(o.sim.scenario.preset_dirs, err);
    std::int64_t global_batch = 0;
    auto sc = simulate_scenario(o.sim, presets, &global_batch);
    if (!sc) return report_error(sc.error(), err);
    std::vector<Diagnostic> option_errs;
    checked_option("top", static_cast<double>(o.top), option_errs);
    const double target_tps = checked_option("target_tokens_per_s", o.target_tps, option_errs).value_or(0);
    const int max_gpus = static_cast<int>(checked_option("max_gpus", o.max_gpus, option_errs).value_or(65536));
    if (!option_errs.empty()) return report_error(Error(option_errs), err);
    const Scenario& s = *sc;
    const std::optional<IntervalTable> residuals = packaged_residuals(presets);
    if (global_batch == 0) global_batch = s.setup.global_batch();
    RankBy rank = RankBy::Throughput;
    if (o.rank == "cost") {
        if (s.run.tokens_to_train <= 0 || s.run.rent_usd_per_gpu_hour <= 0) {
            err << "error: --rank cost needs --tokens and --rent (the cost to train is rent x GPU-hours)\n";
            return 2;
        }
        rank = RankBy::Cost;
    } else if (o.rank != "throughput") {
        err << "error: --rank = \"" << o.rank << "\" is not one of: throughput, cost\n";
        return 2;
    }
    SearchSpace space;
    space.tp_within_node = o.tp_within_node;
    space.pareto = o.pareto;
    space.exhaustive = o.exhaustive;
    if (o.min_headroom_gb) {
        if (!(*o.min_headroom_gb >= 0) || *o.min_headroom_gb > 1e6) {
            err << "error: --min-headroom = " << *o.min_headroom_gb << " must be a number of GB in [0, 1e6]\n";
            return 2;
        }
        space.min_headroom_bytes = *o.min_headroom_gb * 1e9;
    }
    if (o.fixed_layout) space.vary_tp = space.vary_pp = space.vary_sp = space.vary_ep = space.vary_schedule = false;

    // ---- inverse queries
    if (o.q_max_mb || o.q_max_seq) {
        nlohmann::json j;
        if (o.q_max_mb) {
            const auto mb = max_micro_batch(s);
            j["max_micro_batch"] = mb;
            if (!o.json) out << fmt::format("largest micro-batch that fits {} at seq {}: {}\n", layout_text(s), s.setup.seq_len, mb);
        }
        if (o.q_max_seq) {
            const auto seq = max_seq_len(s);
            j["max_seq_len"] = seq;
            if (!o.json) out << fmt::format("longest sequence that fits {} at micro-batch {}: {}\n", layout_text(s), s.setup.micro_batch, seq);
        }
        if (o.json) out << j.dump(2) << '\n';
        return (j.value("max_micro_batch", 1) > 0 && j.value("max_seq_len", 1) > 0) ? 0 : 1;
    }
    if (o.q_min_gpus) {
        // The GPU count grows, so the cluster needs its node-to-node fabric: the
        // one the GPU's usual node comes with (as `size` uses it) unless given.
        Scenario base = s;
        const ScenarioFlags& f = o.sim.scenario;
        if (auto c = sizing_candidate_cluster(presets, s.cluster.gpu.id)) {
            if (base.cluster.inter_node.id.empty()) base.cluster.inter_node = c->inter_node;
            if (!f.has("intra_node") && !f.has("node") && f.scenario_file.empty() && base.cluster.num_gpus == 1) base.cluster.intra_node = c->intra_node;
            if (!f.has("nics_per_node") && !f.has("node") && f.scenario_file.empty() && base.cluster.nics_per_node == 0)
                base.cluster.nics_per_node = c->nics_per_node;
        }
        PlanCandidate best;
        const int n = min_gpus(base, space, target_tps, max_gpus, &best, o.threads, global_batch);
        if (o.json) {
            nlohmann::json j{{"min_gpus", n}};
            if (n > 0) j["best"] = candidate_json(best, time_band(residuals, best.scenario));
            out << j.dump(2) << '\n';
        } else if (n > 0) {
            const ClusterSpec& c = best.scenario.cluster;
            const TrainingSetup& t = best.scenario.setup;
            const std::string nodes = c.num_nodes() == 1 ? "in one node" : fmt::format("in {} nodes of {}", c.num_nodes(), c.gpus_per_node);
            std::vector<std::string> needs;
            if (t.zero_stage > 0) needs.push_back(sharding_text(t));
            if (t.optimizer_offload != Offload::None) needs.push_back(fmt::format("optimizer offload to {}", to_string(t.optimizer_offload)));
            if (t.param_offload != Offload::None) needs.push_back(fmt::format("parameter offload to {}", to_string(t.param_offload)));
            if (t.recompute != Recompute::None) needs.push_back(fmt::format("{} recompute", to_string(t.recompute)));
            // What offload moves off the GPU has to live somewhere a buyer pays for.
            const double per_node = c.gpus_on_node();
            if (best.memory.cpu > 0) needs.push_back(fmt::format("{} of host memory per node", gb(best.memory.cpu * per_node)));
            if (best.memory.nvme > 0) needs.push_back(fmt::format("{} of NVMe per node", gb(best.memory.nvme * per_node)));
            std::string need_text;
            for (size_t i = 0; i < needs.size(); ++i) need_text += (i ? ", " : "") + needs[i];
            out << fmt::format("fewest GPUs{}: {} {}\n", target_tps > 0 ? fmt::format(" reaching {:.0f} tokens/s", target_tps) : " that fit",
                               n, nodes);
            out << fmt::format("  layout {}, micro-batch {} x {} accumulation\n", layout_text(best.scenario), t.micro_batch, t.grad_accum);
            out << fmt::format("  needs: {}\n", need_text.empty() ? "nothing beyond the layout" : need_text);
            const auto band = time_band(residuals, best.scenario);
            out << fmt::format("  {:.0f}{} tokens/s, step {:.3f}{} s, {} of {} per GPU{}\n", best.time.throughput.tokens_per_s,
                               band_text(band, best.time.throughput.tokens_per_s, true, [](double v) { return fmt::format("{:.0f}", v); }),
                               best.time.time.step_s, band_text(band, best.time.time.step_s, false, [](double v) { return fmt::format("{:.3f}", v); }),
                               gb(best.memory.total), gb(best.memory.capacity), band ? " (P10-P90 from the validation residuals, " + band->regime + ")" : "");
        } else {
            out << fmt::format("no GPU count up to {} has a layout that fits{}\n", max_gpus,
                               target_tps > 0 ? " and reaches the target" : "");
        }
        return n > 0 ? 0 : 1;
    }

    const PlanResult r = plan_layouts(s, space, static_cast<size_t>(o.top), rank, o.threads, global_batch);
    std::int64_t rejected = 0;
    for (auto v : r.rejected) rejected += v;
    const std::vector<PlanCandidate>& listed = o.pareto ? r.pareto : r.top;
    if (o.json) {
        nlohmann::json j{{"evaluated", r.evaluated}, {"feasible", r.feasible}, {"seconds", r.seconds}};
        j["search"] = search_json(r);
        j["search"]["exhaustive"] = o.exhaustive;
        nlohmann::json rej = nlohmann::json::object();
        for (size_t i = 0; i < r.rejected.size(); ++i)
            if (r.rejected[i]) rej[rule_id(static_cast<Rule>(i))] = r.rejected[i];
        if (r.out_of_memory) rej["out-of-memory"] = r.out_of_memory;
        j["rejected"] = rej;
        nlohmann::json top = nlohmann::json::array();
        for (const auto& c : r.top) top.push_back(candidate_json(c, time_band(residuals, c.scenario)));
        j["layouts"] = top;
        if (o.pareto) {
            nlohmann::json front = nlohmann::json::array();
            for (const auto& c : r.pareto) {
                nlohmann::json x = candidate_json(c);
                x["headroom_bytes"] = c.memory.headroom();
                x["usd_per_token"] = usd_per_token(c);
                front.push_back(x);
            }
            j["pareto"] = front;
        }
        out << j.dump(2) << '\n';
        return listed.empty() ? 1 : 0;
    }
    if (o.csv) {
        out << "rank,tp,pp,dp,vp,sp,ep,schedule,micro_batch,grad_accum,zero,fsdp,recompute,offload,param_offload,tp_comm_overlap,"
               "tokens_per_s,mfu,step_s,compute_s,communication_s,bubble_s,memory_total_bytes,capacity_bytes,headroom_bytes,"
               "rent_cost_usd,usd_per_token\n";
        int i = 1;
        for (const auto& c : listed) {
            const TrainingSetup& t = c.scenario.setup;
            out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.4f},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n",
                               i++, t.layout.tp, t.layout.pp, t.layout.dp, t.layout.vp, t.layout.sequence_parallel ? 1 : 0, t.layout.ep,
                               to_string(t.layout.schedule), t.micro_batch, t.grad_accum, t.zero_stage, to_string(t.fsdp),
                               to_string(t.recompute), to_string(t.optimizer_offload), to_string(t.param_offload),
                               t.tp_comm_overlap ? 1 : 0, c.time.throughput.tokens_per_s, c.time.throughput.mfu, c.time.time.step_s,
                               c.time.time.compute_s, c.time.time.communication_s, c.time.time.bubble_s, c.memory.total,
                               c.memory.capacity, c.memory.headroom(), c.time.cost.rent_cost_usd, usd_per_token(c));
        }
        return listed.empty() ? 1 : 0;
    }
    out << fmt::format("{} on {}; global batch {} x {} tokens\n", s.model.name, describe_hardware(s), global_batch,
                       s.setup.seq_len);
    out << fmt::format("searched a space of {} valid configurations in {:.3f} s, exactly{}: {} memory and {} time evaluations "
                       "({} bounds); {} configurations decided by bounds and dominance without evaluation\n",
                       r.evaluated, r.seconds, o.exhaustive ? " (every configuration evaluated)" : " (branch and bound)",
                       r.memory_evaluations, r.time_evaluations, r.bound_evaluations, r.pruned);
    out << fmt::format("of those evaluated: {} fit, {} out of memory{}\n", r.feasible, r.out_of_memory,
                       space.min_headroom_bytes > 0 ? fmt::format(" (or under {} free)", gb(space.min_headroom_bytes)) : "");
    if (rejected > 0) {
        out << fmt::format("skipped {} invalid combinations, by rule:\n", rejected);
        for (size_t i = 0; i < r.rejected.size(); ++i)
            if (r.rejected[i])
                out << fmt::format("  {:>9}  {:<30} {}\n", r.rejected[i], rule_id(static_cast<Rule>(i)), rule_info(static_cast<Rule>(i)).summary);
    }
    if (listed.empty()) {
        out << "\nNo layout fits. Try more GPUs (--min-gpus), LoRA/QLoRA, or offload (trainplan fit shows the options).\n";
        return 1;
    }
    if (o.pareto) {
        out << fmt::format("\nPareto front: step time against memory headroom per GPU (no other layout is as fast with as much "
                           "headroom); needs/GPU = {}; GB = 10^9 B, capacity {} per GPU{}:\n",
                           app::kNeedsMeaning, gb(listed.front().memory.capacity), s.run.rent_usd_per_gpu_hour > 0 ? "; cost per million tokens at the rent given" : "");
        out << fmt::format("{:>3}  {:<36} {:>9} {:<28} {:>12} {:>9}  {:>11} {:>11} {:>10}\n", "#", "layout", "mb x acc", "setup",
                           "tokens/s", "step", "needs/GPU", "headroom", "$/Mtok");
        int i = 1;
        for (const auto& c : listed) {
            const TrainingSetup& t = c.scenario.setup;
            out << fmt::format("{:>3}  {:<36} {:>9} {:<28} {:>12.0f} {:>8.3f}s  {:>11} {:>11} {:>10}\n", i++, layout_text(c.scenario),
                               fmt::format("{}x{}", t.micro_batch, t.grad_accum), setup_text(t), c.time.throughput.tokens_per_s,
                               c.time.time.step_s, gb(c.memory.firm()), gb(c.memory.headroom()),
                               usd_per_token(c) > 0 ? fmt::format("{:.4g}", usd_per_token(c) * 1e6) : "-");
        }
        return 0;
    }
    // Memory as what the layout needs (MemoryBreakdown::firm): a total that includes
    // what gives way fills the card whenever it has room.
    out << fmt::format("\nBest layouts by {} (best configuration of each layout); needs/GPU = {}, in GB (10^9 B), against a "
                       "capacity of {} per GPU:\n",
                       rank == RankBy::Cost ? "cost to train" : "throughput", app::kNeedsMeaning, gb(r.top.front().memory.capacity));
    out << fmt::format("{:>3}  {:<34} {:>9} {:<13} {:>10} {:>6} {:>12} {:>6} {:>9}  {:>11}  {}\n", "#", "layout", "mb x acc", "sharding",
                       "recompute", "offl", "tokens/s", "MFU", "step", "needs/GPU", "time split compute/comm/bubble");
    int i = 1;
    for (const auto& c : r.top) {
        const TrainingSetup& t = c.scenario.setup;
        const TimeBreakdown& tb = c.time.time;
        out << fmt::format("{:>3}  {:<34} {:>9} {:<13} {:>10} {:>6} {:>12.0f} {:>5.1f}% {:>8.3f}s  {:>11}  {:.0f}/{:.0f}/{:.0f} %\n", i++,
                           layout_text(c.scenario), fmt::format("{}x{}", t.micro_batch, t.grad_accum), sharding_text(t),
                           recompute_text(t), to_string(t.optimizer_offload), c.time.throughput.tokens_per_s,
                           100 * c.time.throughput.mfu, tb.step_s, gb(c.memory.firm()), 100 * tb.compute_s / tb.step_s,
                           100 * tb.communication_s / tb.step_s, 100 * tb.bubble_s / tb.step_s);
    }
    const auto band = time_band(residuals, r.top.front().scenario);
    if (band)
        out << fmt::format("P10-P90 of step time and tokens/s: x{:.2f}-x{:.2f} of the figures above ({}, {} cases); the best layout: "
                           "{:.0f}{} tokens/s\n",
                           band->p10, band->p90, band->regime, band->n, r.top.front().time.throughput.tokens_per_s,
                           band_text(band, r.top.front().time.throughput.tokens_per_s, true, [](double v) { return fmt::format("{:.0f}", v); }));
    if (s.run.tokens_to_train > 0) {
        const auto& b = r.top.front().time.cost;
        auto money = [](double v) { return fmt::format("${:.0f}", v); };
        out << fmt::format("\nBest layout trains {:.3g} tokens in {:.1f}{} days ({:.0f} GPU-hours{})\n", s.run.tokens_to_train,
                           b.train_time_s / 86400, band_text(band, b.train_time_s / 86400, false, [](double v) { return fmt::format("{:.1f}", v); }),
                           b.gpu_hours,
                           b.rent_cost_usd > 0 ? fmt::format(", {}{} rented", money(b.rent_cost_usd), band_text(band, b.rent_cost_usd, false, money)) : "");
    }
    return 0;
}

}  // namespace trainplan::cli
