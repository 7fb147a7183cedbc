// Parsing and resolving inputs. Core reads no files: callers hand in text (and a
// name for it used in diagnostics), and implement PresetLookup to find presets.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainplan/enums.hpp"
#include "trainplan/hardware.hpp"
#include "trainplan/model.hpp"
#include "trainplan/result.hpp"
#include "trainplan/training.hpp"

namespace trainplan {

// ---- presets (one TOML document each; unknown keys are rejected)
[[nodiscard]] Result<ModelSpec> parse_model_toml(std::string_view text, const std::string& filename, const std::string& id);
[[nodiscard]] Result<GpuSpec> parse_gpu_toml(std::string_view text, const std::string& filename, const std::string& id);
[[nodiscard]] Result<LinkSpec> parse_link_toml(std::string_view text, const std::string& filename, const std::string& id);
[[nodiscard]] Result<NodeSpec> parse_node_toml(std::string_view text, const std::string& filename, const std::string& id);

// Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2/Qwen2-MoE, Gemma/Gemma-2,
// Phi/Phi-3, Falcon, GPT-2, GPT-NeoX, GPT-J, OPT, BLOOM, MPT, StarCoder2 keys).
[[nodiscard]] Result<ModelSpec> parse_hf_config(std::string_view text, const std::string& filename, const std::string& id);

// "7b", "13B", "1.5b", "350m": a Llama-shaped model of about that size, marked approximate.
[[nodiscard]] bool is_size_shorthand(std::string_view s);
[[nodiscard]] Result<ModelSpec> model_from_shorthand(std::string_view s);

// Semantic checks shared by every model source (each names the key and constraint).
[[nodiscard]] std::vector<Diagnostic> check_model(const ModelSpec& m);

// Where a scenario key was set: a file position, or a command-line flag.
struct Origin {
    std::string file;
    int line = 0, column = 0;
};

// A scenario as written (file or flags): every field optional, preset
// references unresolved. Flags are merged over a file with merge(). Each field
// other than the model is a row of the schema (schema.hpp): a new field is a
// member here plus its row there.
struct ScenarioInput {
    std::optional<std::string> model;          // preset, shorthand or path
    std::optional<ModelSpec> model_inline;     // [model] with inline architecture keys
    std::optional<std::string> gpu, node, intra_node, inter_node;
    std::optional<int> gpus, gpus_per_node, nics_per_node;

    std::optional<Method> method;
    std::optional<int> lora_rank;
    std::optional<double> lora_alpha, lora_dropout;
    std::optional<bool> train_embeddings;
    std::optional<unsigned> lora_targets;
    std::optional<QuantType> quant;
    std::optional<bool> double_quant, paged_optimizer, kbit_upcast, checkpoint_reentrant, expandable_segments;
    std::optional<Precision> precision;
    std::optional<OptimizerKind> optimizer;
    std::optional<Framework> framework;
    std::optional<Stack> stack;
    std::optional<int> zero;
    std::optional<FsdpStrategy> fsdp;
    std::optional<Offload> optimizer_offload, param_offload;
    std::optional<Recompute> recompute;
    std::optional<RecomputeMethod> recompute_method;
    std::optional<int> recompute_layers;
    std::optional<bool> activation_offload;
    std::optional<bool> optimizer_in_backward;
    std::optional<bool> flash_attention;
    std::optional<bool> tf32;
    std::optional<bool> fp8_params;
    std::optional<AttentionKernel> attention_kernel;
    std::optional<HeldOutputs> held_outputs;
    std::optional<bool> fsdp_limit_all_gathers;
    std::optional<bool> ds_gather_per_tensor;
    std::optional<bool> ds_reduce_per_rank;
    std::optional<double> ds_reduce_bucket;
    std::optional<bool> ds_overlap_comm;
    std::optional<bool> fused_linear_ce;
    std::optional<double> ds_sub_group_size;
    std::optional<double> ds_prefetch_bucket;
    std::optional<double> ds_max_reuse_distance;
    std::optional<bool> ddp_bucket_view;
    std::optional<bool> tp_comm_overlap;
    std::optional<bool> grad_reduce_bf16;
    std::optional<bool> overlap_grad_reduce;
    std::optional<bool> grad_accum_fusion;
    std::optional<NcclRelease> nccl;
    std::optional<std::int64_t> seq_len, micro_batch, grad_accum, global_batch;
    std::optional<int> tp, pp, dp, ep, vp, cp;
    std::optional<bool> sequence_parallel;
    std::optional<bool> split_counts_embedding, split_counts_loss;
    std::optional<Schedule> schedule;
    std::optional<double> framework_overhead_gib, fragmentation;
    std::optional<double> host_ram_gib;

    std::map<std::string, Origin> origin;  // scenario key -> where it was set

    void merge(const ScenarioInput& over);  // fields set in `over` win
};

// `extra_sections`: top-level tables another reader handles (e.g. a goal file's [goal]).
[[nodiscard]] Result<ScenarioInput> parse_scenario_toml(std::string_view text, const std::string& filename,
                                                        const std::vector<std::string>& extra_sections = {});

// A sizing goal file: a scenario plus [goal] (tokens, deadline_days, budget_usd,
// candidates, max_gpus, electricity_usd_per_kwh, pue, amortization_years),
// [rent] and [price] tables of $ per GPU-hour / $ per GPU by GPU preset.
struct GoalInput {
    ScenarioInput scenario;
    double tokens = 0, deadline_days = 0, budget_usd = 0;
    int max_gpus = 0;
    std::vector<std::string> candidates;
    std::map<std::string, double> rent, price;
    std::optional<double> electricity, pue, amortization_years, confidence;
    std::string cost_basis;  // "" = default (outlay)
};
[[nodiscard]] Result<GoalInput> parse_goal_toml(std::string_view text, const std::string& filename);

// Enum spellings: enums.hpp (parse_enum<E>, enum_table<E>, parse_lora_targets).

// ---- finding presets (implemented by the front ends, which do the file I/O)
enum class PresetKind { Model, Gpu, Link, Node };
[[nodiscard]] const char* to_string(PresetKind k);

struct TextSource {
    std::string text;
    std::string filename;  // as shown in diagnostics
    std::string id;        // preset name (file stem)
};

class PresetLookup {
public:
    virtual ~PresetLookup() = default;
    // The preset of that kind and name, if one exists.
    virtual std::optional<TextSource> find(PresetKind kind, std::string_view name) = 0;
    // All preset names of a kind (for suggestions and listings).
    virtual std::vector<std::string> names(PresetKind kind) = 0;
    // A user-named file (model TOML, config.json); nullopt if unreadable, with
    // the reason in `why`.
    virtual std::optional<TextSource> read_file(const std::string& path, std::string& why) = 0;
    // A Hugging Face model id ("meta-llama/Llama-2-13b-hf") that is not a readable
    // file: a config.json (filename ends in .json) or a model preset TOML standing in
    // for it; nullopt with the reason and what to do in `why`. Default: not supported.
    virtual std::optional<TextSource> hub_model(const std::string& id, std::string& why) {
        why = "\"" + id + "\" is not a readable file";
        return std::nullopt;
    }
};

// "org/name" shaped like a Hugging Face model id (not an absolute or dotted path,
// no file extension).
[[nodiscard]] bool looks_like_hub_id(std::string_view s);

// Loads and parses one preset; unknown names get a "did you mean" diagnostic.
[[nodiscard]] Result<ModelSpec> load_model(PresetLookup& lookup, const std::string& spec, const std::string& flag);
[[nodiscard]] Result<GpuSpec> load_gpu(PresetLookup& lookup, const std::string& name, const std::string& flag);
[[nodiscard]] Result<LinkSpec> load_link(PresetLookup& lookup, const std::string& name, const std::string& flag);
[[nodiscard]] Result<NodeSpec> load_node(PresetLookup& lookup, const std::string& name, const std::string& flag);

// Builds a complete, validated Scenario: defaults, then the input's fields,
// then derived values (dp from the GPU count, accumulation from the global batch).
[[nodiscard]] Result<Scenario> resolve_scenario(const ScenarioInput& in, PresetLookup& lookup);

// A scenario in the scenario-file format (parse_scenario_toml reads it back to
// the same scenario): every saved schema field with a value.
// `model_ref`: preset name, shorthand or path to write as [model] preset/file;
// empty writes the architecture inline.
[[nodiscard]] std::string scenario_to_toml(const Scenario& s, const std::string& model_ref);

// "Did you mean": names ranked by likely intent (same name up to punctuation, then
// prefix, then family, then edit distance); see suggest.cpp.
[[nodiscard]] std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& names, size_t max = 3);

}  // namespace trainplan
