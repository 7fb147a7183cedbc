// Internal: typed, range-checked reads from a toml++ table with diagnostics that
// name the file, line, key, value and constraint; unknown keys are reported.
#pragma once

#include <toml++/toml.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "trainplan/input_limits.hpp"
#include "trainplan/io.hpp"
#include "trainplan/result.hpp"

namespace trainplan::detail {

inline std::string fmt_num(double v) {
    std::ostringstream o;
    o.precision(12);
    o << v;
    return o.str();
}

class TomlReader {
public:
    TomlReader(const toml::table& t, std::string file, std::string section, std::vector<Diagnostic>& errs)
        : t_(t), file_(std::move(file)), section_(std::move(section)), errs_(errs) {}

    Origin origin(const std::string& key) const {
        if (const toml::node* n = t_.get(key)) return {file_, static_cast<int>(n->source().begin.line), static_cast<int>(n->source().begin.column)};
        // A key of a subtable, as "vision.image_size".
        if (key.find('.') != std::string::npos)
            if (const toml::node* n = t_.at_path(key).node()) return {file_, static_cast<int>(n->source().begin.line), static_cast<int>(n->source().begin.column)};
        return {file_, static_cast<int>(t_.source().begin.line), static_cast<int>(t_.source().begin.column)};
    }

    void error(const std::string& key, const std::string& msg) {
        const Origin o = origin(key);
        errs_.push_back({o.file, o.line, o.column, key, msg});
    }

    bool has(const std::string& key) const { return t_.contains(key); }

    std::optional<std::int64_t> integer(const std::string& key, std::int64_t lo, std::int64_t hi, bool required = false) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) { if (required) missing(key); return std::nullopt; }
        std::optional<std::int64_t> v = n->value_exact<std::int64_t>();
        if (!v) {
            if (auto d = n->value_exact<double>(); d && std::floor(*d) == *d && std::fabs(*d) < 9e15) v = static_cast<std::int64_t>(*d);
        }
        if (!v) { error(key, key + " = " + repr(*n) + " must be an integer"); return std::nullopt; }
        if (*v < lo || *v > hi) {
            error(key, key + " = " + std::to_string(*v) + (*v < lo ? " must be at least " + std::to_string(lo)
                                                                   : " exceeds the maximum " + std::to_string(hi)));
            return std::nullopt;
        }
        return v;
    }

    std::optional<double> number(const std::string& key, double lo, double hi, bool required = false) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) { if (required) missing(key); return std::nullopt; }
        std::optional<double> v;
        if (auto d = n->value_exact<double>()) v = *d;
        else if (auto i = n->value_exact<std::int64_t>()) v = static_cast<double>(*i);
        if (!v || !std::isfinite(*v)) { error(key, key + " = " + repr(*n) + " must be a finite number"); return std::nullopt; }
        if (*v < lo || *v > hi) {
            error(key, key + " = " + fmt_num(*v) + (*v < lo ? " must be at least " + fmt_num(lo) : " exceeds the maximum " + fmt_num(hi)));
            return std::nullopt;
        }
        return v;
    }

    std::optional<std::string> string(const std::string& key, bool required = false) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) { if (required) missing(key); return std::nullopt; }
        if (auto s = n->value_exact<std::string>()) return *s;
        error(key, key + " = " + repr(*n) + " must be a string");
        return std::nullopt;
    }

    std::optional<bool> boolean(const std::string& key) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) return std::nullopt;
        if (auto b = n->value_exact<bool>()) return *b;
        error(key, key + " = " + repr(*n) + " must be true or false");
        return std::nullopt;
    }

    // A string from a fixed set, mapped by `parse`.
    template <class T, class F>
    std::optional<T> choice(const std::string& key, F parse, const char* allowed, bool required = false) {
        auto s = string(key, required);
        if (!s) return std::nullopt;
        std::optional<T> v = parse(*s);
        if (!v) error(key, key + " = \"" + *s + "\" is not one of: " + allowed);
        return v;
    }

    const toml::table* subtable(const std::string& key) {
        known_.insert(key);
        const toml::node* n = t_.get(key);
        if (!n) return nullptr;
        if (const toml::table* tt = n->as_table()) return tt;
        error(key, key + " must be a table ([" + key + "])");
        return nullptr;
    }

    void ignore(const std::string& key) { known_.insert(key); }

    // Reports every key that was never asked for.
    void finish(const std::vector<std::string>& candidates = {}) {
        for (const auto& [k, node] : t_) {
            const std::string key(k.str());
            if (known_.count(key)) continue;
            std::vector<std::string> all(known_.begin(), known_.end());
            all.insert(all.end(), candidates.begin(), candidates.end());
            std::string msg = "unknown key \"" + key + "\" in " + section_;
            auto near = closest_names(key, all, 1);
            if (!near.empty()) msg += " (did you mean \"" + near.front() + "\"?)";
            const Origin o{file_, static_cast<int>(node.source().begin.line), static_cast<int>(node.source().begin.column)};
            errs_.push_back({o.file, o.line, o.column, key, msg});
        }
    }

private:
    void missing(const std::string& key) {
        errs_.push_back({file_, 0, 0, key, "missing required key \"" + key + "\" in " + section_});
    }
    static std::string repr(const toml::node& n) {
        std::ostringstream o;
        if (n.is_string()) o << '"' << *n.value<std::string>() << '"';
        else if (n.is_table()) o << "{table}";
        else if (n.is_array()) o << "[array]";
        else if (auto d = n.value_exact<double>()) o << fmt_num(*d);  // 2.2, not 2.2000000000000002
        else n.visit([&o](auto&& v) { o << v; });
        return o.str();
    }

    const toml::table& t_;
    std::string file_, section_;
    std::vector<Diagnostic>& errs_;
    std::set<std::string> known_;
};

// Parses a document; on a syntax error returns the diagnostic.
inline std::optional<Diagnostic> parse_document(std::string_view text, const std::string& filename, toml::table& out) {
    if (auto too_big = check_input_limits(text, filename, InputFormat::Toml)) return too_big;
    try {
        out = toml::parse(text, filename);
    } catch (const toml::parse_error& e) {
        return Diagnostic{filename, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column), "",
                          "invalid TOML: " + std::string(e.description())};
    }
    return std::nullopt;
}

}  // namespace trainplan::detail
