#include "trainplan/app/hub.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "trainplan/app/presets.hpp"

namespace fs = std::filesystem;

namespace trainplan::app {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string();
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

}  // namespace

// The same order as huggingface_hub's constants.py (HF_HUB_CACHE, HF_HOME/hub,
// XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub).
std::string hub_cache_dir() {
    if (auto v = env("HF_HUB_CACHE"); !v.empty()) return v;
    if (auto v = env("HF_HOME"); !v.empty()) return v + "/hub";
    if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return v + "/huggingface/hub";
    if (auto v = env("HOME"); !v.empty()) return v + "/.cache/huggingface/hub";
    return {};
}

std::optional<std::string> cached_hub_config(const std::string& cache_dir, const std::string& id) {
    if (cache_dir.empty() || !looks_like_hub_id(id)) return std::nullopt;
    // huggingface_hub's repo_folder_name(): "models--" + id with '/' -> "--".
    std::string folder = "models--" + id;
    folder.replace(folder.find('/'), 1, "--");
    const fs::path repo = fs::path(cache_dir) / folder;
    std::error_code ec;
    if (!fs::is_directory(repo, ec)) return std::nullopt;
    // refs/main holds the commit hash of the snapshot the default branch points at.
    std::string why, ref;
    if (read_text_file((repo / "refs" / "main").string(), ref, why)) {
        ref.erase(std::remove_if(ref.begin(), ref.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }), ref.end());
        const fs::path p = repo / "snapshots" / ref / "config.json";
        if (!ref.empty() && ref.find('/') == std::string::npos && is_file(p)) return p.string();
    }
    std::optional<fs::path> newest;
    fs::file_time_type newest_time{};
    for (const auto& e : fs::directory_iterator(repo / "snapshots", ec)) {
        const fs::path p = e.path() / "config.json";
        if (!is_file(p)) continue;
        const auto t = fs::last_write_time(p, ec);
        if (!newest || t > newest_time) newest = p, newest_time = t;
    }
    if (newest) return newest->string();
    return std::nullopt;
}

std::map<std::string, std::string> hub_id_map(const std::vector<std::string>& roots, std::vector<Diagnostic>* errors,
                                              std::vector<std::string>* ids) {
    std::map<std::string, std::string> out;
    for (const auto& root : roots) {
        const fs::path file = fs::path(root) / "data" / "hf-ids.toml";
        std::string text, why;
        if (!is_file(file) || !read_text_file(file.string(), text, why)) continue;
        toml::table parsed;
        try {
            parsed = toml::parse(text, file.string());
        } catch (const toml::parse_error& e) {
            if (errors) errors->push_back({file.string(), static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column), "",
                                           "invalid TOML: " + std::string(e.description())});
            continue;
        }
        for (const auto& [section, node] : parsed) {
            const toml::table* t = node.as_table();
            if (!t) continue;
            for (const auto& [k, v] : *t) {
                const auto preset = v.value<std::string>();
                if (!preset) {
                    if (errors) errors->push_back({file.string(), static_cast<int>(v.source().begin.line), static_cast<int>(v.source().begin.column),
                                                   std::string(k.str()), "\"" + std::string(k.str()) + "\" must map to a preset name (a string)"});
                    continue;
                }
                if (out.emplace(lower(std::string(k.str())), *preset).second && ids) ids->emplace_back(k.str());  // first root wins
            }
        }
    }
    return out;
}

std::optional<TextSource> FilePresets::hub_model(const std::string& id, std::string& why) {
    auto read_config = [&](const std::string& path) {
        auto src = read_file(path, why);
        if (src) src->id = id;  // the model is named by its hub id, not "config"
        else why = path + ": cannot read: " + why;
        return src;
    };
    // A local checkout of a hub repository ("org/name/config.json") is the id itself.
    if (const fs::path local = fs::path(id) / "config.json"; is_file(local)) return read_config(local.string());

    const std::string cache = hub_cache_dir();
    if (auto cfg = cached_hub_config(cache, id)) return read_config(*cfg);

    std::vector<std::string> ids;
    const auto map = hub_id_map(roots(), nullptr, &ids);
    if (auto it = map.find(lower(id)); it != map.end()) {
        if (auto src = find(PresetKind::Model, it->second)) return src;
        why = "Hugging Face id \"" + id + "\" maps to model preset \"" + it->second + "\", which is not installed";
        return std::nullopt;
    }

    why = "\"" + id + "\" is not a file, not in the local Hugging Face cache (" + (cache.empty() ? std::string("no cache directory") : cache) +
          "), and not the id of a shipped preset";
    if (const auto near = closest_names(id, ids, 3); !near.empty()) {
        why += " (did you mean ";
        for (size_t i = 0; i < near.size(); ++i) why += (i ? ", \"" : "\"") + near[i] + "\"";
        why += "?)";
    }
    why += ". trainplan does not download: fetch its config.json (huggingface-cli download " + id +
           " config.json, or save https://huggingface.co/" + id + "/resolve/main/config.json) and pass the file's path, "
           "or use a preset ('trainplan models')";
    return std::nullopt;
}

}  // namespace trainplan::app
