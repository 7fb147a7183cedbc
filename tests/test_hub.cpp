// Hugging Face ids as MODEL: the local cache (laid out as huggingface_hub writes it),
// then the shipped id map, else a message saying how to get the config.json.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "helpers.hpp"
#include "trainplan/app/hub.hpp"

namespace {

// Sets (or unsets, for nullptr) an environment variable for one scope.
class EnvGuard {
public:
    EnvGuard(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~EnvGuard() {
        if (old_) ::setenv(name_, old_->c_str(), 1);
        else ::unsetenv(name_);
    }
    EnvGuard(const EnvGuard&) = delete;
    EnvGuard& operator=(const EnvGuard&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

// Llama-2-13B: 13,015,864,320 parameters (design reference; Touvron et al. 2023).
constexpr double kLlama2_13b = 13'015'864'320.0;

}  // namespace

TEST_CASE("hub cache directory follows huggingface_hub's order", "[hub]") {
    EnvGuard a("HF_HUB_CACHE", "/x/hub-cache"), b("HF_HOME", "/y/hf-home"), c("XDG_CACHE_HOME", "/z/xdg"), d("HOME", "/h");
    CHECK(trainplan::app::hub_cache_dir() == "/x/hub-cache");
    EnvGuard a2("HF_HUB_CACHE", nullptr);
    CHECK(trainplan::app::hub_cache_dir() == "/y/hf-home/hub");
    EnvGuard b2("HF_HOME", nullptr);
    CHECK(trainplan::app::hub_cache_dir() == "/z/xdg/huggingface/hub");
    EnvGuard c2("XDG_CACHE_HOME", nullptr);
    CHECK(trainplan::app::hub_cache_dir() == "/h/.cache/huggingface/hub");
}

TEST_CASE("fit ORG/NAME reads config.json from the Hugging Face cache", "[hub][cli]") {
    EnvGuard cache("HF_HUB_CACHE", tp_test::data("hf-cache").c_str());
    SECTION("an id the map also knows: the cached config.json wins (model id is the hub id)") {
        const auto r = tp_test::cli({"fit", "meta-llama/Llama-2-13b-hf", "--gpu", "rtx-4090", "--json"});
        INFO(r.err);
        REQUIRE(r.code == 1);  // a full fine-tune of 13B does not fit 24 GB: an answer, not an error
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["model"]["id"] == "meta-llama/Llama-2-13b-hf");
        CHECK(j["model"]["params"].get<double>() == kLlama2_13b);
        // bf16 weights: 2 bytes per parameter.
        CHECK(j["memory"]["weights_bytes"].get<double>() == Approx(2 * kLlama2_13b).epsilon(1e-9));
        CHECK(j["memory"]["fits"] == false);
    }
    SECTION("an id only the cache knows (no refs/main: the snapshot present)") {
        const auto r = tp_test::cli({"fit", "trainplan-test/tiny-llama", "--gpu", "rtx-4090", "--json"});
        INFO(r.err);
        REQUIRE(r.code == 0);
        // vocab 1000, hidden 64, 2 layers, ffn 128, untied: embeddings + LM head 2 x 64,000;
        // per layer q,k,v,o 4 x 64 x 64 + gate,up,down 3 x 64 x 128 + 2 RMSNorm x 64 = 41,088; final norm 64.
        CHECK(nlohmann::json::parse(r.out)["model"]["params"] == 128'000 + 2 * 41'088 + 64);
    }
}

TEST_CASE("fit ORG/NAME falls back to the shipped id map", "[hub][cli]") {
    EnvGuard cache("HF_HUB_CACHE", tp_test::data("hf-cache-empty").c_str());
    const auto r = tp_test::cli({"fit", "meta-llama/Llama-2-13b-hf", "--gpu", "rtx-4090", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 1);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["model"]["id"] == "llama-2-13b");
    CHECK(j["model"]["params"].get<double>() == kLlama2_13b);
    // Ids compare case-insensitively, and an instruction-tuned alias gives its base preset.
    for (const char* id : {"META-LLAMA/llama-2-13B-HF", "meta-llama/Llama-2-13b-chat-hf"}) {
        CAPTURE(id);
        CHECK(tp_test::cli_json("fit", {id, "--gpu", "rtx-4090", "--method", "qlora"})["model"]["id"] == "llama-2-13b");
    }
}

TEST_CASE("an unknown hub id says how to get its config.json", "[hub][cli][bad-input]") {
    const std::string empty = tp_test::data("hf-cache-empty");
    EnvGuard cache("HF_HUB_CACHE", empty.c_str());
    const auto r = tp_test::cli({"fit", "meta-llama/Llama-2-14b-hf", "--gpu", "rtx-4090"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err ==
          "error: \"meta-llama/Llama-2-14b-hf\" is not a file, not in the local Hugging Face cache (" + empty +
              "), and not the id of a shipped preset (did you mean \"meta-llama/Llama-2-13b-hf\", \"meta-llama/Llama-2-70b-hf\", "
              "\"meta-llama/Llama-2-7b-hf\"?). trainplan does not download: fetch its config.json (huggingface-cli download "
              "meta-llama/Llama-2-14b-hf config.json, or save https://huggingface.co/meta-llama/Llama-2-14b-hf/resolve/main/config.json) "
              "and pass the file's path, or use a preset ('trainplan models')\n");
    // A path that is not an id shape keeps the file error.
    const auto p = tp_test::cli({"fit", "./no/such/model.json", "--gpu", "rtx-4090"});
    CHECK(p.code == 2);
    CHECK(p.err == "./no/such/model.json: error: cannot read model file: No such file or directory\n");
}

TEST_CASE("hub id shapes", "[hub]") {
    CHECK(trainplan::looks_like_hub_id("meta-llama/Llama-2-13b-hf"));
    CHECK(trainplan::looks_like_hub_id("Qwen/Qwen2.5-7B"));
    CHECK_FALSE(trainplan::looks_like_hub_id("models/llama.toml"));
    CHECK_FALSE(trainplan::looks_like_hub_id("dir/config.json"));
    CHECK_FALSE(trainplan::looks_like_hub_id("/abs/path"));
    CHECK_FALSE(trainplan::looks_like_hub_id("../x"));
    CHECK_FALSE(trainplan::looks_like_hub_id("a/b/c"));
    CHECK_FALSE(trainplan::looks_like_hub_id("llama-2-13b"));
}

// The map's [from_source] section and the presets' `source` keys are two records of
// the same fact: each preset citing huggingface.co/ORG/NAME/.../config.json must be
// mapped from exactly that id, and every mapped preset must exist.
TEST_CASE("the hub id map agrees with the presets' cited config.json", "[hub][presets]") {
    std::vector<trainplan::Diagnostic> errors;
    const auto map = trainplan::app::hub_id_map({TRAINPLAN_SOURCE_DIR}, &errors);
    CHECK(errors.empty());
    REQUIRE(map.size() >= 30);
    const auto models = tp_test::presets().names(trainplan::PresetKind::Model);
    const std::set<std::string> known(models.begin(), models.end());
    for (const auto& [id, preset] : map) {
        CAPTURE(id);
        CHECK(known.count(preset) == 1);
    }
    const std::regex cited(R"(huggingface\.co/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/blob/main/config\.json)");
    int citing = 0;
    for (const auto& src : tp_test::presets().all(trainplan::PresetKind::Model)) {
        std::smatch m;
        if (!std::regex_search(src.text, m, cited)) continue;
        ++citing;
        std::string id = m[1];
        for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        CAPTURE(src.id, id);
        REQUIRE(map.count(id) == 1);
        CHECK(map.at(id) == src.id);
    }
    CHECK(citing >= 30);
}
