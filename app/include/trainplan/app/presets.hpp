// File-system preset lookup: --presets DIRs, the user's config directory, the
// installed share/trainplan, and (for build trees) the source tree, first match wins.
// The first two are the user's; a user preset with the name of a shipped one hides
// it, and that is reported (once per name) to the notice sink and by shadowed().
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "trainplan/io.hpp"

namespace trainplan::app {

class FilePresets final : public PresetLookup {
public:
    using NoticeSink = std::function<void(const std::string&)>;
    explicit FilePresets(std::vector<std::string> extra_dirs, NoticeSink notices = {});

    std::optional<TextSource> find(PresetKind kind, std::string_view name) override;
    std::vector<std::string> names(PresetKind kind) override;
    std::optional<TextSource> read_file(const std::string& path, std::string& why) override;
    // Hugging Face ids: local cache, then data/hf-ids.toml (defined in hub.cpp).
    std::optional<TextSource> hub_model(const std::string& id, std::string& why) override;

    // Every preset file of a kind, first-match-wins order applied.
    std::vector<TextSource> all(PresetKind kind);
    [[nodiscard]] const std::vector<std::string>& roots() const { return roots_; }

    // The shipped file a user preset of that name hides (empty when it hides none).
    std::string shadowed(PresetKind kind, std::string_view name);

private:
    std::vector<std::string> roots_;
    size_t user_roots_ = 0;  // roots_[0, user_roots_) are the user's
    NoticeSink notices_;
    std::set<std::string> noticed_;
};

// Reads a whole input: a regular file of at most kMaxInputBytes
// (trainplan/input_limits.hpp), or standard input when `path` is "-". Anything
// else (a FIFO, a device, a directory, a larger file) is refused with a reason in
// `why`, without blocking or reading it.
bool read_text_file(const std::string& path, std::string& text, std::string& why);

// "a FIFO", "a character device", "a directory", ... for a stat() st_mode.
std::string file_type_name(unsigned mode);

}  // namespace trainplan::app
