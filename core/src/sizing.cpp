#include "trainplan/sizing.hpp"

#include "trainplan/diagnosis.hpp"
#include "trainplan/memory.hpp"
#include "trainplan/time.hpp"
#include "trainplan/moves.hpp"
#include "trainplan/units.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "text.hpp"

namespace trainplan {

const char* to_string(CostBasis b) { return b == CostBasis::Outlay ? "outlay" : "amortized"; }

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
std::string plural(long long n, const std::string& one, const std::string& many) { return std::to_string(n) + " " + (n == 1 ? one : many); }
std::string gpus_text(long long n) { return plural(n, "GPU", "GPUs"); }
std::string gib(double b) { return detail::fixed(b / units::GiB, 1) + " GiB"; }

// Standard normal quantile by bisection on erfc (monotone; 60 halvings reach double precision).
double normal_quantile(double p) {
    double lo = -10, hi = 10;
    for (int i = 0; i < 100; ++i) {
        const double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

// The cheaper way to acquire the GPUs of one point on the goal's basis; cost 0 when unpriced.
struct Pick {
    std::string mode;
    double cost = 0;
};
Pick cheaper(CostBasis basis, double rent, double outlay, double amortized) {
    const double buy = basis == CostBasis::Outlay ? outlay : amortized;
    if (rent > 0 && (buy <= 0 || rent <= buy)) return {"rent", rent};
    if (buy > 0) return {"buy", buy};
    return {};
}

}  // namespace

double band_factor(const RatioBand& b, double confidence) {
    if (b.n <= 0 || confidence <= 0.5) return 1.0;
    const double p90 = std::max(b.p90, 1e-9);
    return std::exp(std::log(p90) * normal_quantile(confidence) / normal_quantile(0.9));
}

SizingReport size_hardware(const Scenario& base, std::int64_t global_batch, const std::vector<ClusterSpec>& candidates, const SizingGoal& goal,
                           unsigned threads) {
    std::vector<SizingCandidate> c;
    for (const auto& x : candidates) c.push_back({x, "", "", 0});
    return size_hardware(base, global_batch, c, goal, threads, nullptr);
}

SizingReport size_hardware(const Scenario& base, std::int64_t global_batch, const std::vector<SizingCandidate>& candidates,
                           const SizingGoal& goal, unsigned threads, const IntervalTable* bands) {
    SizingReport rep;
    rep.goal = goal;
    if (!bands) rep.goal.confidence = 0.5;  // no accuracy band to take a margin from: point estimates, and the report says so
    rep.base = base;
    rep.global_batch = global_batch;
    const bool deadline = goal.deadline_s > 0;
    const double amort_h = base.run.amortization_years * 365.25 * 24;

    for (const SizingCandidate& cand : candidates) {
        const ClusterSpec& tmpl = cand.cluster;
        SizingOption opt;
        opt.gpu_id = tmpl.gpu.id;
        opt.gpu_name = tmpl.gpu.name;
        opt.vendor = tmpl.gpu.vendor;
        opt.consumer = tmpl.gpu.consumer;
        opt.p2p = tmpl.gpu.p2p && tmpl.intra_node.p2p;
        if (auto it = goal.rent_usd_per_gpu_hour.find(tmpl.gpu.id); it != goal.rent_usd_per_gpu_hour.end()) opt.rent_usd_per_gpu_hour = it->second;
        opt.price_usd_per_gpu = tmpl.gpu.price_usd;
        if (auto it = goal.price_usd_per_gpu.find(tmpl.gpu.id); it != goal.price_usd_per_gpu.end()) opt.price_usd_per_gpu = it->second;

        int largest_fit = 0, largest_tried = 0, no_margin_at = 0;
        double best_time = 0, best_time_p = 0, best_point_time = 0;
        int best_time_gpus = 0, best_point_gpus = 0, worse_in_a_row = 0;
        std::string over_budget;
        std::vector<FrontierPoint> points;
        for (int n : gpu_ladder(tmpl.gpus_per_node, 1, goal.max_gpus)) {
            largest_tried = n;
            Scenario s = base;
            s.cluster = tmpl;
            s.cluster.num_gpus = n;
            s.cluster.gpus_per_node = std::min(tmpl.gpus_per_node, n);
            s.run.tokens_to_train = goal.tokens;
            s.run.rent_usd_per_gpu_hour = opt.rent_usd_per_gpu_hour;
            s.run.purchase_usd_per_gpu = opt.price_usd_per_gpu;
            const RatioBand tband = bands ? bands->band(BandKind::StepTime, s) : RatioBand{1, 1, 0, ""};
            const RatioBand mband = bands ? bands->band(BandKind::Memory, s) : RatioBand{1, 1, 0, ""};
            const double tf = band_factor(tband, rep.goal.confidence), mf = std::max(1.0, band_factor(mband, rep.goal.confidence));
            // The fastest layout whose memory fits at the pessimistic end of the band:
            // searched against the capacity divided by that factor, so the search itself
            // trades micro-batch / recompute / ZeRO for the margin.
            Scenario searched = s;
            searched.cluster.gpu.capacity_bytes = s.cluster.gpu.capacity_bytes / mf;
            PlanResult r = plan_layouts(searched, SearchSpace{}, 1, RankBy::Throughput, threads, global_batch);
            if (r.top.empty()) {
                if (mf > 1 && !no_margin_at && !plan_layouts(s, SearchSpace{}, 1, RankBy::Throughput, threads, global_batch).top.empty()) no_margin_at = n;
                continue;
            }
            largest_fit = n;
            // Re-evaluated on the real GPU, as simulate will see it.
            PlanCandidate c = r.top.front();
            c.scenario.cluster.gpu.capacity_bytes = s.cluster.gpu.capacity_bytes;
            c.memory = estimate_memory(c.scenario).peak();
            c.time = estimate_time(c.scenario);
            const double t = goal.tokens / c.time.throughput.tokens_per_s;
            const double t_margin = t * std::max(1.0, tf);
            if (best_point_time == 0 || t < best_point_time) { best_point_time = t; best_point_gpus = n; }
            if (best_time == 0 || t_margin < best_time) {
                best_time = t_margin; best_time_p = t; best_time_gpus = n; worse_in_a_row = 0;
            } else {
                ++worse_in_a_row;
            }
            const double gpu_h = n * t / 3600.0;
            const double energy_usd = c.time.cost.power_w * t / 3.6e6 * base.run.electricity_usd_per_kwh;
            FrontierPoint p;
            p.gpus = n;
            p.nodes = s.cluster.num_nodes();
            p.train_time_s = t;
            p.train_time_p90_s = t * tband.p90;
            p.rent_usd = opt.rent_usd_per_gpu_hour * gpu_h;
            // Buying is offered only for a run that ends within the hardware's amortization period.
            const double purchase = amort_h > 0 && t / 3600.0 <= amort_h ? opt.price_usd_per_gpu * n : 0;
            p.buy_outlay_usd = purchase > 0 ? purchase + energy_usd : 0;
            p.buy_amortized_usd = purchase > 0 ? purchase * (t / 3600.0) / amort_h + energy_usd : 0;
            points.push_back(p);
            const Pick how = cheaper(goal.cost_basis, p.rent_usd, p.buy_outlay_usd, p.buy_amortized_usd);
            const bool in_time = deadline && t_margin <= goal.deadline_s;
            const bool in_budget = goal.budget_usd <= 0 || (how.cost > 0 && how.cost <= goal.budget_usd);
            if (!deadline) {
                // No deadline: walk the curve until more GPUs stop shortening the run;
                // the table's row is the cheapest point (the fastest when unpriced).
                if (worse_in_a_row >= 2) break;
                const bool better = how.cost > 0 ? (opt.cost_usd <= 0 || how.cost < opt.cost_usd) : (opt.cost_usd <= 0 && t < opt.train_time_s);
                if (opt.meets && !better) continue;
            } else if (!in_time) {
                continue;
            }
            if (!in_budget) {
                if (over_budget.empty())
                    over_budget = "meets the deadline with " + gpus_text(n) + ", but " +
                                  (how.cost > 0 ? "over the budget (" + money(how.cost) + " to " + how.mode + ")" : "no rent or price is known");
                if (deadline) break;
                continue;
            }
            opt.meets = true;
            opt.gpus = n;
            opt.nodes = s.cluster.num_nodes();
            opt.best = c;
            opt.train_time_s = t;
            opt.time_band = tband;
            opt.memory_band = mband;
            opt.time_ratio = tf;
            opt.memory_ratio = mf;
            opt.train_time_p10_s = t * tband.p10;
            opt.train_time_p90_s = t * tband.p90;
            opt.tokens_per_s = c.time.throughput.tokens_per_s;
            opt.tokens_per_s_p10 = opt.tokens_per_s / tband.p90;  // slower end
            opt.tokens_per_s_p90 = opt.tokens_per_s / tband.p10;
            opt.gpu_hours = gpu_h;
            opt.energy_kwh = c.time.cost.power_w * t / 3.6e6;
            opt.energy_cost_usd = energy_usd;
            opt.rent_cost_usd = p.rent_usd;
            opt.rent_cost_p10_usd = p.rent_usd * tband.p10;
            opt.rent_cost_p90_usd = p.rent_usd * tband.p90;
            opt.purchase_usd = purchase;
            opt.buy_outlay_usd = p.buy_outlay_usd;
            opt.amortized_usd = purchase > 0 ? purchase * (t / 3600.0) / amort_h : 0;
            opt.buy_amortized_usd = p.buy_amortized_usd;
            if (opt.rent_usd_per_gpu_hour > 0 && purchase > 0) {
                const double energy_per_gpu_h = gpu_h > 0 ? energy_usd / gpu_h : 0;
                const double saved = opt.rent_usd_per_gpu_hour - energy_per_gpu_h;
                opt.break_even_utilization = saved > 0 ? opt.price_usd_per_gpu / amort_h / saved : std::numeric_limits<double>::infinity();
            }
            opt.mode = how.mode;
            opt.cost_usd = how.cost;
            opt.headroom_bytes = c.memory.headroom();
            opt.memory_margin_bytes = c.memory.total * (mf - 1);
            opt.bound = to_string(classify(c.scenario, c.memory, c.time.time));
            BillOfMaterials& b = opt.bom;
            b.nodes = opt.nodes;
            b.gpus = n;
            b.gpus_per_node = s.cluster.gpus_per_node;
            b.node = !cand.node_name.empty() && b.gpus_per_node == tmpl.gpus_per_node ? cand.node_name
                                                                                   : std::to_string(b.gpus_per_node) + "-GPU server (no node preset)";
            if (!cand.node_id.empty() && b.gpus_per_node == tmpl.gpus_per_node) b.node_id = cand.node_id;
            b.nics = opt.nodes > 1 ? opt.nodes * (tmpl.nics_per_node > 0 ? tmpl.nics_per_node : b.gpus_per_node) : 0;
            b.fabric = opt.nodes > 1 ? tmpl.inter_node.name : "";
            b.intra_node = tmpl.intra_node.name;
            b.host_ram_per_node_bytes = c.memory.cpu * b.gpus_per_node;
            b.nvme_per_node_bytes = c.memory.nvme * b.gpus_per_node;
            b.power_kw = c.time.cost.power_w / 1000.0;
            b.node_power_kw = cand.node_power_kw > 0 && b.gpus_per_node == tmpl.gpus_per_node ? cand.node_power_kw * opt.nodes : 0;
            if (deadline) break;
        }
        // The frontier: points no other point beats on both time and cost (cost on the goal's basis).
        for (const auto& p : points) {
            const double pc = cheaper(goal.cost_basis, p.rent_usd, p.buy_outlay_usd, p.buy_amortized_usd).cost;
            bool dominated = false;
            for (const auto& q : points) {
                const double qc = cheaper(goal.cost_basis, q.rent_usd, q.buy_outlay_usd, q.buy_amortized_usd).cost;
                if (&q != &p && q.train_time_s <= p.train_time_s && qc <= pc && (q.train_time_s < p.train_time_s || qc < pc)) dominated = true;
            }
            if (!dominated) opt.frontier.push_back(p);
        }
        if (!opt.meets) {
            if (!over_budget.empty()) {
                opt.why_not = over_budget;
            } else if (largest_fit == 0) {
                opt.why_not = no_margin_at ? "fits in memory only without the margin (" + detail::fixed(100 * rep.goal.confidence, 0) +
                                                 " % confidence) at every count up to " + gpus_text(goal.max_gpus)
                                           : "no layout fits in memory with up to " + gpus_text(goal.max_gpus);
            } else if (deadline && best_point_time <= goal.deadline_s) {
                opt.why_not = "meets the deadline only at the point estimate (" + days(best_point_time) + " with " + gpus_text(best_point_gpus) +
                              "); at the " + detail::fixed(100 * rep.goal.confidence, 0) + " % end of the accuracy band it takes " + days(best_time) +
                              " (--confidence 0.5 accepts the point estimate" +
                              (best_time_gpus == largest_tried ? "; or raise the --max-gpus cap of " + gpus_text(goal.max_gpus) + ": still falling there)"
                                                               : std::string(")"));
            } else if (deadline && best_time_gpus == largest_tried) {
                opt.why_not = "misses the deadline within the --max-gpus cap of " + gpus_text(goal.max_gpus) + ": fastest is " + days(best_time) +
                              (best_time != best_time_p ? " (" + days(best_time_p) + " at the point estimate)" : std::string()) + " with " +
                              gpus_text(best_time_gpus) + " and still falling; raise --max-gpus";
            } else if (deadline) {
                opt.why_not = "misses the deadline: fastest is " + days(best_time) + " with " + gpus_text(best_time_gpus) +
                              "; more GPUs stop helping (the global batch of " + std::to_string(global_batch) +
                              " sequences or communication limits scaling)";
            }
        }
        rep.options.push_back(std::move(opt));
    }

    // Recommendation: the cheapest option that meets the goal on the goal's basis.
    for (size_t i = 0; deadline && i < rep.options.size(); ++i) {
        const SizingOption& o = rep.options[i];
        if (!o.meets || o.cost_usd <= 0) continue;
        if (rep.recommended < 0 || o.cost_usd < rep.options[static_cast<size_t>(rep.recommended)].cost_usd) rep.recommended = static_cast<int>(i);
    }
    const std::string basis = goal.cost_basis == CostBasis::Outlay ? "the job's outlay (rent for the run vs purchase + energy)"
                                                                   : "the job's amortized cost (rent vs the purchase share for the run + energy)";
    std::ostringstream w;
    if (!deadline) {
        w << "No deadline given, so there is no single pick: each candidate's time/cost frontier is listed below (every GPU count "
             "that no other count beats on both time and cost; the table row is the cheapest point). ";
        const SizingOption* fastest = nullptr;
        for (const auto& o : rep.options)
            if (!o.frontier.empty() && (!fastest || o.frontier.back().train_time_s < fastest->frontier.back().train_time_s)) fastest = &o;
        if (fastest)
            w << "Fastest found: " << fastest->gpu_name << " x " << fastest->frontier.back().gpus << " in " << days(fastest->frontier.back().train_time_s)
              << ". ";
        const SizingOption* cheapest = nullptr;
        for (const auto& o : rep.options)
            if (o.meets && o.cost_usd > 0 && (!cheapest || o.cost_usd < cheapest->cost_usd)) cheapest = &o;
        if (cheapest)
            w << "Cheapest found: " << (cheapest->mode == "rent" ? "rent " : "buy ") << cheapest->gpus << " x " << cheapest->gpu_name << " for "
              << money(cheapest->cost_usd) << ", " << days(cheapest->train_time_s) << ". ";
        w << "Give --deadline-days for a recommendation.";
    } else if (rep.recommended < 0) {
        w << "No candidate meets the goal of " << detail::fixed(goal.tokens / 1e9, 0) << " B tokens in " << days(goal.deadline_s)
          << (rep.goal.confidence > 0.5 ? " at " + detail::fixed(100 * rep.goal.confidence, 0) + " % confidence" : std::string())
          << ". Relax the deadline, allow more GPUs, or train fewer tokens; the table says how close each candidate gets.";
    } else {
        const SizingOption& o = rep.options[static_cast<size_t>(rep.recommended)];
        const TrainingSetup& st = o.best.scenario.setup;
        const ParallelLayout& l = st.layout;
        w << (o.mode == "rent" ? "Rent " : "Buy ") << o.gpus << " x " << o.gpu_name << " (" << plural(o.nodes, "node", "nodes")
          << "). With tp " << l.tp << ", pp " << l.pp << ", dp " << l.dp << (l.cp > 1 ? ", cp " + std::to_string(l.cp) : std::string())
          << ", ZeRO-" << st.zero_stage << " and " << recompute_words(st)
          << (st.optimizer_offload != Offload::None ? " (optimizer offloaded to " + std::string(to_string(st.optimizer_offload)) + ")" : std::string())
          << " they train the " << o.best.scenario.model.name << " budget in " << days(o.train_time_s);
        if (o.time_band.n > 0) w << " (P10-P90 " << detail::fixed(o.train_time_p10_s / 86400, 1) << "-" << days(o.train_time_p90_s) << ")";
        w << " at " << static_cast<int>(std::lround(100 * o.best.time.throughput.mfu)) << " % MFU, for " << money(o.cost_usd)
          << (o.mode == "rent" ? " in rent" : goal.cost_basis == CostBasis::Outlay ? " (GPUs + electricity)" : " (amortized GPUs + electricity)")
          << ", compared on " << basis << ". The bottleneck is " << o.bound << ".";
        if (o.mode == "rent" && o.buy_outlay_usd > 0)
            w << " Buying them instead: " << money(o.purchase_usd) << " + " << money(o.energy_cost_usd) << " electricity";
        if (o.mode == "buy" && o.rent_cost_usd > 0) w << " Renting them instead: " << money(o.rent_cost_usd);
        if (o.break_even_utilization > 0)
            w << (std::isfinite(o.break_even_utilization) && o.break_even_utilization <= 1
                      ? "; buying pays off if the GPUs stay busy " + detail::fixed(100 * o.break_even_utilization, 0) + " % of " +
                            detail::fixed(base.run.amortization_years, 0) + " years"
                      : "; buying never pays off against this rent within " + detail::fixed(base.run.amortization_years, 0) + " years")
              << ".";
        else if ((o.mode == "rent" && o.buy_outlay_usd > 0) || (o.mode == "buy" && o.rent_cost_usd > 0))
            w << ".";
        for (size_t i = 0; i < rep.options.size(); ++i) {
            if (static_cast<int>(i) == rep.recommended) continue;
            const SizingOption& x = rep.options[i];
            w << " " << x.gpu_name << ": ";
            if (!x.meets) w << x.why_not << ".";
            else if (x.cost_usd <= 0) w << gpus_text(x.gpus) << " would do, but no rent or price is known.";
            else w << gpus_text(x.gpus) << ", " << days(x.train_time_s) << ", " << std::fixed << std::setprecision(1) << x.cost_usd / o.cost_usd
                   << "x the cost (" << x.mode << ").";
        }
    }
    rep.recommendation = w.str();

    // Assumptions and risks a buyer adds.
    rep.assumptions.push_back(std::string("Costs compared on ") + basis + ".");
    if (rep.goal.confidence > 0.5)
        rep.assumptions.push_back("Margins: the deadline is met, and memory fits, at the " + detail::fixed(100 * rep.goal.confidence, 0) +
                                  " % end of the model's accuracy band (measured / predicted over the validation cases of the same GPU "
                                  "generation and scale; --confidence 0.5 uses the point estimate).");
    else
        rep.assumptions.push_back(bands ? "No margin: point estimates (--confidence 0.5); the accuracy band is shown beside each time."
                                        : "No margin: point estimates (no accuracy band was available to this report).");
    rep.assumptions.push_back("Electricity $" + detail::fixed(base.run.electricity_usd_per_kwh, 2) + "/kWh at PUE " + detail::fixed(base.run.pue, 2) +
                              "; purchases amortized over " + detail::fixed(base.run.amortization_years, 1) +
                              " years; purchase = GPU price only (servers, network, storage and staff are not priced), offered only for runs that end "
                              "within that period; rent includes power.");
    rep.assumptions.push_back(std::string("Software stack: ") + to_string(base.setup.framework) + " memory conventions, " +
                              (base.setup.flash_attention ? std::string(to_string(base.setup.attention_kernel)) + " attention"
                                                          : std::string("eager attention")) +
                              ", " + to_string(base.setup.precision) + "; matmul and bandwidth efficiencies from data/defaults.toml and the GPU "
                              "presets, as measured on tuned Megatron/DeepSpeed-class stacks: a less tuned stack runs slower than shown.");
    for (const auto& o : rep.options) {
        if (!o.meets) continue;
        const std::string who = o.gpu_name + ": ";
        if (o.consumer && o.nodes > 1)
            rep.risks.push_back(who + "consumer cards in a " + std::to_string(o.nodes) +
                                "-node cluster: no NVLink/NVSwitch, PCIe-only inside a node, and consumer GPU driver terms restrict "
                                "data-centre deployment.");
        else if (o.consumer)
            rep.risks.push_back(who + "consumer card: consumer GPU driver terms restrict data-centre deployment; no ECC on HBM.");
        if (!o.p2p) rep.risks.push_back(who + "no GPU peer-to-peer: collectives go through host memory.");
        if (o.bom.host_ram_per_node_bytes > 0)
            rep.risks.push_back(who + "CPU offload needs " + gib(o.bom.host_ram_per_node_bytes) +
                                " of host RAM per node (not checked against a node's fitted RAM: confirm the server's configuration).");
        if (o.bom.nvme_per_node_bytes > 0) rep.risks.push_back(who + "NVMe offload needs " + gib(o.bom.nvme_per_node_bytes) + " per node.");
        if (o.nodes >= 32) rep.risks.push_back(who + plural(o.nodes, "node", "nodes") + ": failures and restarts at this scale cost time the model does not include.");
    }
    std::map<std::string, int> vendors;
    for (const auto& o : rep.options) if (o.meets) ++vendors[o.vendor];
    if (vendors.size() == 1 && !vendors.begin()->first.empty())
        rep.risks.push_back("Every candidate that meets the goal comes from one vendor (" + vendors.begin()->first + "): supply and price risk.");
    return rep;
}

}  // namespace trainplan
