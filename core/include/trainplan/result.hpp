// Result<T>: a value or the diagnostics explaining why there is none.
// Bad input is reported through this type (never by exceptions escaping core,
// never by printing); infeasible configurations are ordinary values with reasons.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace trainplan {

// One message about one place in one input. `file` is whatever the caller named
// the text ("models/foo.toml", "--gpus", "config.json"); line/column are 1-based,
// 0 when unknown.
struct Diagnostic {
    std::string file;
    int line = 0;
    int column = 0;
    std::string key;      // offending key or flag, when there is one
    std::string message;  // names the value and the constraint it breaks

    // "file:line:col: error: message" (parts that are unknown are left out).
    [[nodiscard]] std::string to_string() const;
};

struct Error {
    std::vector<Diagnostic> diagnostics;

    Error() = default;
    explicit Error(Diagnostic d) { diagnostics.push_back(std::move(d)); }
    explicit Error(std::vector<Diagnostic> ds) : diagnostics(std::move(ds)) {}

    // All diagnostics, one per line.
    [[nodiscard]] std::string message() const;
};

// Same member names as std::expected so the switch is mechanical later.
template <class T>
class Result {
public:
    Result(T value) : v_(std::move(value)) {}            // NOLINT(google-explicit-constructor)
    Result(Error error) : v_(std::move(error)) {}        // NOLINT(google-explicit-constructor)
    Result(Diagnostic d) : v_(Error(std::move(d))) {}    // NOLINT(google-explicit-constructor)

    [[nodiscard]] bool has_value() const { return v_.index() == 0; }
    explicit operator bool() const { return has_value(); }

    T& value() & { assert(has_value()); return std::get<0>(v_); }
    const T& value() const& { assert(has_value()); return std::get<0>(v_); }
    T&& value() && { assert(has_value()); return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    [[nodiscard]] const Error& error() const { assert(!has_value()); return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

}  // namespace trainplan
