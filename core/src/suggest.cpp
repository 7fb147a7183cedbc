// "Did you mean": candidates ranked by what the user most likely meant, not by raw
// edit distance alone. A user who types `a100` wants one of the A100 presets, not
// `a10` (distance 1) or `b100` (distance 1); a user who types `rtx4080` wants another
// RTX card. So the ranking is in tiers, and edit distance only orders within a tier:
//   0. the same name once case and punctuation are ignored ("rtx4090" -> "rtx-4090");
//   1. the name starts with what was typed, at a word boundary ("a100" -> "a100-sxm-80gb"),
//      shorter (less specialised) names first;
//   2. the same family: the name's first word starts what was typed and ends at a
//      letter/digit boundary ("rtx4080" -> "rtx-4090", "llama-2-14b" -> "llama-2-13b";
//      "a100" is not of family "a10", whose number would continue);
//   3. anything within a small edit distance (typos: "lama-2-7b" -> "llama-2-7b").
#include <algorithm>
#include <cctype>
#include <tuple>

#include "trainplan/io.hpp"

namespace trainplan {

namespace {

std::string lower(std::string_view s) {
    std::string r;
    for (char c : s) r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

// Letters, digits and '.', lower case: "RTX-4090" and "rtx4090" compare equal.
std::string strip(std::string_view s) {
    std::string r;
    for (char c : s)
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// `name` starts with `typed` and the next character of `name` (if any) is not a
// continuation of the same word: "a100" is a prefix of "a100-sxm-80gb" but not of "a1000".
bool word_prefix(const std::string& typed, const std::string& name) {
    if (typed.empty() || name.size() < typed.size() || name.compare(0, typed.size(), typed) != 0) return false;
    if (name.size() == typed.size()) return true;
    const char last = typed.back(), next = name[typed.size()];
    if (!is_word_char(next) || !is_word_char(last)) return true;
    return std::isdigit(static_cast<unsigned char>(last)) != std::isdigit(static_cast<unsigned char>(next));
}

// The family of a preset name: its first word ("rtx" of "rtx-4090", "llama" of
// "llama-2-13b", "a100" of "a100-sxm-80gb"). Flags ("--method") have none.
std::string family(const std::string& name) {
    size_t i = 0;
    while (i < name.size() && !is_word_char(name[i])) ++i;
    if (i > 0) return {};
    size_t j = i;
    while (j < name.size() && name[j] != '-' && name[j] != '_' && name[j] != '.') ++j;
    return name.substr(i, j - i);
}

// The typed text belongs to the family if it starts with it and the family's last
// character does not run on into the typed text's next one (letter->digit or a
// separator ends a word; digit->digit does not: "a100" is not family "a10").
bool in_family(const std::string& typed, const std::string& fam) {
    if (fam.size() < 2 || typed.size() < fam.size() || typed.compare(0, fam.size(), fam) != 0) return false;
    if (typed.size() == fam.size()) return true;
    const char last = fam.back(), next = typed[fam.size()];
    if (!is_word_char(next)) return true;
    return std::isdigit(static_cast<unsigned char>(last)) != std::isdigit(static_cast<unsigned char>(next));
}

}  // namespace

std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& names, size_t max) {
    const std::string typed = lower(name), typed_s = strip(name);
    // (tier, distance, length, name)
    std::vector<std::tuple<int, size_t, size_t, std::string>> scored;
    for (const auto& n : names) {
        const std::string cand = lower(n), cand_s = strip(n);
        if (cand == typed) continue;  // not a suggestion for itself
        const size_t d = edit_distance(typed_s, cand_s);
        int tier = -1;
        if (!typed_s.empty() && typed_s == cand_s) tier = 0;
        else if (word_prefix(typed, cand)) tier = 1;
        else if (in_family(typed, family(cand))) tier = 2;
        else {
            size_t dd = d;
            // A fragment of the name ("4090" for "rtx-4090") counts as close.
            if (!typed_s.empty() && cand_s.find(typed_s) != std::string::npos) dd = std::min(dd, (cand_s.size() - typed_s.size()) / 2);
            const size_t limit = std::max<size_t>(2, std::min(typed_s.size(), cand_s.size()) / 3);
            if (dd <= limit) { tier = 3; scored.emplace_back(tier, dd, cand.size(), n); continue; }
        }
        if (tier < 0) continue;
        scored.emplace_back(tier, tier == 1 ? 0 : d, cand.size(), n);
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) {
        if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) < std::get<0>(y);
        if (std::get<1>(x) != std::get<1>(y)) return std::get<1>(x) < std::get<1>(y);
        // Among prefix matches the shorter, less specialised name first.
        if (std::get<0>(x) == 1 && std::get<2>(x) != std::get<2>(y)) return std::get<2>(x) < std::get<2>(y);
        return false;
    });
    std::vector<std::string> out;
    for (size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(std::get<3>(scored[i]));
    return out;
}

}  // namespace trainplan

namespace trainplan {

// Hub ids are ORG/NAME with letters, digits, '-', '_' and '.' (huggingface_hub's
// REPO_ID_REGEX); a path with a directory part of "." or "..", a leading '/' or a
// model-file extension is a path, not an id.
bool looks_like_hub_id(std::string_view s) {
    const size_t slash = s.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 >= s.size()) return false;
    if (s.find('/', slash + 1) != std::string_view::npos) return false;
    const std::string_view org = s.substr(0, slash), name = s.substr(slash + 1);
    for (std::string_view part : {org, name}) {
        if (part == "." || part == ".." || part.front() == '.' || part.front() == '-') return false;
        for (char c : part)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
    }
    auto ends = [&](std::string_view suf) {
        return name.size() >= suf.size() && lower(name.substr(name.size() - suf.size())) == suf;
    };
    return !ends(".toml") && !ends(".json");
}

}  // namespace trainplan
