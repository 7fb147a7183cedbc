// Hugging Face model ids ("meta-llama/Llama-2-13b-hf") without network access: the
// config.json in the local Hugging Face cache, else the shipped preset the id map
// (data/hf-ids.toml) names, else a message saying how to get the config.json.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainplan/io.hpp"

namespace trainplan::app {

// The hub cache directory huggingface_hub uses: $HF_HUB_CACHE, else $HF_HOME/hub,
// else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
[[nodiscard]] std::string hub_cache_dir();

// <cache>/models--ORG--NAME/snapshots/<revision>/config.json: the revision refs/main
// names, else the most recently written snapshot that has one. nullopt if none.
[[nodiscard]] std::optional<std::string> cached_hub_config(const std::string& cache_dir, const std::string& id);

// The id -> preset map from every root's data/hf-ids.toml (earlier roots win; ids
// compare case-insensitively: the keys are lower case; `ids` receives them as
// written). Malformed lines of a map are reported in `errors`.
[[nodiscard]] std::map<std::string, std::string> hub_id_map(const std::vector<std::string>& roots,
                                                            std::vector<Diagnostic>* errors = nullptr,
                                                            std::vector<std::string>* ids = nullptr);

}  // namespace trainplan::app
