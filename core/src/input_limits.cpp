// A flat scan for nesting depth before a recursive parser sees the text. It is
// not a parser: it only follows strings, comments and brackets well enough to
// bound the depth any parse could reach (malformed text is left to the parser).
#include "trainplan/input_limits.hpp"

#include <vector>

namespace trainplan {

namespace {

struct Cursor {
    std::string_view text;
    size_t i = 0;
    int line = 1, column = 1;

    [[nodiscard]] bool done() const { return i >= text.size(); }
    [[nodiscard]] char peek(size_t ahead = 0) const { return i + ahead < text.size() ? text[i + ahead] : '\0'; }
    [[nodiscard]] bool starts(std::string_view s) const { return text.substr(i, s.size()) == s; }
    char next() {
        const char c = text[i++];
        if (c == '\n') { ++line; column = 1; }
        else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++column;  // count UTF-8 characters
        return c;
    }
    // Skips a string opened at the cursor: "...", '...', """...""" or '''...'''
    // (backslash escapes only in the double-quoted forms).
    void skip_string(bool allow_multi = true) {
        const char q = peek();
        const bool multi = allow_multi && peek(1) == q && peek(2) == q;
        const std::string_view close = multi ? text.substr(i, 3) : text.substr(i, 1);
        for (size_t k = 0; k < close.size(); ++k) next();
        while (!done()) {
            if (q == '"' && peek() == '\\') { next(); if (!done()) next(); continue; }
            if (!multi && peek() == '\n') return;  // unterminated: the parser reports it
            if (starts(close)) {
                for (size_t k = 0; k < close.size(); ++k) next();
                return;
            }
            next();
        }
    }
    void skip_comment() {
        while (!done() && peek() != '\n') next();
    }
};

Diagnostic too_deep(const std::string& filename, const Cursor& c, int depth) {
    return {filename, c.line, c.column, "",
            "nesting depth " + std::to_string(depth) + " exceeds the maximum " + std::to_string(kMaxNestingDepth) +
                " (tables, dotted keys, arrays and inline tables nested inside each other)"};
}

// TOML: the depth of a container is how many containers hold it, itself
// included: a header [a.b.c] is a table at depth 3; under it x.y = 1 makes the
// table x at depth 4; an array or inline table as a value sits one deeper than
// the table holding its key (or the array holding it).
std::optional<Diagnostic> toml_depth(std::string_view text, const std::string& filename) {
    struct Frame {
        char kind;  // '[' array, '{' inline table
        int depth;  // the container's own depth
    };
    std::vector<Frame> open;
    Cursor c{text};
    int table_depth = 0;  // from the last [header]
    bool in_key = true;   // reading a key (else a value)
    bool line_start = true;
    int key_dots = 0, value_depth = 0;  // value_depth: the depth the next value would have
    auto container = [&] { return open.empty() ? table_depth : open.back().depth; };
    auto after_close = [&] {
        if (!open.empty() && open.back().kind == '[') value_depth = open.back().depth + 1;
    };
    while (!c.done()) {
        const char ch = c.peek();
        if (ch == '#') { c.skip_comment(); continue; }
        if (ch == '"' || ch == '\'') { c.skip_string(); line_start = false; continue; }
        if (ch == '\n') {
            c.next();
            if (open.empty()) { in_key = true; key_dots = 0; line_start = true; }
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\r') { c.next(); continue; }
        if (in_key) {
            if (ch == '[' && open.empty() && line_start) {  // [header] or [[array.of.tables]]
                int dots = 0;
                c.next();
                while (!c.done() && c.peek() != ']' && c.peek() != '\n') {
                    if (c.peek() == '"' || c.peek() == '\'') { c.skip_string(); continue; }
                    if (c.peek() == '.' && ++dots + 1 > kMaxNestingDepth) return too_deep(filename, c, dots + 1);
                    c.next();
                }
                table_depth = dots + 1;
                line_start = false;
                continue;
            }
            line_start = false;
            if (ch == '.') {  // a.b.c = : a and b are tables
                if (container() + ++key_dots > kMaxNestingDepth) return too_deep(filename, c, container() + key_dots);
            } else if (ch == '=') {
                value_depth = container() + key_dots + 1;
                in_key = false;
            } else if (ch == '}' && !open.empty() && open.back().kind == '{') {  // {} or a trailing comma
                open.pop_back();
                in_key = false;
                after_close();
            }
            c.next();
            continue;
        }
        // value
        if (ch == '[' || ch == '{') {
            if (value_depth > kMaxNestingDepth) return too_deep(filename, c, value_depth);
            open.push_back({ch, value_depth});
            if (ch == '[') value_depth = open.back().depth + 1;
            else { in_key = true; key_dots = 0; }
        } else if (ch == ',' && !open.empty()) {
            if (open.back().kind == '{') { in_key = true; key_dots = 0; }
            else value_depth = open.back().depth + 1;
        } else if ((ch == ']' || ch == '}') && !open.empty()) {
            open.pop_back();
            after_close();
        }
        c.next();
    }
    return std::nullopt;
}

std::optional<Diagnostic> json_depth(std::string_view text, const std::string& filename) {
    Cursor c{text};
    int depth = 0;
    while (!c.done()) {
        const char ch = c.peek();
        if (ch == '"') { c.skip_string(false); continue; }
        if (ch == '[' || ch == '{') {
            if (++depth > kMaxNestingDepth) return too_deep(filename, c, depth);
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            --depth;
        }
        c.next();
    }
    return std::nullopt;
}

}  // namespace

std::optional<Diagnostic> check_input_limits(std::string_view text, const std::string& filename, InputFormat format) {
    if (text.size() > kMaxInputBytes)
        return Diagnostic{filename, 0, 0, "",
                          "input of " + std::to_string(text.size()) + " bytes exceeds the maximum " + std::to_string(kMaxInputBytes) +
                              " bytes (4 MiB)"};
    return format == InputFormat::Toml ? toml_depth(text, filename) : json_depth(text, filename);
}

}  // namespace trainplan
