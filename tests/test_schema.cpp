// The scenario schema: one field list, checked exactly against what the TOML
// writer emits and the flags the CLI registers (Calculon's
// `set(cfg.keys()) == set(fields())`), and round trips over random scenarios
// whose values come from the schema rows themselves (a new row is covered
// without touching this file).
#include <catch2/catch.hpp>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "../cli/scenario_flags.hpp"
#include "helpers.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/schema.hpp"
#include "trainplan/time.hpp"

using namespace trainplan;

namespace {

// Presets from the source tree, each text read once (the round trips resolve
// tens of thousands of scenarios).
class CachedPresets final : public PresetLookup {
public:
    std::optional<TextSource> find(PresetKind kind, std::string_view name) override {
        const auto key = std::make_pair(kind, std::string(name));
        auto it = found_.find(key);
        if (it == found_.end()) it = found_.emplace(key, tp_test::presets().find(kind, name)).first;
        return it->second;
    }
    std::vector<std::string> names(PresetKind kind) override {
        auto it = names_.find(kind);
        if (it == names_.end()) it = names_.emplace(kind, tp_test::presets().names(kind)).first;
        return it->second;
    }
    std::optional<TextSource> read_file(const std::string& path, std::string& why) override {
        return tp_test::presets().read_file(path, why);
    }

private:
    std::map<std::pair<PresetKind, std::string>, std::optional<TextSource>> found_;
    std::map<PresetKind, std::vector<std::string>> names_;
};

CachedPresets& cached() {
    static CachedPresets p;
    return p;
}

// A value for a row, drawn from the row's own rule.
FieldValue random_value(const Field& f, std::mt19937& rng) {
    auto uniform = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
    const FieldRule& r = f.rule;
    switch (r.type) {
        case FieldType::Int: {
            const auto lo = static_cast<std::int64_t>(r.lo), hi = static_cast<std::int64_t>(r.hi);
            if (hi - lo <= 8) return uniform(lo, hi);
            // Mostly powers of two (layouts must divide the model), sometimes any small value.
            if (uniform(0, 2) > 0) return std::clamp<std::int64_t>(std::int64_t{1} << uniform(0, 6), lo, hi);
            return uniform(lo, std::min(hi, lo + 16));
        }
        case FieldType::Number: {
            const double hi = std::min(r.hi, r.lo + std::max(1.0, 4 * r.lo));
            return std::uniform_real_distribution<double>(r.lo, hi)(rng);
        }
        case FieldType::Bool: return uniform(0, 1) == 1;
        case FieldType::Enum: return std::int64_t{r.choices->entries[static_cast<size_t>(uniform(0, static_cast<std::int64_t>(r.choices->entries.size()) - 1))].value};
        case FieldType::LoraTargets: return uniform(1, kLoraAll);
        case FieldType::Text: {
            const auto names = cached().names(*r.preset);
            return names[static_cast<size_t>(uniform(0, static_cast<std::int64_t>(names.size()) - 1))];
        }
    }
    return std::int64_t{0};
}

const std::vector<std::string> kModels{"gpt2", "llama-3.2-1b", "llama-2-7b", "mistral-7b", "llama-2-13b", "mixtral-8x7b", "gpt3-175b"};

// A random valid scenario input: a base, then each row (in random order) set to
// a random value from its rule, kept when the scenario still resolves.
ScenarioInput random_input(std::mt19937& rng, std::map<std::string, int>& changed) {
    auto pick = [&](const auto& v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
    for (;;) {
        ScenarioInput in;
        in.model = pick(kModels);
        in.gpu = pick(std::vector<std::string>{"rtx-4090", "a100-sxm-80gb", "h100-sxm", "mi300x"});
        in.gpus = 1 << std::uniform_int_distribution<int>(0, 5)(rng);
        if (!resolve_scenario(in, cached())) continue;
        std::vector<const Field*> rows;
        for (const Field& f : scenario_fields()) rows.push_back(&f);
        for (int pass = 0; pass < 2; ++pass) {
            std::shuffle(rows.begin(), rows.end(), rng);
            for (const Field* f : rows) {
                if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) continue;
                ScenarioInput trial = in;
                f->set(trial, random_value(*f, rng));
                if (resolve_scenario(trial, cached())) in = trial;
            }
        }
        for (const Field& f : scenario_fields())
            if (f.get(in)) ++changed[f.key];
        return in;
    }
}

void same_evaluation(const Scenario& a, const Scenario& b) {
    const MemoryEstimate ma = estimate_memory(a), mb = estimate_memory(b);
    REQUIRE(ma.stages.size() == mb.stages.size());
    for (size_t i = 0; i < ma.stages.size(); ++i) {
        const MemoryBreakdown &x = ma.stages[i].mem, &y = mb.stages[i].mem;
        CHECK(x.weights == y.weights);
        CHECK(x.gradients == y.gradients);
        CHECK(x.optimizer == y.optimizer);
        CHECK(x.activations == y.activations);
        CHECK(x.logits == y.logits);
        CHECK(x.temporary == y.temporary);
        CHECK(x.framework == y.framework);
        CHECK(x.fragmentation == y.fragmentation);
        CHECK(x.total == y.total);
        CHECK(x.capacity == y.capacity);
        CHECK(x.cpu == y.cpu);
    }
    const TimeEstimate ta = estimate_time(a), tb = estimate_time(b);
    CHECK(ta.time.step_s == tb.time.step_s);
    CHECK(ta.time.compute_s == tb.time.compute_s);
    CHECK(ta.time.communication_s == tb.time.communication_s);
    CHECK(ta.time.bubble_s == tb.time.bubble_s);
    CHECK(ta.time.optimizer_s == tb.time.optimizer_s);
    CHECK(ta.time.offload_s == tb.time.offload_s);
    CHECK(ta.time.data_s == tb.time.data_s);
    CHECK(ta.throughput.tokens_per_s == tb.throughput.tokens_per_s);
}

// Every schema value of a resolved scenario, by key.
std::map<std::string, std::string> schema_values(const Scenario& s) {
    std::map<std::string, std::string> out;
    for (const Field& f : scenario_fields())
        if (f.read)
            if (auto v = f.read(s)) out[f.key] = value_to_text(f.rule, *v);
    return out;
}

// POSIX shell words (the copied command line uses bare words and '...' quoting).
std::vector<std::string> shell_split(const std::string& line) {
    std::vector<std::string> words;
    std::string w;
    bool in_word = false, quoted = false;
    for (char c : line) {
        if (quoted) {
            if (c == '\'') quoted = false;
            else w += c;
        } else if (c == '\'') {
            quoted = in_word = true;
        } else if (c == '\\') {
            // only used as '\'' inside quoting
        } else if (c == ' ') {
            if (in_word) words.push_back(w);
            w.clear();
            in_word = false;
        } else {
            w += c;
            in_word = true;
        }
    }
    if (in_word) words.push_back(w);
    return words;
}

// The copied command line back through the real flag parser and merge.
Result<Scenario> parse_command_line(const std::string& line) {
    std::vector<std::string> words = shell_split(line);
    REQUIRE(words.size() >= 3);
    REQUIRE(words[0] == "trainplan");
    words.erase(words.begin(), words.begin() + 2);  // "trainplan fit"
    CLI::App app;
    cli::ScenarioFlags flags;
    cli::add_scenario_flags(app, flags, true);
    std::reverse(words.begin(), words.end());  // CLI11 takes the vector reversed
    app.parse(words);
    REQUIRE(flags.preset_dirs.empty());
    auto in = cli::flags_to_input(flags);
    if (!in) return in.error();
    return resolve_scenario(*in, cached());
}

}  // namespace

TEST_CASE("every enum name and alias parses back to its value", "[schema][enums]") {
    CHECK(enum_table<Precision>().allowed() == "fp32, fp16-mixed, bf16-mixed, bf16, fp8-mixed");
    CHECK(enum_table<FsdpStrategy>().allowed() == "none, full-shard, shard-grad-op, hybrid-shard, no-shard");
    CHECK(parse_enum<Precision>("BF16_TRUE") == Precision::BF16);
    CHECK(parse_enum<AttentionKernel>("sdpa") == AttentionKernel::Flash2);
    CHECK(parse_enum<OptimizerKind>("adam8bit") == std::nullopt);
    // Link presets spell it infinity_fabric; '_' and '-' are the same.
    CHECK(parse_enum<LinkKind>("infinity-fabric") == LinkKind::InfinityFabric);
    CHECK(parse_enum<LinkKind>("Infinity_Fabric") == LinkKind::InfinityFabric);
    CHECK(std::string(to_string(LinkKind::InfinityFabric)) == "infinity_fabric");
    CHECK(std::string(to_string(FsdpStrategy::HybridShard)) == "hybrid-shard");
    for (const Field& f : scenario_fields()) {
        if (f.rule.type != FieldType::Enum) continue;
        for (const EnumEntry& e : f.rule.choices->entries) {
            CHECK(f.rule.choices->parse(e.name) == e.value);
            CHECK(std::string(f.rule.choices->name(e.value)) == e.name);
        }
    }
    CHECK(parse_lora_targets("q_proj, V") == (kLoraQ | kLoraV));
    CHECK(lora_targets_to_string(kLoraQ | kLoraV) == "q,v");
    CHECK(lora_targets_to_string(kLoraMlp) == "mlp");
    CHECK(std::string(lora_targets_allowed()) == "q, k, v, o, gate, up, down (or all, attention, mlp)");
}

TEST_CASE("the schema's fields are exactly the keys the writer emits and the flags registered", "[schema]") {
    // A scenario where every field applies: two nodes, NICs, host RAM and both overrides set.
    ScenarioInput in;
    in.model = "llama-2-7b";
    in.gpu = "a100-sxm-80gb";
    in.gpus = 16;
    in.nics_per_node = 4;
    in.framework_overhead_gib = 1.5;
    in.fragmentation = 0.1;
    in.host_ram_gib = 2048;
    auto s = resolve_scenario(in, cached());
    REQUIRE(s);
    const toml::table doc = toml::parse(scenario_to_toml(*s, "llama-2-7b"));
    std::set<std::string> written, schema;
    for (const auto& [section, node] : doc)
        for (const auto& [key, v] : *node.as_table()) written.insert(std::string(section.str()) + "." + std::string(key.str()));
    schema.insert("model.preset");
    for (const Field& f : scenario_fields())
        if (f.saved) schema.insert(std::string(f.section) + "." + f.key);
    CHECK(written == schema);
    // The two inputs not written expand into written ones.
    std::set<std::string> input_only;
    for (const Field& f : scenario_fields())
        if (!f.saved) input_only.insert(f.key);
    CHECK(input_only == std::set<std::string>{"node", "global_batch"});

    CLI::App app;
    cli::ScenarioFlags flags;
    cli::add_scenario_flags(app, flags, true);
    // Besides the rows: the files a scenario is read from (scenario, preset folders, calibration profile).
    std::set<std::string> registered, expected{"--scenario", "--presets", "--calibration"};
    for (const CLI::Option* o : app.get_options()) {
        if (o->get_name() == "--help" || o->get_name() == "model") continue;
        for (const std::string& n : o->get_lnames()) registered.insert("--" + n);
    }
    for (const Field& f : scenario_fields()) {
        expected.insert(f.flag);
        if (*f.alias) expected.insert(f.alias);
    }
    CHECK(registered == expected);

    // JSON: the same sections and keys (global_batch included: it is derived, not lost).
    const nlohmann::json j = app::scenario_json(*s);
    std::set<std::string> json_keys, readable;
    for (const std::string& section : scenario_sections())
        for (const auto& [k, v] : j.at(section).items()) json_keys.insert(section + "." + k);
    for (const Field& f : scenario_fields())
        if (f.read) readable.insert(std::string(f.section) + "." + f.key);
    CHECK(json_keys == readable);
}

TEST_CASE("1,000 random scenarios over every schema field round-trip through TOML and the copied command line",
          "[schema][properties]") {
    std::mt19937 rng(20261130);
    std::map<std::string, int> changed;
    for (int i = 0; i < 1000; ++i) {
        const ScenarioInput in = random_input(rng, changed);
        const auto s = resolve_scenario(in, cached());
        REQUIRE(s);
        const std::string model_ref = *in.model;
        CAPTURE(i, model_ref, app::command_line(*s, model_ref));

        // scenario -> TOML -> scenario
        const std::string text = scenario_to_toml(*s, model_ref);
        CAPTURE(text);
        auto back = parse_scenario_toml(text, "roundtrip.toml");
        REQUIRE(back);
        auto s2 = resolve_scenario(*back, cached());
        INFO((s2 ? std::string() : s2.error().message()));
        REQUIRE(s2);
        CHECK(schema_values(*s2) == schema_values(*s));
        same_evaluation(*s, *s2);

        // scenario -> copied command line -> scenario (the real flag parser)
        auto s3 = parse_command_line(app::command_line(*s, model_ref));
        INFO((s3 ? std::string() : s3.error().message()));
        REQUIRE(s3);
        CHECK(schema_values(*s3) == schema_values(*s));
        same_evaluation(*s, *s3);
    }
    // Every row was exercised (set to a drawn value in some valid scenario).
    for (const Field& f : scenario_fields()) {
        CAPTURE(f.key);
        CHECK(changed[f.key] >= 10);
    }
}

TEST_CASE("an inline [model] round-trips through the scenario file", "[schema]") {
    ScenarioInput in;
    in.model_inline = tp_test::model("mixtral-8x7b");
    in.model_inline->dropout = 0.1234567890123;
    in.gpu = "h100-sxm";
    in.gpus = 8;
    in.ep = 8;
    auto s = resolve_scenario(in, cached());
    REQUIRE(s);
    auto back = parse_scenario_toml(scenario_to_toml(*s, ""), "inline.toml");
    REQUIRE(back);
    REQUIRE(back->model_inline);
    CHECK(back->model_inline->dropout == 0.1234567890123);
    auto s2 = resolve_scenario(*back, cached());
    REQUIRE(s2);
    CHECK(count_params(s2->model).total == count_params(s->model).total);
    same_evaluation(*s, *s2);
}

TEST_CASE("an inline [model] with a vision encoder round-trips through the scenario file", "[schema]") {
    ScenarioInput in;
    in.model_inline = tp_test::model("gemma-3-27b");
    in.gpu = "h100-sxm";
    in.method = Method::LoRA;
    auto s = resolve_scenario(in, cached());
    REQUIRE(s);
    const std::string text = scenario_to_toml(*s, "");
    CHECK(text.find("[model.vision]") != std::string::npos);
    auto back = parse_scenario_toml(text, "inline.toml");
    REQUIRE(back);
    REQUIRE(back->model_inline);
    CHECK(back->model_inline->vision.num_layers == 27);
    CHECK(back->model_inline->vision.image_size == 896);
    auto s2 = resolve_scenario(*back, cached());
    REQUIRE(s2);
    CHECK(count_params(s2->model).total == 27'432'406'640);  // the checkpoint's count
    same_evaluation(*s, *s2);
}

TEST_CASE("hybrid sharding survives save and the copied command line (issue 10)", "[schema]") {
    // The scenario from the issue: 32 x A100 80GB, 4 nodes, full recompute, FSDP hybrid-shard.
    ScenarioInput in;
    in.model = "llama-2-70b";
    in.gpu = "a100-sxm-80gb";
    in.gpus = 32;
    in.gpus_per_node = 8;
    in.recompute = Recompute::Full;
    in.global_batch = 64;
    in.fsdp = FsdpStrategy::HybridShard;
    in.attention_kernel = AttentionKernel::Flash3;
    in.tp_comm_overlap = true;
    auto s = resolve_scenario(in, cached());
    REQUIRE(s);
    const std::string text = scenario_to_toml(*s, "llama-2-70b");
    CHECK(text.find("fsdp = \"hybrid-shard\"") != std::string::npos);
    const std::string line = app::command_line(*s, "llama-2-70b");
    for (const char* flag : {"--fsdp hybrid-shard", "--attention-kernel flash3", "--tp-comm-overlap on", "--gpus 32"})
        CHECK(line.find(flag) != std::string::npos);
    auto s2 = resolve_scenario(*parse_scenario_toml(text, "h.toml"), cached());
    REQUIRE(s2);
    CHECK(s2->setup.fsdp == FsdpStrategy::HybridShard);
    same_evaluation(*s, *s2);
}

TEST_CASE("flags are checked by the same rule as the keys (issues 12, 16)", "[schema][bad-input]") {
    using tp_test::cli;
    auto r = cli({"size", "llama-3-8b", "--tokens", "1e12", "--deadline-days", "nan"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --deadline-days = nan must be a finite number\n");
    r = cli({"size", "llama-3-8b", "--tokens", "1e12", "--budget", "-5"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --budget = -5 must be at least 0\n");
    r = cli({"plan", "llama-2-7b", "--gpu", "h100-sxm", "--min-gpus", "--target-tokens-per-s", "nan"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --target-tokens-per-s = nan must be a finite number\n");
    r = cli({"size", "llama-3-8b", "--tokens", "1e12", "--rent", "h100=2"});
    CHECK(r.code == 2);
    CHECK(r.err.find("error: --rent = \"h100=2\": unknown GPU preset \"h100\"; did you mean ") == 0);
    CHECK(r.err.find("\"h100-sxm\"") != std::string::npos);
    r = cli({"size", "llama-3-8b", "--tokens", "1e12", "--rent", "h100-sxm=inf"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --rent h100-sxm = inf must be a finite number\n");
    // simulate takes the same GPU=USD form (and a bare amount for its own GPU).
    r = cli({"simulate", "llama-2-7b", "--gpu", "h100-sxm", "--tokens", "1e9", "--rent", "a100-sxm-80gb=2"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --rent names a100-sxm-80gb but the scenario's GPU is h100-sxm\n");
    // The same key in a file and as a flag: one message shape, one limit.
    r = cli({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--lora-dropout", "1.5"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --lora-dropout = 1.5 exceeds the maximum 0.99\n");
    r = cli({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--fsdp", "hybrid"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --fsdp = \"hybrid\" is not one of: none, full-shard, shard-grad-op, hybrid-shard, no-shard\n");
    r = cli({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--remedies", "-3"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --remedies = -3 must be at least 1\n");
    r = cli({"plan", "llama-2-7b", "--gpu", "h100-sxm", "--top", "5000"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --top = 5000 exceeds the maximum 1000\n");
    r = cli({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--sp", "maybe"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: --sequence-parallel = \"maybe\" must be on or off\n");
}

TEST_CASE("scenario files: unknown keys get did-you-mean at file:line:col; flags override keys", "[schema][bad-input]") {
    auto bad = parse_scenario_toml("[model]\npreset = \"llama-2-7b\"\n[training]\nfsdpp = \"hybrid-shard\"\n", "s.toml");
    REQUIRE(!bad);
    CHECK(bad.error().diagnostics.front().to_string() == "s.toml:4:9: error: unknown key \"fsdpp\" in [training] (did you mean \"fsdp\"?)");
    auto range = parse_scenario_toml("[parallel]\ntp = 0\n", "s.toml");
    REQUIRE(!range);
    CHECK(range.error().diagnostics.front().to_string() == "s.toml:2:6: error: tp = 0 must be at least 1");

    // merge: the flag's value wins and a later error about it names the flag.
    auto file = parse_scenario_toml("[model]\npreset = \"llama-2-7b\"\n[hardware]\ngpu = \"h100-sxm\"\ngpus = 6\n[parallel]\ntp = 2\n", "s.toml");
    REQUIRE(file);
    ScenarioInput flags;
    flags.tp = 3;
    ScenarioInput merged = *file;
    merged.merge(flags);
    CHECK(merged.tp == 3);
    CHECK(merged.gpus == 6);
    auto s = resolve_scenario(merged, cached());
    REQUIRE(!s);
    CHECK(s.error().diagnostics.front().key == "--tp");
    // Without the flag the same error points into the file.
    file->tp = 3;
    auto s2 = resolve_scenario(*file, cached());
    REQUIRE(!s2);
    CHECK(s2.error().diagnostics.front().file == "s.toml");
    CHECK(s2.error().diagnostics.front().line == 7);
}

TEST_CASE("a saved scenario with control characters in a name reopens (issue 16 item 9)", "[schema]") {
    ScenarioInput in;
    in.model_inline = tp_test::model("llama-3.2-1b");
    in.model_inline->name = "evil\x1b[31m\tname\x7f\"q\"";
    in.gpu = "rtx-4090";
    auto s = resolve_scenario(in, cached());
    REQUIRE(s);
    auto back = parse_scenario_toml(scenario_to_toml(*s, ""), "ctl.toml");
    REQUIRE(back);
    CHECK(back->model_inline->name == in.model_inline->name);
}

TEST_CASE("a goal file's [rent] is checked like --rent: unknown GPU ids get did-you-mean", "[schema][bad-input]") {
    const std::string path = (std::filesystem::temp_directory_path() / "trainplan-goal-rent.toml").string();
    {
        std::ofstream f(path);
        f << "[model]\npreset = \"llama-3-8b\"\n[goal]\ntokens = 1e12\n[rent]\nh100 = 2\n";
    }
    const auto r = tp_test::cli({"size", "--goal", path});
    std::remove(path.c_str());
    CHECK(r.code == 2);
    CHECK(r.err.find(path + ": error: [rent] h100: unknown GPU preset \"h100\"; did you mean \"") != std::string::npos);
    // And the amounts follow the flag's rule: a negative rent in the file is refused.
    auto g = parse_goal_toml("[goal]\ntokens = 1e12\n[rent]\nh100-sxm = -1\n", "g.toml");
    REQUIRE(!g);
    CHECK(g.error().diagnostics.front().to_string() == "g.toml:4:12: error: h100-sxm = -1 must be at least 0");
}
