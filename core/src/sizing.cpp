#include "trainplan/sizing.hpp"

#include "trainplan/diagnosis.hpp"
#include "trainplan/moves.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "text.hpp"

namespace trainplan {

namespace {

std::string money(double usd) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(0);
    if (usd >= 1e6) { o.precision(2); o << "$" << usd / 1e6 << " M"; }
    else if (usd >= 1e4) { o << "$" << usd / 1e3 << " k"; }
    else o << "$" << usd;
    return o.str();
}

std::string days(double s) { return detail::fixed(s / 86400, 1) + " days"; }

}  // namespace

SizingReport size_hardware(const Scenario& base, std::int64_t global_batch, const std::vector<ClusterSpec>& candidates,
                           const SizingGoal& goal, unsigned threads) {
    SizingReport rep;
    rep.goal = goal;
    rep.base = base;
    bool all_rent = !candidates.empty();
    for (const ClusterSpec& c : candidates) all_rent &= goal.rent_usd_per_gpu_hour.count(c.gpu.id) > 0;
    rep.cost_basis = all_rent ? "rent" : "purchase";

    for (const ClusterSpec& tmpl : candidates) {
        SizingOption opt;
        opt.gpu_id = tmpl.gpu.id;
        opt.gpu_name = tmpl.gpu.name;
        if (auto it = goal.rent_usd_per_gpu_hour.find(tmpl.gpu.id); it != goal.rent_usd_per_gpu_hour.end()) opt.rent_usd_per_gpu_hour = it->second;
        opt.price_usd_per_gpu = tmpl.gpu.price_usd;
        if (auto it = goal.price_usd_per_gpu.find(tmpl.gpu.id); it != goal.price_usd_per_gpu.end()) opt.price_usd_per_gpu = it->second;

        bool any_fit = false;
        double best_time = 0;
        int best_time_gpus = 0;
        for (int n : gpu_ladder(tmpl.gpus_per_node, 1, goal.max_gpus)) {
            Scenario s = base;
            s.cluster = tmpl;
            s.cluster.num_gpus = n;
            s.cluster.gpus_per_node = std::min(tmpl.gpus_per_node, n);
            s.run.tokens_to_train = goal.tokens;
            s.run.rent_usd_per_gpu_hour = opt.rent_usd_per_gpu_hour;
            s.run.purchase_usd_per_gpu = opt.price_usd_per_gpu;
            // Keep the layout's TP inside the node.
            const PlanResult r = plan_layouts(s, SearchSpace{}, 1, RankBy::Throughput, threads, global_batch);
            if (r.top.empty()) continue;
            any_fit = true;
            const PlanCandidate& c = r.top.front();
            const double t = goal.tokens / c.time.throughput.tokens_per_s;
            if (best_time == 0 || t < best_time) { best_time = t; best_time_gpus = n; }
            const double rent = opt.rent_usd_per_gpu_hour * n * t / 3600.0;
            const bool in_time = goal.deadline_s <= 0 || t <= goal.deadline_s;
            const double cost = rep.cost_basis == "rent" ? rent : opt.price_usd_per_gpu * n;
            const bool in_budget = goal.budget_usd <= 0 || cost <= goal.budget_usd;
            if (!in_time) continue;
            if (!in_budget) {
                opt.why_not = "meets the deadline with " + std::to_string(n) + " GPUs, but over the budget (" + money(cost) + ")";
                break;
            }
            opt.meets = true;
            opt.gpus = n;
            opt.nodes = s.cluster.num_nodes();
            opt.best = c;
            opt.train_time_s = t;
            opt.gpu_hours = n * t / 3600.0;
            opt.energy_kwh = c.time.cost.power_w * t / 3.6e6;
            opt.energy_cost_usd = opt.energy_kwh * base.run.electricity_usd_per_kwh;
            opt.rent_cost_usd = rent;
            opt.purchase_usd = opt.price_usd_per_gpu * n;
            opt.amortized_usd = base.run.amortization_years > 0 ? opt.purchase_usd * t / (base.run.amortization_years * 365.25 * 86400) : 0;
            opt.headroom_bytes = c.memory.headroom();
            opt.bound = to_string(classify(c.scenario, c.memory, c.time.time));
            break;
        }
        if (!opt.meets && opt.why_not.empty()) {
            if (!any_fit) opt.why_not = "no layout fits in memory with up to " + std::to_string(goal.max_gpus) + " GPUs";
            else opt.why_not = "misses the deadline: fastest found is " + days(best_time) + " with " + std::to_string(best_time_gpus) +
                                " GPUs (more GPUs stop helping: the global batch or communication limits scaling)";
        }
        rep.options.push_back(std::move(opt));
    }

    // Recommendation: the cheapest option that meets the goal on the common cost
    // basis (rent when every candidate has a rent, else purchase price + energy).
    auto cost_of = [&](const SizingOption& o) {
        return rep.cost_basis == "rent" ? o.rent_cost_usd + (o.rent_cost_usd > 0 ? 0 : o.energy_cost_usd)
                                        : (o.purchase_usd > 0 ? o.purchase_usd + o.energy_cost_usd : 1e300);
    };
    for (size_t i = 0; i < rep.options.size(); ++i) {
        const SizingOption& o = rep.options[i];
        if (!o.meets || cost_of(o) >= 1e300) continue;
        if (rep.recommended < 0 || cost_of(o) < cost_of(rep.options[static_cast<size_t>(rep.recommended)]))
            rep.recommended = static_cast<int>(i);
    }
    std::ostringstream w;
    if (rep.recommended < 0) {
        w << "No candidate meets the goal";
        if (goal.deadline_s > 0) w << " of " << goal.tokens << " tokens in " << days(goal.deadline_s);
        w << ". Relax the deadline, allow more GPUs, or train fewer tokens; the table says how close each candidate gets.";
    } else {
        const SizingOption& o = rep.options[static_cast<size_t>(rep.recommended)];
        const ParallelLayout& l = o.best.scenario.setup.layout;
        w << (rep.cost_basis == "rent" ? "Rent " : "Buy ") << o.gpus << " x " << o.gpu_name << " (" << o.nodes << " node"
          << (o.nodes == 1 ? "" : "s") << "). With tp " << l.tp << ", pp " << l.pp << ", dp " << l.dp << ", ZeRO-"
          << o.best.scenario.setup.zero_stage << " and "
          << (o.best.scenario.setup.recompute == Recompute::None ? std::string("no") : std::string(to_string(o.best.scenario.setup.recompute)))
          << " recompute" << (o.best.scenario.setup.optimizer_offload != Offload::None ? " (optimizer offloaded)" : "") << " they train the " << o.best.scenario.model.name << " budget in " << days(o.train_time_s) << " at "
          << static_cast<int>(std::lround(100 * o.best.time.throughput.mfu)) << " % MFU, for "
          << money(rep.cost_basis == "rent" ? o.rent_cost_usd : o.purchase_usd) << (rep.cost_basis == "rent" ? " in rent" : " of GPUs")
          << " plus " << money(o.energy_cost_usd) << " of electricity. The run is " << o.bound << "-bound.";
        for (size_t i = 0; i < rep.options.size(); ++i) {
            if (static_cast<int>(i) == rep.recommended) continue;
            const SizingOption& x = rep.options[i];
            w << " " << x.gpu_name << ": ";
            if (!x.meets) w << x.why_not << ".";
            else if (cost_of(x) >= 1e300) w << x.gpus << " GPUs would do, but no price is known.";
            else w << x.gpus << " GPUs, " << days(x.train_time_s) << ", " << std::fixed << std::setprecision(1)
                   << cost_of(x) / cost_of(o) << "x the cost.";
        }
    }
    rep.recommendation = w.str();
    return rep;
}

}  // namespace trainplan
