// File-system preset lookup: --presets DIRs, the user's config directory, the
// installed share/trainplan, and (for build trees) the source tree, first match wins.
#pragma once

#include <string>
#include <vector>

#include "trainplan/io.hpp"

namespace trainplan::app {

class FilePresets final : public PresetLookup {
public:
    explicit FilePresets(std::vector<std::string> extra_dirs);

    std::optional<TextSource> find(PresetKind kind, std::string_view name) override;
    std::vector<std::string> names(PresetKind kind) override;
    std::optional<TextSource> read_file(const std::string& path, std::string& why) override;
    // Hugging Face ids: local cache, then data/hf-ids.toml (defined in hub.cpp).
    std::optional<TextSource> hub_model(const std::string& id, std::string& why) override;

    // Every preset file of a kind, first-match-wins order applied.
    std::vector<TextSource> all(PresetKind kind);
    [[nodiscard]] const std::vector<std::string>& roots() const { return roots_; }

private:
    std::vector<std::string> roots_;
};

// Reads a whole file; false with a reason on failure.
bool read_text_file(const std::string& path, std::string& text, std::string& why);

}  // namespace trainplan::app
