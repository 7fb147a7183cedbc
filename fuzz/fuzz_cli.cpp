// The command-line layer: one argument per input line, run in-process. Output
// never contains NaN or infinity; the exit code is one of 0, 1, 2.
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    std::vector<std::string> args{"trainplan"};
    std::string cur;
    for (size_t i = 0; i < size && args.size() < 40; ++i) {
        const char c = static_cast<char>(data[i]);
        if (c == '\n') { args.push_back(cur); cur.clear(); }
        else if (cur.size() < 200) cur += c;
    }
    if (!cur.empty()) args.push_back(cur);
    for (const auto& a : args) {
        // No file output, no extra preset directories, no whole-catalogue sizing
        // or validation runs (slow by design, not by bug).
        if (a == "-o" || a.rfind("--output", 0) == 0 || a.rfind("--presets", 0) == 0 || a == "size" || a == "validate" ||
            a.rfind("--min-gpus", 0) == 0 || a.rfind("--max-gpus", 0) == 0 || a.rfind("--scenario", 0) == 0 || a.find('/') != std::string::npos)
            return 0;
    }
    std::ostringstream out, err;
    const int rc = trainplan::cli::run(args, out, err);
    fuzz::require(rc == 0 || rc == 1 || rc == 2);
    // No NaN or infinity printed as a number: look at whole words only.
    std::string word;
    for (char c : out.str() + " ") {
        if (std::isalnum(static_cast<unsigned char>(c))) { word += static_cast<char>(std::tolower(static_cast<unsigned char>(c))); continue; }
        fuzz::require(word != "nan" && word != "inf");  // how fmt prints non-finite numbers
        word.clear();
    }
    if (rc == 2) fuzz::require(!err.str().empty());
    return 0;
}
