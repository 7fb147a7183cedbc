#include "trainplan/app/report.hpp"
#include "trainplan/app/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trainplan/app/format.hpp"
#include "trainplan/app/presets.hpp"
#include "trainplan/units.hpp"

namespace trainplan::app {

namespace {

std::string days(double s) { return fmt::format("{:.1f}", s / 86400.0); }
std::string usd(double v) {
    if (v <= 0 || !std::isfinite(v)) return "-";
    if (v >= 1e6) return fmt::format("${:.2f} M", v / 1e6);
    if (v >= 1e4) return fmt::format("${:.0f} k", v / 1e3);
    return fmt::format("${:.0f}", v);
}
std::string gib(double b) { return fmt::format("{:.1f} GiB", b / units::GiB); }
std::string plural(long long n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); }
std::string tokens_text(double t) {
    if (t >= 1e12) return fmt::format("{:.3g} T", t / 1e12);
    if (t >= 1e9) return fmt::format("{:.3g} B", t / 1e9);
    if (t >= 1e6) return fmt::format("{:.3g} M", t / 1e6);
    if (t >= 1e3) return fmt::format("{:.3g} k", t / 1e3);
    return fmt::format("{:.0f}", t);
}
// "X (lo-hi)" with the P10-P90 band when one is known.
std::string days_band(const SizingOption& o) {
    if (o.time_band.n <= 0) return days(o.train_time_s);
    return fmt::format("{} ({}-{})", days(o.train_time_s), days(o.train_time_p10_s), days(o.train_time_p90_s));
}
std::string rent_band(const SizingOption& o) {
    if (o.rent_cost_usd <= 0) return "-";
    if (o.time_band.n <= 0) return usd(o.rent_cost_usd);
    return fmt::format("{} ({}-{})", usd(o.rent_cost_usd), usd(o.rent_cost_p10_usd), usd(o.rent_cost_p90_usd));
}
std::string break_even(const SizingOption& o) {
    if (o.break_even_utilization <= 0) return "-";
    if (!std::isfinite(o.break_even_utilization) || o.break_even_utilization > 1) return "never (> 100 %)";
    return fmt::format("{:.0f} %", 100 * o.break_even_utilization);
}
std::string layout(const SizingOption& o) {
    const TrainingSetup& t = o.best.scenario.setup;
    return fmt::format("{}, mb {} x {}, {}, {}{}", layout_text(o.best.scenario), t.micro_batch, t.grad_accum, sharding_text(t),
                       recompute_words(t),
                       t.optimizer_offload != Offload::None ? ", optimizer offload to " + std::string(to_string(t.optimizer_offload)) : "");
}
// The simulate command that reproduces an option's layout (its flags are the schema's).
std::string simulate_command(const SizingReport& r, const SizingOption& o, const std::string& /*node_id*/) {
    // The schema writes the command line (every field that differs from its default, the
    // GUI's "copy command line" too), so a layout dimension the search gains is reproduced
    // without touching the report.
    return command_line(o.best.scenario, "", "simulate") + fmt::format(" --tokens {:g}", r.goal.tokens);
}
std::string node_id_of(const SizingOption& o) { return o.bom.node_id; }
std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}
std::string setup_line(const SizingReport& r) {
    const TrainingSetup& t = r.base.setup;
    std::string m = t.method == Method::Full ? "full training" : t.method == Method::LoRA ? "LoRA" : "QLoRA";
    const double per_step = static_cast<double>(r.global_batch) * t.seq_len;
    return fmt::format("{}, {}, {}, sequence {} tokens, global batch {} ({} tokens per step)", m, to_string(t.precision),
                       to_string(t.optimizer), t.seq_len, plural(r.global_batch, "sequence", "sequences"), tokens_text(per_step));
}
std::string goal_line(const SizingReport& r) {
    std::string g = fmt::format("{} tokens of {}", tokens_text(r.goal.tokens), r.base.model.name);
    if (r.goal.deadline_s > 0) g += fmt::format(" within {} days", days(r.goal.deadline_s));
    else g += " (no deadline: time/cost frontier)";
    if (r.goal.budget_usd > 0) g += fmt::format(", budget {}", usd(r.goal.budget_usd));
    g += r.goal.confidence > 0.5 ? fmt::format(", at {:.0f} % confidence", 100 * r.goal.confidence) : ", point estimates";
    g += fmt::format(", costs on the {} basis", to_string(r.goal.cost_basis));
    return g;
}
std::string prices_line(const SizingReport& r) {
    std::string p;
    for (const auto& o : r.options) {
        if (!p.empty()) p += "; ";
        p += o.gpu_name + ": rent " + (o.rent_usd_per_gpu_hour > 0 ? fmt::format("${:g}/GPU-hour", o.rent_usd_per_gpu_hour) : std::string("not given")) +
             ", price " + (o.price_usd_per_gpu > 0 ? fmt::format("${:.0f} per GPU", o.price_usd_per_gpu) : std::string("not known"));
    }
    return p;
}

}  // namespace

std::string report_date() {
    std::time_t t = std::time(nullptr);
    if (const char* e = std::getenv("SOURCE_DATE_EPOCH"); e && *e) t = static_cast<std::time_t>(std::strtoll(e, nullptr, 10));
    std::tm tm {};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
}

std::string report_markdown(const SizingReport& r) {
    std::string m = "# Training hardware sizing\n\n";
    m += fmt::format("**Date:** {} (trainplan).  \n**Goal:** {}.  \n**Setup:** {}.  \n**Prices used:** {}.\n\n", report_date(), goal_line(r), setup_line(r),
                     prices_line(r));
    m += "## Recommendation\n\n" + r.recommendation + "\n\n## Candidates: rent and buy\n\n";
    m += "Time as point estimate (P10-P90). Rent = the job's rent (power included). Buy outlay = GPU purchase + the run's electricity; "
         "amortized = the purchase share for the run's duration + electricity. Break-even: how busy bought GPUs must stay over the "
         "amortization period for buying to beat renting.\n\n";
    m += "| GPU | meets goal | GPUs (nodes) | time, days (P10-P90) | GPU-hours | rent | buy outlay | buy amortized | break-even use | pick | MFU | "
         "memory headroom (margin) | bottleneck |\n";
    m += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.options) {
        if (!o.meets) {
            m += fmt::format("| {} | no: {} | | | | | | | | | | | |\n", o.gpu_name, o.why_not);
            continue;
        }
        m += fmt::format("| {} | yes | {} ({}) | {} | {:.0f} | {} | {} | {} | {} | {} | {:.0f} % | {} ({}) | {} |\n", o.gpu_name, o.gpus, o.nodes,
                         days_band(o), o.gpu_hours, rent_band(o), usd(o.buy_outlay_usd), usd(o.buy_amortized_usd), break_even(o),
                         o.mode.empty() ? "-" : o.mode, 100 * o.best.time.throughput.mfu, gib(o.headroom_bytes), gib(o.memory_margin_bytes), o.bound);
    }
    m += "\n## Layouts (reproduce each with simulate)\n\n| GPU | layout | command |\n|---|---|---|\n";
    for (const auto& o : r.options)
        if (o.meets) m += fmt::format("| {} | {} | `{}` |\n", o.gpu_name, layout(o), simulate_command(r, o, node_id_of(o)));
    m += "\n## Bill of materials\n\n| GPU | nodes x GPUs | server | compute-fabric NICs | GPU interconnect | host RAM per node | NVMe per node | "
         "power (model, with PUE) | power (node preset) | rack space |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.options) {
        if (!o.meets) continue;
        const BillOfMaterials& b = o.bom;
        m += fmt::format("| {} | {} x {} | {} | {} | {} | {} | {} | {:.1f} kW | {} | not known |\n", o.gpu_name, b.nodes, b.gpus_per_node, b.node,
                         b.nics > 0 ? fmt::format("{} ({})", b.nics, b.fabric) : "none (one node)", b.intra_node,
                         b.host_ram_per_node_bytes > 0 ? gib(b.host_ram_per_node_bytes) : "no offload", b.nvme_per_node_bytes > 0 ? gib(b.nvme_per_node_bytes) : "-",
                         b.power_kw, b.node_power_kw > 0 ? fmt::format("{:.1f} kW", b.node_power_kw) : "not known");
    }
    m += "\n## Time/cost frontier\n\nGPU counts no other count beats on both time and cost (tried up to the pick, or the whole curve without a deadline).\n\n"
         "| GPU | GPUs (nodes) | time (days) | P90 (days) | rent | buy outlay | buy amortized |\n|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.options)
        for (const auto& p : o.frontier)
            m += fmt::format("| {} | {} ({}) | {} | {} | {} | {} | {} |\n", o.gpu_name, p.gpus, p.nodes, days(p.train_time_s), days(p.train_time_p90_s),
                             usd(p.rent_usd), usd(p.buy_outlay_usd), usd(p.buy_amortized_usd));
    m += "\n## Where the step time goes (best layout per candidate)\n\n| GPU | step (s) | compute | communication | bubble | optimizer | offload | data |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.options) {
        if (!o.meets) continue;
        const TimeBreakdown& t = o.best.time.time;
        auto pct = [&](double v) { return fmt::format("{:.0f} %", 100 * v / t.step_s); };
        m += fmt::format("| {} | {:.3f} | {} | {} | {} | {} | {} | {} |\n", o.gpu_name, t.step_s, pct(t.compute_s), pct(t.communication_s),
                         pct(t.bubble_s), pct(t.optimizer_s), pct(t.offload_s), pct(t.data_s));
    }
    m += "\n## Assumptions\n\n";
    for (const auto& a : r.assumptions) m += "- " + a + "\n";
    for (const auto& o : r.options)
        if (o.meets && o.time_band.n > 0)
            m += fmt::format("- Accuracy band for {}: step time x{:.2f}-x{:.2f} ({}, {} cases); memory x{:.2f}-x{:.2f}.\n", o.gpu_name, o.time_band.p10,
                             o.time_band.p90, o.time_band.regime, o.time_band.n, o.memory_band.p10, o.memory_band.p90);
    m += "\n## Risks\n\n";
    if (r.risks.empty()) m += "- None beyond the accuracy band.\n";
    for (const auto& x : r.risks) m += "- " + x + "\n";
    return m;
}

std::string report_html(const SizingReport& r) {
    std::vector<const SizingOption*> ok;
    for (const auto& o : r.options)
        if (o.meets) ok.push_back(&o);
    // Horizontal bar chart as inline SVG, full width (viewBox scaled to the column).
    // value() < 0: not known (drawn as a note, not a bar). A marker (deadline,
    // budget) is a dashed line with its label in its own row above the bars.
    const int W = 1000, left = 300, width = 480;
    // hi (optional): the P90 end of each value, drawn as a whisker from the bar's end.
    auto bars = [&](const std::string& title, const std::vector<std::string>& names, const std::vector<double>& values,
                    const std::vector<std::string>& labels, double marker, const std::string& marker_label,
                    const std::vector<double>& hi = {}) {
        const int row = 30, top = 34;
        double vmax = marker;
        for (double v : values) vmax = std::max(vmax, v);
        for (double v : hi) vmax = std::max(vmax, v);
        if (vmax <= 0) vmax = 1;
        const int h = top + row * static_cast<int>(values.size()) + 10;
        std::string svg = fmt::format("<figure><figcaption>{}</figcaption><svg role=\"img\" aria-label=\"{}\" width=\"100%\" "
                                      "viewBox=\"0 0 {} {}\" preserveAspectRatio=\"xMinYMin meet\" xmlns=\"http://www.w3.org/2000/svg\">",
                                      esc(title), esc(title), W, h);
        if (marker > 0) {
            const double x = left + width * marker / vmax;
            svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" class=\"mark\"/><text x=\"{:.1f}\" y=\"16\" text-anchor=\"middle\" "
                               "class=\"val mk\">{}</text>",
                               x, 22, x, h - 4, x, esc(marker_label));
        }
        for (size_t i = 0; i < values.size(); ++i) {
            const double v = values[i];
            const int y = top + row * static_cast<int>(i);
            svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>", left - 10, y + 17, esc(names[i]));
            if (v < 0) {
                svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"val\">{}</text>", left + 6, y + 17, esc(labels[i]));
                continue;
            }
            const double w = width * v / vmax;
            svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"20\" class=\"bar\"/>", left, y + 3, std::max(1.0, w));
            double end = left + w;
            if (i < hi.size() && hi[i] > v) {
                const double xh = left + width * hi[i] / vmax;
                svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" class=\"wh\"/><line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" "
                                   "y2=\"{}\" class=\"wh\"/>",
                                   left + w, y + 13, xh, y + 13, xh, y + 7, xh, y + 19);
                end = xh;
            }
            // The value label right of the bar (and whisker) and of the marker line, never across it.
            double lx = end + 8;
            if (marker > 0) {
                const double mx = left + width * marker / vmax;
                if (lx < mx + 6 && lx + 9.0 * static_cast<double>(labels[i].size()) > mx - 6) lx = mx + 8;
            }
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"val\">{}</text>", lx, y + 17, esc(labels[i]));
        }
        return svg + "</svg></figure>";
    };
    auto stacked = [&]() {
        const int row = 30, top = 44;
        const char* names[] = {"compute", "communication", "bubble", "optimizer", "offload", "data"};
        const int h = top + row * static_cast<int>(ok.size()) + 10;
        std::string svg = fmt::format("<figure><figcaption>Where the step time goes</figcaption><svg role=\"img\" aria-label=\"step-time breakdown\" "
                                      "width=\"100%\" viewBox=\"0 0 {} {}\" preserveAspectRatio=\"xMinYMin meet\" xmlns=\"http://www.w3.org/2000/svg\">",
                                      W, h);
        // Legend: each entry as wide as its name (~8.5 px a character at 15 px).
        double lx = left;
        for (int k = 0; k < 6; ++k) {
            svg += fmt::format("<rect x=\"{:.0f}\" y=\"8\" width=\"14\" height=\"14\" class=\"s{}\"/><text x=\"{:.0f}\" y=\"20\" class=\"val\">{}</text>",
                               lx, k, lx + 19, names[k]);
            lx += 19 + 8.5 * static_cast<double>(std::strlen(names[k])) + 22;
        }
        int i = 0;
        for (const auto* o : ok) {
            const TimeBreakdown& t = o->best.time.time;
            const double parts[] = {t.compute_s, t.communication_s, t.bubble_s, t.optimizer_s, t.offload_s, t.data_s};
            const int y = top + row * i++;
            svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>", left - 10, y + 17, esc(o->gpu_name));
            double x = left;
            const double sum = std::max(1e-30, parts[0] + parts[1] + parts[2] + parts[3] + parts[4] + parts[5]);
            for (int k = 0; k < 6; ++k) {
                const double w = (width + 180) * parts[k] / sum;
                if (w <= 0) continue;
                svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"20\" class=\"s{}\"><title>{} {:.0f} %</title></rect>", x,
                                   y + 3, w, k, names[k], 100 * parts[k] / t.step_s);
                x += w;
            }
        }
        return svg + "</svg></figure>";
    };

    std::string h = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Training hardware sizing</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root { color-scheme: light dark; --fg:#1b1f24; --bg:#fff; --muted:#57606a; --bar:#2f6fde; --line:#d0d7de; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6edf3; --bg:#0d1117; --muted:#8b949e; --bar:#58a6ff; --line:#30363d; } }
body { font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); max-width: 1200px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; } .rec { border-left: 4px solid var(--bar); padding: .5em 1em; background: color-mix(in srgb, var(--bar) 8%, transparent); }
table { border-collapse: collapse; width: 100%; margin: 1em 0; font-size: 13px; } th, td { border-bottom: 1px solid var(--line); padding: 4px 6px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } .no { color: var(--muted); } code { font-size: 12px; word-break: break-all; }
figure { margin: 1.5em 0; width: 100%; break-inside: avoid; page-break-inside: avoid; } figcaption { font-weight: 600; margin-bottom: .3em; break-after: avoid; page-break-after: avoid; }
h2, h3 { break-after: avoid; page-break-after: avoid; } tr { break-inside: avoid; page-break-inside: avoid; }
svg { display: block; width: 100%; height: auto; }
svg .lbl, svg .val { font: 15px system-ui, sans-serif; fill: var(--fg); } svg .mk { fill: #d1242f; font-weight: 600; } svg .bar { fill: var(--bar); } svg .mark { stroke: #d1242f; stroke-width: 2; stroke-dasharray: 4 3; } svg .wh { stroke: var(--fg); stroke-width: 1.5; }
svg .s0 { fill: #2f6fde; } svg .s1 { fill: #e16f24; } svg .s2 { fill: #8250df; } svg .s3 { fill: #1a7f37; } svg .s4 { fill: #bf3989; } svg .s5 { fill: #9a6700; }
footer { color: var(--muted); font-size: 13px; margin-top: 2em; }
@media print { body { margin: 0; max-width: none; font-size: 12px; } table { font-size: 10px; } }
</style></head><body>
)";
    h += "<h1>Training hardware sizing</h1>\n";
    h += fmt::format("<p><b>Date:</b> {}<br><b>Goal:</b> {}.<br><b>Setup:</b> {}.<br><b>Prices used:</b> {}.</p>\n", report_date(), esc(goal_line(r)),
                     esc(setup_line(r)), esc(prices_line(r)));
    h += fmt::format("<h2>Recommendation</h2><p class=\"rec\">{}</p>\n", esc(r.recommendation));
    h += "<h2>Candidates: rent and buy</h2><p>Time as point estimate (P10-P90). Rent = the job's rent (power included); buy outlay = GPU purchase + "
         "the run's electricity; amortized = the purchase share for the run + electricity; break-even = how busy bought GPUs must stay for buying "
         "to beat renting.</p><table><thead><tr><th>GPU</th><th>GPUs (nodes)</th><th>time, days (P10-P90)</th><th>GPU-hours</th>"
         "<th>rent</th><th>buy outlay</th><th>buy amortized</th><th>break-even use</th><th>pick</th><th>MFU</th><th>headroom (margin)</th><th>bottleneck</th></tr></thead><tbody>\n";
    for (const auto& o : r.options) {
        if (!o.meets) {
            h += fmt::format("<tr class=\"no\"><td>{}</td><td colspan=\"11\">does not meet the goal: {}</td></tr>\n", esc(o.gpu_name), esc(o.why_not));
            continue;
        }
        h += fmt::format("<tr><td>{}</td><td class=\"n\">{} ({})</td><td class=\"n\">{}</td><td class=\"n\">{:.0f}</td>"
                         "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{:.0f} %</td>"
                         "<td class=\"n\">{} ({})</td><td>{}</td></tr>\n",
                         esc(o.gpu_name), o.gpus, o.nodes, days_band(o), o.gpu_hours, esc(rent_band(o)), usd(o.buy_outlay_usd), usd(o.buy_amortized_usd),
                         esc(break_even(o)), o.mode.empty() ? "-" : o.mode, 100 * o.best.time.throughput.mfu, gib(o.headroom_bytes),
                         gib(o.memory_margin_bytes), esc(o.bound));
    }
    h += "</tbody></table>\n";
    if (!ok.empty()) {
        std::vector<std::string> names, tl, rl, bl;
        std::vector<double> tv, rv, bv, th;
        for (const auto* o : ok) {
            names.push_back(o->gpu_name);
            tv.push_back(o->train_time_s / 86400.0);
            th.push_back(o->time_band.n > 0 ? o->train_time_p90_s / 86400.0 : 0);
            tl.push_back(o->time_band.n > 0 ? fmt::format("{} days (P90 {})", days(o->train_time_s), days(o->train_time_p90_s)) : days(o->train_time_s) + " days");
            rv.push_back(o->rent_cost_usd > 0 ? o->rent_cost_usd : -1);
            rl.push_back(o->rent_cost_usd > 0 ? usd(o->rent_cost_usd) : "no rent given");
            const double buy = r.goal.cost_basis == CostBasis::Outlay ? o->buy_outlay_usd : o->buy_amortized_usd;
            bv.push_back(buy > 0 ? buy : -1);
            bl.push_back(buy > 0 ? usd(buy) : "no price known");
        }
        h += bars(r.goal.confidence > 0.5 ? "Time to train (days; whisker to P90, which the deadline is checked against)" : "Time to train (days; whisker to P90)",
                  names, tv, tl, r.goal.deadline_s / 86400.0, fmt::format("deadline {} days", days(r.goal.deadline_s)), th);
        // Rent and buy on one scale, so the two are compared like for like.
        std::vector<std::string> cn, cl;
        std::vector<double> cv;
        for (size_t i = 0; i < names.size(); ++i) {
            cn.push_back(names[i] + " - rent");
            cv.push_back(rv[i]);
            cl.push_back(rl[i]);
            cn.push_back(names[i] + " - buy");
            cv.push_back(bv[i]);
            cl.push_back(bl[i]);
        }
        h += bars(r.goal.cost_basis == CostBasis::Outlay ? "Cost of this job: rent vs buy (purchase + electricity), USD"
                                                         : "Cost of this job: rent vs buy (amortized purchase + electricity), USD",
                  cn, cv, cl, r.goal.budget_usd, fmt::format("budget {}", usd(r.goal.budget_usd)));
        h += stacked();
    }
    h += "<h2>Layouts (reproduce each with simulate)</h2><table><thead><tr><th>GPU</th><th>layout</th><th>command</th></tr></thead><tbody>\n";
    for (const auto* o : ok)
        h += fmt::format("<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>\n", esc(o->gpu_name), esc(layout(*o)), esc(simulate_command(r, *o, node_id_of(*o))));
    h += "</tbody></table>\n<h2>Bill of materials</h2><table><thead><tr><th>GPU</th><th>nodes x GPUs</th><th>server</th><th>fabric NICs</th>"
         "<th>GPU interconnect</th><th>host RAM / node</th><th>NVMe / node</th><th>power (model, PUE)</th><th>power (node preset)</th><th>rack space</th></tr></thead><tbody>\n";
    for (const auto* o : ok) {
        const BillOfMaterials& b = o->bom;
        h += fmt::format("<tr><td>{}</td><td class=\"n\">{} x {}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                         "<td class=\"n\">{:.1f} kW</td><td class=\"n\">{}</td><td>not known</td></tr>\n",
                         esc(o->gpu_name), b.nodes, b.gpus_per_node, esc(b.node), esc(b.nics > 0 ? fmt::format("{} ({})", b.nics, b.fabric) : "none (one node)"),
                         esc(b.intra_node), b.host_ram_per_node_bytes > 0 ? gib(b.host_ram_per_node_bytes) : "no offload",
                         b.nvme_per_node_bytes > 0 ? gib(b.nvme_per_node_bytes) : "-", b.power_kw,
                         b.node_power_kw > 0 ? fmt::format("{:.1f} kW", b.node_power_kw) : "not known");
    }
    h += "</tbody></table>\n<h2>Time/cost frontier</h2><table><thead><tr><th>GPU</th><th>GPUs (nodes)</th><th>time (days)</th><th>P90 (days)</th>"
         "<th>rent</th><th>buy outlay</th><th>buy amortized</th></tr></thead><tbody>\n";
    for (const auto& o : r.options)
        for (const auto& p : o.frontier)
            h += fmt::format("<tr><td>{}</td><td class=\"n\">{} ({})</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                             "<td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                             esc(o.gpu_name), p.gpus, p.nodes, days(p.train_time_s), days(p.train_time_p90_s), usd(p.rent_usd), usd(p.buy_outlay_usd),
                             usd(p.buy_amortized_usd));
    h += "</tbody></table>\n<h2>Assumptions</h2><ul>\n";
    for (const auto& a : r.assumptions) h += "<li>" + esc(a) + "</li>\n";
    for (const auto* o : ok)
        if (o->time_band.n > 0)
            h += "<li>" + esc(fmt::format("Accuracy band for {}: step time x{:.2f}-x{:.2f} ({}, {} cases); memory x{:.2f}-x{:.2f}.", o->gpu_name,
                                 o->time_band.p10, o->time_band.p90, o->time_band.regime, o->time_band.n, o->memory_band.p10, o->memory_band.p90)) + "</li>\n";
    h += "</ul>\n<h2>Risks</h2><ul>\n";
    if (r.risks.empty()) h += "<li>None beyond the accuracy band.</li>\n";
    for (const auto& x : r.risks) h += "<li>" + esc(x) + "</li>\n";
    h += "</ul>\n";
    h += fmt::format("<footer>Generated by trainplan on {}. Predictions come from an analytic model; <code>trainplan validate</code> shows its "
                     "accuracy against published runs.</footer>\n",
                     report_date());
    h += "</body></html>\n";
    return h;
}

namespace {
nlohmann::json layout_json(const SizingReport& r, const SizingOption& o) {
    const TrainingSetup& t = o.best.scenario.setup;
    const ParallelLayout& l = t.layout;
    const ClusterSpec& c = o.best.scenario.cluster;
    return {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"vp", l.vp}, {"ep", l.ep}, {"sequence_parallel", l.sequence_parallel},
            {"schedule", to_string(l.schedule)}, {"micro_batch", t.micro_batch}, {"grad_accum", t.grad_accum}, {"zero", t.zero_stage},
            {"recompute", to_string(t.recompute)}, {"optimizer_offload", to_string(t.optimizer_offload)},
            {"param_offload", to_string(t.param_offload)}, {"fsdp", to_string(t.fsdp)}, {"tp_comm_overlap", t.tp_comm_overlap}, {"method", to_string(t.method)},
            {"cp", l.cp}, {"recompute_method", to_string(t.recompute_method)}, {"recompute_layers", t.recompute_layers},
            {"activation_offload", t.activation_offload}, {"grad_reduce_bf16", t.grad_reduce_bf16}, {"fp8_params", t.fp8_params},
            {"overlap_grad_reduce", t.overlap_grad_reduce},
            {"precision", to_string(t.precision)}, {"seq_len", t.seq_len}, {"gpus_per_node", c.gpus_per_node},
            {"intra_node", c.intra_node.id}, {"inter_node", c.inter_node.id}, {"simulate", simulate_command(r, o, node_id_of(o))}};
}
}  // namespace

std::string report_json(const SizingReport& r) {
    nlohmann::json opts = nlohmann::json::array();
    for (const auto& o : r.options) {
        nlohmann::json j{{"gpu", o.gpu_id}, {"name", o.gpu_name}, {"meets", o.meets}, {"why_not", o.why_not},
                         {"rent_usd_per_gpu_hour", o.rent_usd_per_gpu_hour}, {"price_usd_per_gpu", o.price_usd_per_gpu}};
        nlohmann::json fr = nlohmann::json::array();
        for (const auto& p : o.frontier)
            fr.push_back({{"gpus", p.gpus}, {"nodes", p.nodes}, {"train_time_s", p.train_time_s}, {"train_time_s_p90", p.train_time_p90_s},
                          {"rent_usd", p.rent_usd}, {"buy_outlay_usd", p.buy_outlay_usd}, {"buy_amortized_usd", p.buy_amortized_usd}});
        j["frontier"] = fr;
        if (o.meets) {
            const BillOfMaterials& b = o.bom;
            const bool band = o.time_band.n > 0;
            j.update({{"gpus", o.gpus}, {"nodes", o.nodes}, {"layout", layout_json(r, o)},
                      {"tokens_per_s", o.tokens_per_s}, {"tokens_per_s_p10", band ? o.tokens_per_s_p10 : o.tokens_per_s},
                      {"tokens_per_s_p90", band ? o.tokens_per_s_p90 : o.tokens_per_s}, {"step_s", o.best.time.time.step_s},
                      {"mfu", o.best.time.throughput.mfu}, {"train_time_s", o.train_time_s},
                      {"train_time_s_p10", band ? o.train_time_p10_s : o.train_time_s}, {"train_time_s_p90", band ? o.train_time_p90_s : o.train_time_s},
                      {"gpu_hours", o.gpu_hours}, {"energy_kwh", o.energy_kwh}, {"energy_cost_usd", o.energy_cost_usd},
                      {"rent_cost_usd", o.rent_cost_usd}, {"rent_cost_usd_p10", band ? o.rent_cost_p10_usd : o.rent_cost_usd},
                      {"rent_cost_usd_p90", band ? o.rent_cost_p90_usd : o.rent_cost_usd}, {"purchase_usd", o.purchase_usd},
                      {"buy_outlay_usd", o.buy_outlay_usd}, {"amortized_usd", o.amortized_usd}, {"buy_amortized_usd", o.buy_amortized_usd},
                      {"break_even_utilization", std::isfinite(o.break_even_utilization) ? nlohmann::json(o.break_even_utilization) : nlohmann::json("never")},
                      {"mode", o.mode}, {"cost_usd", o.cost_usd},
                      {"headroom_bytes", o.headroom_bytes}, {"memory_margin_bytes", o.memory_margin_bytes},
                      {"memory_total_bytes", o.best.memory.total}, {"bound", o.bound},
                      {"intervals", {{"time_regime", o.time_band.regime}, {"time_cases", o.time_band.n}, {"time_p10_ratio", o.time_band.p10},
                                     {"time_p90_ratio", o.time_band.p90}, {"memory_p10_ratio", o.memory_band.p10}, {"memory_p90_ratio", o.memory_band.p90},
                                     {"time_factor_applied", o.time_ratio}, {"memory_factor_applied", o.memory_ratio}}},
                      {"bill_of_materials", {{"nodes", b.nodes}, {"gpus", b.gpus}, {"gpus_per_node", b.gpus_per_node}, {"server", b.node},
                                             {"nics", b.nics}, {"fabric", b.fabric}, {"intra_node", b.intra_node},
                                             {"host_ram_per_node_bytes", b.host_ram_per_node_bytes}, {"nvme_per_node_bytes", b.nvme_per_node_bytes},
                                             {"power_kw", b.power_kw}, {"node_power_kw", b.node_power_kw}}}});
        }
        opts.push_back(j);
    }
    nlohmann::json j{{"date", report_date()},
                     {"goal", {{"tokens", r.goal.tokens}, {"deadline_s", r.goal.deadline_s}, {"budget_usd", r.goal.budget_usd},
                               {"confidence", r.goal.confidence}, {"cost_basis", to_string(r.goal.cost_basis)}, {"max_gpus", r.goal.max_gpus}}},
                     {"model", r.base.model.id}, {"global_batch", r.global_batch}, {"cost_basis", to_string(r.goal.cost_basis)},
                     {"electricity_usd_per_kwh", r.base.run.electricity_usd_per_kwh}, {"pue", r.base.run.pue},
                     {"amortization_years", r.base.run.amortization_years}, {"candidates", opts},
                     {"recommended", r.recommended >= 0 ? nlohmann::json(r.options[static_cast<size_t>(r.recommended)].gpu_id) : nlohmann::json()},
                     {"recommended_mode", r.recommended >= 0 ? nlohmann::json(r.options[static_cast<size_t>(r.recommended)].mode) : nlohmann::json()},
                     {"recommendation", r.recommendation}, {"assumptions", r.assumptions}, {"risks", r.risks}};
    return j.dump(2) + "\n";
}

std::string report_csv(const SizingReport& r) {
    std::string c = "gpu,meets,gpus,nodes,gpus_per_node,tp,pp,dp,vp,ep,sequence_parallel,schedule,micro_batch,grad_accum,zero,recompute,"
                    "optimizer_offload,method,precision,seq_len,intra_node,inter_node,tokens_per_s,tokens_per_s_p10,tokens_per_s_p90,mfu,"
                    "train_time_s,train_time_s_p10,train_time_s_p90,gpu_hours,energy_kwh,energy_cost_usd,rent_usd_per_gpu_hour,rent_cost_usd,"
                    "price_usd_per_gpu,purchase_usd,buy_outlay_usd,buy_amortized_usd,break_even_utilization,mode,headroom_bytes,"
                    "memory_margin_bytes,host_ram_per_node_bytes,power_kw,bound,recommended,why_not\n";
    const long columns = std::count(c.begin(), c.end(), ',') + 1;
    auto q = [](const std::string& s) {
        std::string o = "\"";
        for (char ch : s) o += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        return o + "\"";
    };
    for (size_t i = 0; i < r.options.size(); ++i) {
        const auto& o = r.options[i];
        if (!o.meets) {
            c += o.gpu_id + ",false" + std::string(static_cast<size_t>(columns - 3), ',') + "false," + q(o.why_not) + "\n";
            continue;
        }
        const TrainingSetup& t = o.best.scenario.setup;
        const ParallelLayout& l = t.layout;
        const ClusterSpec& cl = o.best.scenario.cluster;
        const bool band = o.time_band.n > 0;
        c += fmt::format("{},true,{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},", o.gpu_id, o.gpus, o.nodes, cl.gpus_per_node, l.tp, l.pp,
                         l.dp, l.vp, l.ep, l.sequence_parallel ? "true" : "false", to_string(l.schedule), t.micro_batch, t.grad_accum, t.zero_stage,
                         to_string(t.recompute), to_string(t.optimizer_offload), to_string(t.method), to_string(t.precision), t.seq_len,
                         cl.intra_node.id, o.nodes > 1 ? cl.inter_node.id : "");
        c += fmt::format("{:.6g},{:.6g},{:.6g},{:.4f},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{:.6g},{:.6g},"
                         "{:.6g},{:.4g},{},{},\n",
                         o.tokens_per_s, band ? o.tokens_per_s_p10 : o.tokens_per_s, band ? o.tokens_per_s_p90 : o.tokens_per_s, o.best.time.throughput.mfu,
                         o.train_time_s, band ? o.train_time_p10_s : o.train_time_s, band ? o.train_time_p90_s : o.train_time_s, o.gpu_hours, o.energy_kwh,
                         o.energy_cost_usd, o.rent_usd_per_gpu_hour, o.rent_cost_usd, o.price_usd_per_gpu, o.purchase_usd, o.buy_outlay_usd,
                         o.buy_amortized_usd,
                         o.break_even_utilization <= 0 ? std::string() : std::isfinite(o.break_even_utilization) ? fmt::format("{:.4g}", o.break_even_utilization) : "never",
                         o.mode, o.headroom_bytes, o.memory_margin_bytes, o.bom.host_ram_per_node_bytes, o.bom.power_kw, o.bound,
                         static_cast<int>(i) == r.recommended ? "true" : "false");
    }
    return c;
}

namespace {

namespace fs = std::filesystem;

// What may be replaced: nothing yet (the new file gets 0666 less the umask) or a
// regular file (its permission bits are kept). Anything else is refused, so a
// device, FIFO, directory or symbolic link is never written through or replaced.
bool check_target(const std::string& path, mode_t& mode, std::string& why) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno != ENOENT) {
            why = path + ": " + std::strerror(errno);
            return false;
        }
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
        return true;
    }
    if (!S_ISREG(st.st_mode)) {
        why = path + ": is " + file_type_name(st.st_mode) + "; refusing to replace anything but a regular file (-o - writes to standard output)";
        return false;
    }
    mode = st.st_mode & 07777;
    return true;
}

// A new file in `dir` with an unpredictable name, created O_CREAT | O_EXCL |
// O_NOFOLLOW (mkstemp's guarantees: never an existing file, never through a
// planted symbolic link), mode 0600 until it is complete.
int create_temporary(const fs::path& dir, const std::string& stem, std::string& tmp, std::string& why) {
    static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string suffix;
        for (int i = 0; i < 12; ++i) suffix += kChars[rd() % (sizeof kChars - 1)];
        tmp = (dir / ("." + stem + ".tmp-" + suffix)).string();
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) return fd;
        if (errno != EEXIST) {
            why = std::strerror(errno);
            return -1;
        }
    }
    why = "no unused temporary name";
    return -1;
}

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

// Percent-encodes a path for a file:// URL.
std::string file_url(const std::string& path) {
    std::string u = "file://";
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') u += static_cast<char>(c);
        else u += fmt::format("%{:02X}", c);
    }
    return u;
}

// The browser that prints PDFs: $TRAINPLAN_CHROMIUM if set, else the first
// chromium, chromium-browser or google-chrome on PATH. Empty when none.
std::string find_browser() {
    auto executable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (const char* b = std::getenv("TRAINPLAN_CHROMIUM"); b && *b) {
        const std::string named(b);
        if (named.find('/') != std::string::npos) return executable(named) ? named : std::string();
    }
    std::vector<std::string> names = {"chromium", "chromium-browser", "google-chrome"};
    if (const char* b = std::getenv("TRAINPLAN_CHROMIUM"); b && *b) names = {b};
    const char* path_env = std::getenv("PATH");
    const std::string path_list = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    for (const auto& name : names) {
        size_t start = 0;
        while (start <= path_list.size()) {
            const size_t end = std::min(path_list.find(':', start), path_list.size());
            const std::string dir = path_list.substr(start, end - start);
            start = end + 1;
            if (dir.empty() || dir[0] != '/') continue;  // never the current directory
            const std::string candidate = dir + "/" + name;
            if (executable(candidate)) return candidate;
        }
    }
    return {};
}

// Runs argv[0] with exactly these arguments and environment (no shell), its
// input and output on /dev/null; exit status, or -1 after `timeout_s`.
int run_program(const std::vector<std::string>& args, const std::vector<std::string>& env, int timeout_s, std::string& why) {
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        why = std::string("cannot start ") + args[0] + ": " + std::strerror(rc);
        return -1;
    }
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 20) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            why = std::string("waiting for ") + args[0] + ": " + std::strerror(errno);
            return -1;
        }
        if (waited_ms >= timeout_s * 1000) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            why = args[0] + " did not finish within " + std::to_string(timeout_s) + " s";
            return -1;
        }
        ::usleep(20000);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    why = args[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
    return -1;
}

}  // namespace

bool write_file_atomically(const std::string& path, const std::string& text, std::string& why) {
    if (path.empty() || path == "-") {
        why = (path.empty() ? std::string("(empty name)") : path) + ": not a file name (- means standard output, which the caller writes)";
        return false;
    }
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        why = path + ": directory " + dir.string() + " does not exist";
        return false;
    }
    mode_t mode = 0644;
    if (!check_target(path, mode, why)) return false;
    std::string tmp;
    const int fd = create_temporary(dir, target.filename().string(), tmp, why);
    if (fd < 0) {
        why = path + ": cannot write in " + dir.string() + ": " + why;
        return false;
    }
    bool ok = write_all(fd, text);
    if (!ok) why = path + ": write failed: " + std::strerror(errno);
    if (ok && ::fchmod(fd, mode) != 0) {
        why = path + ": cannot set permissions: " + std::strerror(errno);
        ok = false;
    }
    if (ok && ::fsync(fd) != 0) {
        why = path + ": write failed: " + std::strerror(errno);
        ok = false;
    }
    if (::close(fd) != 0 && ok) {
        why = path + ": write failed: " + std::strerror(errno);
        ok = false;
    }
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
        why = path + ": cannot replace the file: " + std::strerror(errno);
        ok = false;
    }
    if (!ok) ::unlink(tmp.c_str());
    return ok;
}

bool write_pdf_atomically(const std::string& path, const std::string& html, std::string& why) {
    mode_t mode = 0644;
    if (path.empty() || path == "-") {
        why = "PDF output needs a file name (-o FILE.pdf)";
        return false;
    }
    if (!check_target(path, mode, why)) return false;
    const std::string browser = find_browser();
    if (browser.empty()) {
        why = path + ": PDF output needs a headless Chromium on PATH (Debian: apt install chromium; or set TRAINPLAN_CHROMIUM); "
                     "write .html and print it, or use the GUI";
        return false;
    }
    // A private working directory (mkdtemp: 0700, unpredictable name) for the
    // HTML, the browser profile and the PDF it prints.
    std::error_code ec;
    std::string work = (fs::temp_directory_path(ec) / "trainplan-pdf-XXXXXX").string();
    if (ec || ::mkdtemp(work.data()) == nullptr) {
        why = path + ": cannot create a temporary directory: " + std::strerror(errno);
        return false;
    }
    const std::string html_file = work + "/report.html", pdf_file = work + "/report.pdf";
    bool ok = write_file_atomically(html_file, html, why);
    if (ok) {
        const std::vector<std::string> args = {browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                               "--user-data-dir=" + work + "/profile", "--no-pdf-header-footer",
                                               "--print-to-pdf=" + pdf_file, file_url(html_file)};
        // A fixed environment: nothing of the caller's (LD_PRELOAD, proxies, ...) reaches the browser.
        const std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work, "LANG=C.UTF-8"};
        std::string run_why;
        const int rc = run_program(args, env, 120, run_why);
        std::string pdf;
        if (rc == 0) {
            std::ifstream in(pdf_file, std::ios::binary);
            std::ostringstream ss;
            ss << in.rdbuf();
            pdf = ss.str();
        }
        if (rc != 0 || pdf.rfind("%PDF-", 0) != 0) {
            why = path + ": " + browser + " could not print the report to PDF" +
                  (!run_why.empty() ? " (" + run_why + ")" : rc > 0 ? " (exit status " + std::to_string(rc) + ")" : "");
            ok = false;
        } else {
            ok = write_file_atomically(path, pdf, why);
        }
    }
    fs::remove_all(work, ec);
    return ok;
}

}  // namespace trainplan::app
