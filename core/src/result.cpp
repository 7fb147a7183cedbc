#include "trainplan/result.hpp"

#include <sstream>

namespace trainplan {

std::string Diagnostic::to_string() const {
    std::ostringstream out;
    if (!file.empty()) {
        out << file;
        if (line > 0) {
            out << ':' << line;
            if (column > 0) out << ':' << column;
        }
        out << ": ";
    }
    out << "error: " << message;
    return out.str();
}

std::string Error::message() const {
    std::string s;
    for (const auto& d : diagnostics) {
        if (!s.empty()) s += '\n';
        s += d.to_string();
    }
    return s;
}

}  // namespace trainplan
