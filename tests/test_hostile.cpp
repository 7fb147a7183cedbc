// Hostile input and faults (issue 16): each case quotes its reproducer. Input
// that could crash, hang, inject or clobber gets exit 2 and a message naming the
// file and the limit; output files are replaced only safely.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/app/presets.hpp"
#include "trainplan/app/report.hpp"
#include "trainplan/input_limits.hpp"

namespace fs = std::filesystem;
using tp_test::cli;

namespace {

// A fresh private directory, removed afterwards.
struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "trainplan-hostile-XXXXXX").string();
        REQUIRE(::mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    [[nodiscard]] std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Sets an environment variable for one scope.
struct ScopedEnv {
    std::string name;
    std::optional<std::string> old;
    ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
        if (const char* v = std::getenv(name.c_str())) old = v;
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old) ::setenv(name.c_str(), old->c_str(), 1);
        else ::unsetenv(name.c_str());
    }
};

// Changes the working directory for one scope.
struct ScopedCwd {
    fs::path old = fs::current_path();
    explicit ScopedCwd(const fs::path& p) { fs::current_path(p); }
    ~ScopedCwd() { fs::current_path(old); }
};

// The issue's reproducer: one table header 40,000 levels deep, an 80 kB line.
std::string deep_header(int levels) {
    std::string s = "[a";
    for (int i = 1; i < levels; ++i) s += ".a";
    return s + "]\n";
}

// The 64th dot of "[a.a.a..." is at column 1 + 2 x 64 = 129: depth 65 there.
const std::string kDeepMessage =
    ":1:129: error: nesting depth 65 exceeds the maximum 64 (tables, dotted keys, arrays and inline tables nested inside each other)\n";

}  // namespace

TEST_CASE("1: a TOML header nested 40,000 deep is rejected before the TOML library sees it", "[hostile][limits]") {
    TempDir d;
    const std::string deep = d / "deep.toml";
    write(deep, deep_header(40000));
    REQUIRE(fs::file_size(deep) == 80002);  // "[a" + 39,999 x ".a" + "]\n"

    SECTION("trainplan fit deep.toml --gpu h100-sxm") {
        const auto r = cli({"fit", deep, "--gpu", "h100-sxm"});
        CHECK(r.code == 2);
        CHECK(r.err == deep + kDeepMessage);
    }
    SECTION("trainplan fit --scenario deep.toml --gpu h100-sxm") {
        const auto r = cli({"fit", "--scenario", deep, "--gpu", "h100-sxm"});
        CHECK(r.code == 2);
        CHECK(r.err == deep + kDeepMessage);
    }
    SECTION("dropped into the user preset folder: gpus and size report it, no crash") {
        const std::string user = d / "config";
        const std::string preset = user + "/trainplan/hardware/gpu/deep.toml";
        write(preset, deep_header(40000));
        ScopedEnv xdg("XDG_CONFIG_HOME", user);
        const auto g = cli({"gpus"});
        CHECK(g.code == 2);
        CHECK(g.err == preset + kDeepMessage);
        const auto s = cli({"size", "llama-2-7b", "--tokens", "1e12", "--deadline-days", "30"});
        CHECK(s.code == 2);
        CHECK(s.err == preset + kDeepMessage);
        CHECK(s.out.empty());
    }
}

TEST_CASE("1: nesting depth: the limit is 64 levels in every TOML form and in JSON", "[hostile][limits]") {
    using trainplan::check_input_limits;
    using trainplan::InputFormat;
    auto depth_error = [](const std::string& text, InputFormat f) {
        auto d = check_input_limits(text, "x", f);
        return d ? d->to_string() : std::string();
    };
    // 64 levels pass, 65 do not (header a.a...: 63 dots = 64 levels).
    CHECK(depth_error(deep_header(64), InputFormat::Toml).empty());
    CHECK(depth_error(deep_header(65), InputFormat::Toml) == "x" + kDeepMessage.substr(0, kDeepMessage.size() - 1));
    // Dotted keys under a header add up: [t] (1) then k.k. ... (64 dots: 64 more tables);
    // the 64th dot, at column 2 x 64 = 128 of line 2, makes depth 65.
    std::string dotted = "[t]\nk";
    for (int i = 0; i < 64; ++i) dotted += ".k";
    CHECK(depth_error(dotted + " = 1\n", InputFormat::Toml).find("x:2:128: error: nesting depth 65") == 0);
    // Arrays of arrays: x's value is the array at depth 1; the 65th '[' is at column 4 + 65 = 69.
    CHECK(depth_error("x = " + std::string(65, '[') + std::string(65, ']') + "\n", InputFormat::Toml)
              .find("x:1:69: error: nesting depth 65") == 0);
    CHECK(depth_error("x = " + std::string(64, '[') + std::string(64, ']') + "\n", InputFormat::Toml).empty());
    // Inline tables: x (1) then {k = (each adds the key's level).
    std::string inl = "x = ";
    for (int i = 0; i < 70; ++i) inl += "{k = ";
    CHECK_FALSE(depth_error(inl + "1" + std::string(70, '}') + "\n", InputFormat::Toml).empty());
    // Dots in numbers, strings and comments are not nesting.
    std::string floats = "x = [";
    for (int i = 0; i < 200; ++i) floats += "1.5, ";
    CHECK(depth_error(floats + "2.5] # a.b.c.d\ny = \"" + std::string(200, '.') + "\"\n", InputFormat::Toml).empty());
    // JSON: {"a": nested 65 deep; the 65th '{' is at column 1 + 5 x 64 = 321.
    std::string js;
    for (int i = 0; i < 65; ++i) js += "{\"a\":";
    js += "1" + std::string(65, '}');
    CHECK(depth_error(js, InputFormat::Json) == "x:1:321: error: nesting depth 65 exceeds the maximum 64 (tables, dotted keys, arrays and "
                                                "inline tables nested inside each other)");
    CHECK(depth_error(R"({"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})", InputFormat::Json).empty());
    // A config.json 100,000 arrays deep through the command line: exit 2 at 1:65.
    TempDir d;
    const std::string cfg = d / "config.json";
    write(cfg, std::string(100000, '[') + std::string(100000, ']'));
    const auto r = cli({"fit", cfg, "--gpu", "rtx-4090"});
    CHECK(r.code == 2);
    CHECK(r.err.rfind(cfg + ":1:65: error: nesting depth 65 exceeds the maximum 64", 0) == 0);
}

TEST_CASE("2: no shell: the PDF is printed by a program started with an argument vector and a fixed environment", "[hostile][pdf]") {
    TempDir d;
    // A stub browser: records its arguments and environment, writes a PDF.
    const std::string stub = d / "bin/fake-chromium";
    write(stub, "#!/bin/sh\n: > '" + (d / "argv.log") + "'\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '" + (d / "argv.log") +
                    "'; done\nenv > '" + (d / "env.log") + "'\nfor a in \"$@\"; do case \"$a\" in --print-to-pdf=*) printf '%%PDF-1.4 stub\\n' > "
                    "\"${a#--print-to-pdf=}\";; esac; done\n");
    fs::permissions(stub, fs::perms::owner_all);
    ScopedEnv browser("TRAINPLAN_CHROMIUM", stub);
    ScopedEnv marker("TRAINPLAN_TEST_MARKER", "must-not-reach-the-browser");
    ScopedCwd cwd(d.path);
    const std::vector<std::string> goal{"size", "llama-2-7b", "--tokens", "1e10", "--deadline-days", "30", "--candidates", "h100-sxm"};

    SECTION("size -o \"x';touch INJECTED;'.pdf\" runs no touch") {
        const std::string name = "x';touch INJECTED;'.pdf";
        auto args = goal;
        args.insert(args.end(), {"-o", name});
        const auto r = cli(args);
        INFO(r.err);
        CHECK(r.code == 0);
        CHECK_FALSE(fs::exists(d / "INJECTED"));
        CHECK(slurp(d / name) == "%PDF-1.4 stub\n");
        // Every argument arrived as one: 11 flags and the page, nothing split or joined.
        std::vector<std::string> argv;
        std::istringstream log(slurp(d / "argv.log"));
        for (std::string line; std::getline(log, line);) argv.push_back(line);
        REQUIRE(argv.size() == 11);
        CHECK(argv[0] == "--headless");
        CHECK(argv[9].rfind("--print-to-pdf=", 0) == 0);
        CHECK(argv[10].rfind("file:///", 0) == 0);
        CHECK(argv[10].size() > 20);
        // The fixed environment: the caller's variables do not reach it.
        const std::string env = slurp(d / "env.log");
        CHECK(env.find("TRAINPLAN_TEST_MARKER") == std::string::npos);
        CHECK(env.find("PATH=/usr/local/bin:/usr/bin:/bin\n") != std::string::npos);
    }
    SECTION("a name with a quote and a space works: Bob's report.pdf") {
        auto args = goal;
        args.insert(args.end(), {"-o", "Bob's report.pdf"});
        const auto r = cli(args);
        INFO(r.err);
        CHECK(r.code == 0);
        CHECK(slurp(d / "Bob's report.pdf") == "%PDF-1.4 stub\n");
        CHECK(r.out.rfind("wrote Bob's report.pdf (pdf report)\n", 0) == 0);
    }
    SECTION("a browser that prints nothing is an error, and nothing is written") {
        write(stub, "#!/bin/sh\nexit 0\n");
        fs::permissions(stub, fs::perms::owner_all);
        auto args = goal;
        args.insert(args.end(), {"-o", "none.pdf"});
        const auto r = cli(args);
        CHECK(r.code == 2);
        CHECK(r.err == "error: cannot write report: none.pdf: " + stub + " could not print the report to PDF\n");
        CHECK_FALSE(fs::exists(d / "none.pdf"));
    }
}

TEST_CASE("3: the temporary file is new, unpredictable, and never followed through a planted link", "[hostile][files]") {
    TempDir d;
    const std::string victim = d / "victim.txt";
    write(victim, "precious\n");
    const std::string target = d / "report.md";
    // The old predictable name was .NAME.tmp-PID.
    const std::string planted = d / (".report.md.tmp-" + std::to_string(::getpid()));
    fs::create_symlink(victim, planted);
    std::string why;
    REQUIRE(trainplan::app::write_file_atomically(target, "new report\n", why));
    CHECK(slurp(victim) == "precious\n");
    CHECK(slurp(target) == "new report\n");
    CHECK(fs::is_symlink(planted));
    // Nothing else left behind: victim, link, report.
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path)) ++entries;
    CHECK(entries == 3);
}

TEST_CASE("7: -o replaces only regular files, keeps their permissions, and - is stdout", "[hostile][files]") {
    TempDir d;
    const std::vector<std::string> goal{"size", "llama-2-7b", "--tokens", "1e10", "--deadline-days", "30", "--candidates", "h100-sxm"};
    auto size_to = [&](const std::string& out) {
        auto args = goal;
        args.insert(args.end(), {"-o", out});
        return cli(args);
    };
    SECTION("a FIFO is refused without opening it (no hang)") {
        const std::string fifo = d / "report.md";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        const auto r = size_to(fifo);
        CHECK(r.code == 2);
        CHECK(r.err == "error: cannot write report: " + fifo +
                           ": is a FIFO; refusing to replace anything but a regular file (-o - writes to standard output)\n");
        struct stat st {};
        REQUIRE(::lstat(fifo.c_str(), &st) == 0);
        CHECK(S_ISFIFO(st.st_mode));
    }
    SECTION("a device is refused: -o /dev/null") {
        const auto r = size_to("/dev/null");
        CHECK(r.code == 2);
        CHECK(r.err.find("/dev/null: is a character device; refusing to replace anything but a regular file") != std::string::npos);
    }
    SECTION("a symbolic link (/dev/stdout is one) is refused, with the way to stdout named") {
        const std::string link = d / "link.md";
        fs::create_symlink("/dev/stdout", link);
        const auto r = size_to(link);
        CHECK(r.code == 2);
        CHECK(r.err.find(link + ": is a symbolic link; refusing to replace anything but a regular file (-o - writes to standard output)") !=
              std::string::npos);
        CHECK(fs::is_symlink(link));
    }
    SECTION("- writes the report to standard output") {
        const auto r = size_to("-");
        CHECK(r.code == 0);
        CHECK(r.out.rfind("# Training hardware sizing\n", 0) == 0);
        CHECK_FALSE(fs::exists("-"));
    }
    SECTION("a 0600 report stays 0600; a new one gets 0666 less the umask") {
        const std::string report = d / "report.md";
        write(report, "old\n");
        fs::permissions(report, fs::perms::owner_read | fs::perms::owner_write);
        std::string why;
        REQUIRE(trainplan::app::write_file_atomically(report, "new\n", why));
        CHECK(slurp(report) == "new\n");
        CHECK((fs::status(report).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
        const mode_t mask = ::umask(022);
        const std::string fresh = d / "fresh.md";
        REQUIRE(trainplan::app::write_file_atomically(fresh, "x\n", why));
        ::umask(mask);
        CHECK((fs::status(fresh).permissions() & fs::perms::all) ==
              (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
    }
}

TEST_CASE("5: invalid user presets are reported, shadowing user presets are named", "[hostile][presets]") {
    TempDir d;
    const std::string user = d / "config";
    ScopedEnv xdg("XDG_CONFIG_HOME", user);
    const std::string shipped_h100 = std::string(TRAINPLAN_SOURCE_DIR) + "/hardware/gpu/h100-sxm.toml";
    const std::string user_h100 = user + "/trainplan/hardware/gpu/h100-sxm.toml";

    SECTION("size with an invalid user GPU preset: exit 2 naming it, not a changed recommendation") {
        write(user + "/trainplan/hardware/gpu/my-gpu.toml", "name = \"Mine\"\nmemory_gib = -1\n");
        const auto r = cli({"size", "llama-2-7b", "--tokens", "1e12", "--deadline-days", "30"});
        CHECK(r.code == 2);
        CHECK(r.out.empty());
        CHECK(r.err.find(user + "/trainplan/hardware/gpu/my-gpu.toml:2:14: error: memory_gib = -1 must be at least") != std::string::npos);
    }
    SECTION("advise with an invalid user preset of an alternative GPU: exit 2 naming it") {
        write(user + "/trainplan/hardware/gpu/a100-sxm-80gb.toml", "name = 5\n");
        const auto r = cli({"advise", "llama-2-7b", "--gpu", "rtx-4090"});
        CHECK(r.code == 2);
        CHECK(r.err.find(user + "/trainplan/hardware/gpu/a100-sxm-80gb.toml:1:8: error: name = 5 must be a string") != std::string::npos);
    }
    SECTION("a user copy of h100-sxm is listed as shadowing the shipped one, and noted once on stderr") {
        std::string text = slurp(shipped_h100);
        const std::string name_line = "name = \"NVIDIA H100 SXM5 80GB\"";
        text.replace(text.find(name_line), name_line.size(), "name = \"My H100\"");
        write(user_h100, text);
        const auto r = cli({"gpus"});
        CHECK(r.code == 0);
        CHECK(r.out.find("My H100") != std::string::npos);
        CHECK(r.out.find("(user preset, shadows " + shipped_h100 + ")") != std::string::npos);
        CHECK(r.err == user_h100 + ": note: user GPU preset \"h100-sxm\" shadows the shipped " + shipped_h100 + "\n");
        const auto j = tp_test::cli_json("gpus", {});
        int shadowing = 0;
        for (const auto& g : j)
            if (!g["shadows"].is_null()) {
                ++shadowing;
                CHECK(g["id"] == "h100-sxm");
                CHECK(g["shadows"] == shipped_h100);
            }
        CHECK(shadowing == 1);
        // Any command that loads it says so once, however often it is looked up.
        const auto f = cli({"fit", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8"});
        CHECK(f.err == user_h100 + ": note: user GPU preset \"h100-sxm\" shadows the shipped " + shipped_h100 + "\n");
    }
    SECTION("models too") {
        const std::string shipped = std::string(TRAINPLAN_SOURCE_DIR) + "/models/gpt2.toml";
        write(user + "/trainplan/models/gpt2.toml", slurp(shipped));
        const auto r = cli({"models"});
        CHECK(r.code == 0);
        CHECK(r.out.find("user preset, shadows " + shipped) != std::string::npos);
        CHECK(r.err == user + "/trainplan/models/gpt2.toml: note: user model preset \"gpt2\" shadows the shipped " + shipped + "\n");
    }
}

TEST_CASE("6: [model] file = \"config.json\" resolves next to the scenario file", "[hostile][scenario]") {
    TempDir d;
    write(d / "run/config.json", slurp(tp_test::data("hf/llama-2-7b.config.json")));
    write(d / "run/scenario.toml", "[model]\nfile = \"config.json\"\n[hardware]\ngpu = \"a100-sxm-80gb\"\n");
    // Run from elsewhere (the test's directory has no config.json).
    REQUIRE_FALSE(fs::exists("config.json"));
    const auto r = cli({"fit", "--scenario", d / "run/scenario.toml", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 1);  // a full fine-tune of 7B does not fit one 80 GB card
    const auto j = nlohmann::json::parse(r.out);
    // Llama-2-7B: 6,738,415,616 parameters (design reference, exact from the architecture).
    CHECK(j["params"]["total"] == 6738415616LL);
}

TEST_CASE("8: inputs are regular files of at most 4 MiB, or - for standard input", "[hostile][limits]") {
    TempDir d;
    SECTION("reading /dev/zero gets a clear error, not unbounded memory") {
        const auto r = cli({"fit", "--scenario", "/dev/zero"});
        CHECK(r.code == 2);
        CHECK(r.err == "/dev/zero: error: cannot read scenario file: not a regular file (a character device); inputs must be regular "
                       "files, or - for standard input\n");
    }
    SECTION("a FIFO is refused without waiting for a writer") {
        const std::string fifo = d / "model.toml";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        const auto r = cli({"fit", fifo, "--gpu", "rtx-4090"});
        CHECK(r.code == 2);
        CHECK(r.err == fifo + ": error: cannot read model file: not a regular file (a FIFO); inputs must be regular files, or - for standard "
                              "input\n");
    }
    SECTION("a 5 MiB file is refused by size") {
        const std::string big = d / "big.toml";
        { std::ofstream(big) << ""; }
        fs::resize_file(big, 5u << 20);
        const auto r = cli({"fit", "--scenario", big});
        CHECK(r.code == 2);
        CHECK(r.err == big + ": error: cannot read scenario file: 5242880 bytes, larger than the input limit of 4194304 bytes (4 MiB)\n");
    }
    SECTION("- reads standard input") {
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        const std::string text = slurp(tp_test::data("scenarios/llama7b-a100x8.toml"));
        REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
        ::close(fds[1]);
        const int saved = ::dup(STDIN_FILENO);
        ::dup2(fds[0], STDIN_FILENO);
        ::close(fds[0]);
        const auto r = cli({"fit", "--scenario", "-", "--json"});
        ::dup2(saved, STDIN_FILENO);
        ::close(saved);
        INFO(r.err);
        REQUIRE((r.code == 0 || r.code == 1));
        CHECK(nlohmann::json::parse(r.out)["params"]["total"] == 6738415616LL);
    }
}

TEST_CASE("9: control and escape characters in user text are shown escaped", "[hostile][escape]") {
    using trainplan::app::printable;
    // Hand-written: ESC, BEL, newline, DEL, the C1 CSI (U+009B as C2 9B) and a stray byte.
    CHECK(printable("a\x1b[31mb\x07\n\x7f\xc2\x9b\xff") == "a\\x1b[31mb\\x07\\n\\x7f\\u009b\\xff");
    CHECK(printable("line 1\n\tline 2\r", true) == "line 1\n\tline 2\\r");
    CHECK(printable("H\xc3\xa9llo \xe2\x82\xac") == "H\xc3\xa9llo \xe2\x82\xac");  // UTF-8 text passes unchanged

    TempDir d;
    SECTION("a preset name with an OSC title sequence, listed by trainplan gpus") {
        const std::string dir = d / "presets";
        std::string text = slurp(std::string(TRAINPLAN_SOURCE_DIR) + "/hardware/gpu/rtx-4090.toml");
        const size_t at = text.find("\nname = ");
        text.replace(at + 1, text.find('\n', at + 1) - at - 1, R"(name = "Evil\u001b]0;pwned\u0007 GPU")");
        write(dir + "/hardware/gpu/evil.toml", text);
        const auto r = cli({"gpus", "--presets", dir});
        CHECK(r.code == 0);
        CHECK(r.out.find("Evil\\x1b]0;pwned\\x07 GPU") != std::string::npos);
        CHECK(r.out.find('\x1b') == std::string::npos);
    }
    SECTION("a key with a clear-screen sequence in an error message") {
        const std::string m = d / "m.toml";
        write(m, "\"\\u001b[2J\\nerror: forged\" = 1\n");
        const auto r = cli({"fit", m, "--gpu", "rtx-4090"});
        CHECK(r.code == 2);
        CHECK(r.err.find("unknown key \"\\x1b[2J\\nerror: forged\" in model preset") != std::string::npos);
        CHECK(r.err.find('\x1b') == std::string::npos);
        CHECK(r.err.find("\nerror: forged") == std::string::npos);  // one diagnostic stays one line
    }
    SECTION("a scenario saved with control characters reopens to the same scenario") {
        trainplan::Scenario s;
        s.model = tp_test::model("llama-2-7b");
        s.model.name = "tab\there, bell\x07, esc\x1b[0m, quote\" backslash\\ del\x7f nul" + std::string(1, '\0');
        s.cluster.gpu = tp_test::gpu("rtx-4090");
        const std::string toml = trainplan::scenario_to_toml(s, "");
        const auto back = trainplan::parse_scenario_toml(toml, "saved.toml");
        INFO(toml);
        REQUIRE(back);
        REQUIRE(back->model_inline);
        CHECK(back->model_inline->name == s.model.name);
        const std::string dir_ref = "dir\x1b[1m/m\x01.json";
        const auto back2 = trainplan::parse_scenario_toml(trainplan::scenario_to_toml(s, dir_ref), "/abs/saved.toml");
        REQUIRE(back2);
        CHECK(*back2->model == "/abs/" + dir_ref);  // relative to the scenario file (item 6)
    }
}

TEST_CASE("11: every error carries a location: an empty scenario file", "[hostile][scenario]") {
    TempDir d;
    const std::string empty = d / "empty.toml";
    write(empty, "");
    const auto r = cli({"fit", "--scenario", empty});
    CHECK(r.code == 2);
    CHECK(r.err == empty + ": error: no model given (a preset name, size shorthand like 7b, TOML file or config.json)\n" + empty +
                       ": error: no GPU given (e.g. --gpu rtx-4090; 'trainplan gpus' lists presets)\n");
    // A model given by flag is not blamed on the file; the missing GPU is.
    const auto g = cli({"fit", "llama-2-7b", "--scenario", empty});
    CHECK(g.err == empty + ": error: no GPU given (e.g. --gpu rtx-4090; 'trainplan gpus' lists presets)\n");
}

TEST_CASE("11: errors from defaults and from names inside presets are located too", "[hostile][scenario]") {
    // A default that breaks a rule names the flag that sets it.
    const auto r = cli({"fit", "gpt2", "--gpu", "rtx-4090"});
    CHECK(r.code == 2);
    CHECK(r.err == "error: seq_len = 2048 exceeds max_seq_len = 1024 of GPT-2 (124M) (learned position embeddings cannot extrapolate) "
                   "(the default; --seq-len sets it)\n");
    // A node preset naming a GPU that does not exist: the error is in the node's file.
    TempDir d;
    const std::string node = d / "p/hardware/node/my-node.toml";
    write(node, "name = \"My node\"\ngpu = \"no-such-gpu\"\ngpus_per_node = 8\nintra_node = \"nvswitch-h100\"\nsource = \"test\"\n");
    const auto n = cli({"fit", "llama-2-7b", "--node", "my-node", "--presets", d / "p"});
    CHECK(n.code == 2);
    CHECK(n.err.rfind(node + ": error: unknown GPU preset \"no-such-gpu\"", 0) == 0);
}
