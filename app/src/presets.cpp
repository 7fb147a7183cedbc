#include "trainplan/app/presets.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainplan/input_limits.hpp"

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

// Reads at most kMaxInputBytes + 1 bytes from `fd` (one more tells "too large").
bool read_bounded(int fd, std::string& text, std::string& why) {
    text.clear();
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { why = std::strerror(errno); return false; }
        if (n == 0) return true;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > kMaxInputBytes) {
            why = "larger than the input limit of " + std::to_string(kMaxInputBytes) + " bytes (4 MiB)";
            text.clear();
            return false;
        }
    }
}

}  // namespace

std::string file_type_name(unsigned m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

bool read_text_file(const std::string& path, std::string& text, std::string& why) {
    if (path == "-") return read_bounded(STDIN_FILENO, text, why);
    // O_NONBLOCK: opening a FIFO must not wait for a writer (the type is checked next).
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) { why = std::strerror(errno); return false; }
    struct stat st {};
    bool ok = ::fstat(fd, &st) == 0;
    if (!ok) why = std::strerror(errno);
    else if (!S_ISREG(st.st_mode)) {
        why = "not a regular file (" + file_type_name(st.st_mode) + "); inputs must be regular files, or - for standard input";
        ok = false;
    } else if (static_cast<std::uintmax_t>(st.st_size) > kMaxInputBytes) {
        why = std::to_string(st.st_size) + " bytes, larger than the input limit of " + std::to_string(kMaxInputBytes) + " bytes (4 MiB)";
        ok = false;
    } else {
        ok = read_bounded(fd, text, why);
    }
    ::close(fd);
    return ok;
}

FilePresets::FilePresets(std::vector<std::string> extra_dirs, NoticeSink notices)
    : roots_(std::move(extra_dirs)), notices_(std::move(notices)) {
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) roots_.push_back(std::string(xdg) + "/trainplan");
    else if (const char* home = std::getenv("HOME"); home && *home) roots_.push_back(std::string(home) + "/.config/trainplan");
    user_roots_ = roots_.size();
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) roots_.push_back((exe.parent_path().parent_path() / TRAINPLAN_DATA_SUBDIR).string());
    // Build trees find the presets in the source tree (tests of the installed
    // layout switch this off).
    if (!std::getenv("TRAINPLAN_NO_BUILD_TREE_PRESETS")) roots_.push_back(TRAINPLAN_SOURCE_DIR);
}

namespace {

// The first regular file named `file` under roots [from, to), or empty.
fs::path first_in(const std::vector<std::string>& roots, size_t from, size_t to, const fs::path& file) {
    for (size_t i = from; i < to && i < roots.size(); ++i) {
        const fs::path p = fs::path(roots[i]) / file;
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) return p;
    }
    return {};
}

}  // namespace

std::string FilePresets::shadowed(PresetKind kind, std::string_view name) {
    const std::string n = normalize(name);
    const fs::path rel = fs::path(subdir(kind)) / (n + ".toml");
    const fs::path user = first_in(roots_, 0, user_roots_, rel);
    const fs::path shipped = first_in(roots_, user_roots_, roots_.size(), rel);
    if (user.empty() || shipped.empty()) return {};
    std::error_code ec;
    if (fs::equivalent(user, shipped, ec)) return {};  // --presets naming the shipped folder itself
    return shipped.string();
}

std::optional<TextSource> FilePresets::find(PresetKind kind, std::string_view name) {
    const std::string n = normalize(name);
    if (n.empty() || n.find('/') != std::string::npos || n.find("..") != std::string::npos) return std::nullopt;
    const fs::path p = first_in(roots_, 0, roots_.size(), fs::path(subdir(kind)) / (n + ".toml"));
    if (p.empty()) return std::nullopt;
    TextSource src;
    src.filename = p.string();
    src.id = n;
    std::string why;
    if (!read_text_file(p.string(), src.text, why)) {
        // Reported, not skipped silently: the lookup then says the preset is unknown.
        if (notices_ && noticed_.insert(src.filename).second) notices_(src.filename + ": error: cannot read preset: " + why);
        return std::nullopt;
    }
    if (notices_) {
        if (const std::string hidden = shadowed(kind, n); !hidden.empty() && noticed_.insert(src.filename).second)
            notices_(src.filename + ": note: user " + std::string(to_string(kind)) + " preset \"" + n + "\" shadows the shipped " + hidden);
    }
    return src;
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
