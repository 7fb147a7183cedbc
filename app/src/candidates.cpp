// Candidate hardware the front ends offer: the cluster a sizing candidate GPU
// comes in, the priced GPU presets, and the hardware alternatives advise may propose.
#include "trainplan/app/candidates.hpp"
#include "trainplan/policy.hpp"

#include <algorithm>

namespace trainplan::app {

namespace {

void keep(std::vector<Diagnostic>* invalid, const Error& e) {
    if (invalid) invalid->insert(invalid->end(), e.diagnostics.begin(), e.diagnostics.end());
}

}  // namespace

// The cluster a candidate GPU comes in: its node preset if one exists (8-GPU
// boxes preferred), else 8 per node on its own NVLink or PCIe and the default fabric.
Result<ClusterSpec> sizing_candidate_cluster(PresetLookup& presets, const std::string& id, std::vector<Diagnostic>* invalid) {
    auto c = sizing_candidate(presets, id, invalid);
    if (!c) return c.error();
    return c->cluster;
}

Result<SizingCandidate> sizing_candidate(PresetLookup& presets, const std::string& id, std::vector<Diagnostic>* invalid) {
    auto g = load_gpu(presets, id, "--candidates");
    if (!g) return g.error();
    SizingCandidate out;
    ScenarioInput in;
    in.model = "7b";
    in.gpu = id;
    for (const auto& name : presets.names(PresetKind::Node)) {
        auto src = presets.find(PresetKind::Node, name);
        if (!src) continue;
        auto n = parse_node_toml(src->text, src->filename, name);
        if (!n) keep(invalid, n.error());
        if (n && n->gpu == id && (!in.node || n->gpus_per_node == 8)) {
            in.node = name;
            out.node_id = name;
            out.node_name = n->name;
            out.node_power_kw = n->system_power_kw;
        }
    }
    in.gpus = in.node ? std::optional<int>() : std::optional<int>(8);
    auto s = resolve_scenario(in, presets);
    if (!s) return s.error();
    ClusterSpec c = s->cluster;
    if (c.inter_node.id.empty()) {
        auto l = load_link(presets, default_inter_node_link_id(c.gpu), "inter_node");
        if (l) c.inter_node = *l;
    }
    out.cluster = c;
    return out;
}

std::vector<std::string> priced_gpu_candidates(PresetLookup& presets, const SizingGoal& goal, std::vector<Diagnostic>* invalid) {
    std::vector<std::string> ids;
    for (const auto& name : presets.names(PresetKind::Gpu)) {
        auto src = presets.find(PresetKind::Gpu, name);
        if (!src) continue;
        auto g = parse_gpu_toml(src->text, src->filename, name);
        if (!g) keep(invalid, g.error());
        if (g && (g->price_usd > 0 || goal.price_usd_per_gpu.count(name) || goal.rent_usd_per_gpu_hour.count(name)))
            ids.push_back(name);
    }
    return ids;
}

AdviceContext advice_context(PresetLookup& presets, const Scenario& s, std::vector<Diagnostic>* invalid) {
    AdviceContext ctx;
    // A preset that is absent is no alternative; one that exists and fails to parse is reported.
    auto link = [&](const std::string& id) -> std::optional<LinkSpec> {
        if (!presets.find(PresetKind::Link, id)) return std::nullopt;
        auto l = load_link(presets, id, "link");
        if (l) return *l;
        keep(invalid, l.error());
        return std::nullopt;
    };
    // Links this GPU can use: its own NVLink, and PCIe at full width (with P2P
    // where the card allows it).
    const GpuSpec& g = s.cluster.gpu;
    std::vector<std::string> intra;
    // (A bridge joins two cards: with more per node only PCIe is an alternative.)
    if (default_intra_node_link_id(g, s.cluster.gpus_per_node) != pcie_link_id(g)) intra.push_back(g.nvlink);
    intra.push_back(pcie_link_id(g));
    for (const auto& id : intra)
        if (auto l = link(id)) ctx.intra_links.push_back(*l);
    for (const char* id : {"ib-hdr", "ib-ndr", "roce-400g"})
        if (auto l = link(id)) ctx.inter_links.push_back(*l);
    if (auto l = link(default_inter_node_link_id(g))) ctx.fabric = *l;
    // Alternatives: NVLink-capable cards of the same class for consumer boxes,
    // and the data-centre parts.
    std::vector<std::string> alts = {"a100-sxm-80gb", "h100-sxm"};
    if (g.consumer || g.memory_gb_marketed <= 48) alts.insert(alts.begin(), {"rtx-3090", "rtx-a6000"});
    for (const auto& id : alts) {
        if (!presets.find(PresetKind::Gpu, id)) continue;
        auto gg = load_gpu(presets, id, "gpu");
        if (!gg) {
            keep(invalid, gg.error());
            continue;
        }
        std::optional<LinkSpec> l = link(default_intra_node_link_id(*gg, s.cluster.gpus_per_node));
        if (gg->id == "a100-sxm-80gb") l = link("nvswitch-a100");
        if (gg->id == "h100-sxm") l = link("nvswitch-h100");
        if (l) ctx.gpus.push_back({*gg, *l});
    }
    return ctx;
}

}  // namespace trainplan::app
