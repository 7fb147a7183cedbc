#include "trainplan/app/presets.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace trainplan::app {

namespace {

const char* subdir(PresetKind k) {
    switch (k) {
        case PresetKind::Model: return "models";
        case PresetKind::Gpu: return "hardware/gpu";
        case PresetKind::Link: return "hardware/link";
        case PresetKind::Node: return "hardware/node";
    }
    return "";
}

std::string normalize(std::string_view name) {
    std::string r(name);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

}  // namespace

bool read_text_file(const std::string& path, std::string& text, std::string& why) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) { why = "is a directory"; return false; }
    std::ifstream in(path, std::ios::binary);
    if (!in) { why = std::strerror(errno); return false; }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    return true;
}

FilePresets::FilePresets(std::vector<std::string> extra_dirs) : roots_(std::move(extra_dirs)) {
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) roots_.push_back(std::string(xdg) + "/trainplan");
    else if (const char* home = std::getenv("HOME"); home && *home) roots_.push_back(std::string(home) + "/.config/trainplan");
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) roots_.push_back((exe.parent_path().parent_path() / TRAINPLAN_DATA_SUBDIR).string());
    // Build trees find the presets in the source tree (tests of the installed
    // layout switch this off).
    if (!std::getenv("TRAINPLAN_NO_BUILD_TREE_PRESETS")) roots_.push_back(TRAINPLAN_SOURCE_DIR);
}

std::optional<TextSource> FilePresets::find(PresetKind kind, std::string_view name) {
    const std::string n = normalize(name);
    if (n.empty() || n.find('/') != std::string::npos || n.find("..") != std::string::npos) return std::nullopt;
    for (const auto& root : roots_) {
        const fs::path p = fs::path(root) / subdir(kind) / (n + ".toml");
        std::error_code ec;
        if (!fs::is_regular_file(p, ec)) continue;
        TextSource src;
        std::string why;
        if (!read_text_file(p.string(), src.text, why)) continue;
        src.filename = p.string();
        src.id = n;
        return src;
    }
    return std::nullopt;
}

std::vector<std::string> FilePresets::names(PresetKind kind) {
    std::set<std::string> out;
    for (const auto& root : roots_) {
        std::error_code ec;
        const fs::path dir = fs::path(root) / subdir(kind);
        if (!fs::is_directory(dir, ec)) continue;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".toml") out.insert(e.path().stem().string());
    }
    return {out.begin(), out.end()};
}

std::vector<TextSource> FilePresets::all(PresetKind kind) {
    std::vector<TextSource> out;
    for (const auto& n : names(kind))
        if (auto s = find(kind, n)) out.push_back(std::move(*s));
    return out;
}

std::optional<TextSource> FilePresets::read_file(const std::string& path, std::string& why) {
    TextSource src;
    if (!read_text_file(path, src.text, why)) return std::nullopt;
    src.filename = path;
    src.id = fs::path(path).stem().string();
    return src;
}

}  // namespace trainplan::app
