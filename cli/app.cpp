#include "app.hpp"

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <sstream>

#include "commands.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/io.hpp"
#include "trainplan/schema.hpp"

namespace trainplan::cli {

namespace {

// Every subcommand's options, so one definition of the command line serves parsing,
// --dump-cli-json (man page and shell completions are generated from it) and the
// unknown-flag suggestions.
struct AllOptions {
    FitOptions fit;
    SimulateOptions simulate;
    PlanOptions plan;
    SizeOptions size;
    AdviseOptions advise;
    ValidateOptions validate;
    CalibrateCommandOptions calibrate;
    ListOptions models, gpus, links, nodes;
};

void define(CLI::App& app, AllOptions& o) {
    app.set_version_flag("--version", std::string("trainplan ") + TRAINPLAN_VERSION);
    app.require_subcommand(1);
    setup_fit(*app.add_subcommand("fit", "Memory per GPU, verdict, and the changes that would make it fit"), o.fit);
    setup_simulate(*app.add_subcommand("simulate", "Step time and where it goes, throughput, MFU, time / energy / cost to train"), o.simulate);
    setup_plan(*app.add_subcommand("plan", "Search parallel layouts and settings; inverse queries (max micro-batch / sequence, min GPUs)"), o.plan);
    setup_size(*app.add_subcommand("size", "Procurement sizing: the cheapest hardware and layout that trains N tokens by a deadline"), o.size);
    setup_advise(*app.add_subcommand("advise", "Diagnose the bottleneck (from the model and what you observe) and rank remedies"), o.advise);
    setup_validate(*app.add_subcommand("validate", "Accuracy against published measurements (exit 1 beyond the budgets)"), o.validate);
    setup_calibrate(*app.add_subcommand("calibrate", "Fit efficiency factors to your own measured runs; write a calibration profile"), o.calibrate);
    setup_list(*app.add_subcommand("models", "List model presets"), o.models);
    setup_list(*app.add_subcommand("gpus", "List GPU presets"), o.gpus);
    setup_list(*app.add_subcommand("links", "List link presets (PCIe, NVLink, InfiniBand, Ethernet)"), o.links);
    setup_list(*app.add_subcommand("nodes", "List node presets"), o.nodes);
}

nlohmann::json option_json(const CLI::Option& opt) {
    nlohmann::json j;
    j["long"] = opt.get_lnames();
    j["short"] = opt.get_snames();
    j["positional"] = opt.get_positional() ? opt.get_name() : std::string();
    j["description"] = opt.get_description();
    j["group"] = opt.get_group();
    j["takes_value"] = opt.get_type_size_max() > 0 && opt.get_expected_max() > 0;
    j["type"] = opt.get_type_name();
    // Enumerated scenario flags: their values from the enum tables (completions offer them).
    j["choices"] = nlohmann::json::array();
    for (const Field& f : scenario_fields())
        for (const auto& n : opt.get_lnames())
            if (f.flag == "--" + n && f.rule.type == FieldType::Enum && f.rule.choices)
                for (const EnumEntry& e : f.rule.choices->entries) j["choices"].push_back(e.name);
    return j;
}

// The command line as data: the source the build generates the man page and the
// bash / zsh / fish completions from (packaging/gen_cli_docs.py).
std::string dump_cli_json(CLI::App& app) {
    nlohmann::json j;
    j["name"] = app.get_name();
    j["description"] = app.get_description();
    j["version"] = TRAINPLAN_VERSION;
    j["options"] = nlohmann::json::array();
    for (const auto* opt : app.get_options()) j["options"].push_back(option_json(*opt));
    j["subcommands"] = nlohmann::json::array();
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        nlohmann::json s;
        s["name"] = sub->get_name();
        s["description"] = sub->get_description();
        s["options"] = nlohmann::json::array();
        for (const auto* opt : sub->get_options()) s["options"].push_back(option_json(*opt));
        j["subcommands"].push_back(s);
    }
    return j.dump(2) + "\n";
}

bool has_long_name(const CLI::App& app, const std::string& flag) {
    for (const auto* opt : app.get_options())
        for (const auto& n : opt->get_lnames())
            if ("--" + n == flag) return true;
    return false;
}

// For "arguments were not expected" / "required" errors: each unknown --flag with the
// closest flags of its subcommand, or an unknown subcommand with the closest
// commands. Empty when nothing better than CLI11's message can be said.
std::string unknown_argument_hint(CLI::App& app, const std::vector<std::string>& args) {
    if (args.size() < 2) return {};
    CLI::App* sub = nullptr;
    std::vector<std::string> commands;
    for (auto* s : app.get_subcommands([](const CLI::App*) { return true; })) {
        commands.push_back(s->get_name());
        if (s->get_name() == args[1]) sub = s;
    }
    std::string out;
    if (!sub) {
        if (args[1].empty()) return {};
        if (args[1].rfind("--", 0) == 0) {
            const std::string flag = args[1].substr(0, args[1].find('='));
            if (has_long_name(app, flag)) return {};
            std::vector<std::string> flags;
            for (const auto* opt : app.get_options())
                for (const auto& n : opt->get_lnames()) flags.push_back("--" + n);
            out = "error: unknown flag \"" + flag + "\"";
            const auto near = closest_names(flag, flags, 3);
            for (size_t i = 0; i < near.size(); ++i) out += (i ? ", \"" : "; did you mean \"") + near[i] + "\"";
            if (!near.empty()) out += "?";
            return out + "\n(run 'trainplan --help' for the commands)\n";
        }
        if (args[1][0] == '-') return {};
        out = "error: unknown command \"" + args[1] + "\"";
        const auto near = closest_names(args[1], commands, 3);
        for (size_t i = 0; i < near.size(); ++i) out += (i ? ", \"" : "; did you mean \"") + near[i] + "\"";
        if (!near.empty()) out += "?";
        return out + "\n(run 'trainplan --help' for the commands)\n";
    }
    std::vector<std::string> flags;
    for (const auto* opt : sub->get_options())
        for (const auto& n : opt->get_lnames()) flags.push_back("--" + n);
    for (size_t i = 2; i < args.size(); ++i) {
        if (args[i] == "--") break;
        if (args[i].rfind("--", 0) != 0) continue;
        const std::string flag = args[i].substr(0, args[i].find('='));
        if (has_long_name(*sub, flag) || has_long_name(app, flag)) continue;
        out += "error: unknown flag \"" + flag + "\" for 'trainplan " + sub->get_name() + "'";
        const auto near = closest_names(flag, flags, 3);
        for (size_t k = 0; k < near.size(); ++k) out += (k ? ", \"" : "; did you mean \"") + near[k] + "\"";
        out += near.empty() ? "\n" : "?\n";
    }
    if (out.empty()) return {};
    return out + "(run 'trainplan " + sub->get_name() + " --help' for its flags)\n";
}

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    CLI::App app{"trainplan: will it fit, how fast, what to buy -- capacity planning for LLM training", "trainplan"};
    AllOptions opts;
    define(app, opts);
    auto& [fit, simulate, plan, size, advise, validate, calibrate, models, gpus, links, nodes] = opts;

    // Hidden: the build generates the man page and completions from this.
    if (args.size() == 2 && args[1] == "--dump-cli-json") {
        out << dump_cli_json(app);
        return 0;
    }

    std::vector<std::string> rev(args.rbegin(), args.rend());
    if (!rev.empty()) rev.pop_back();  // program name
    try {
        app.parse(rev);
    } catch (const CLI::CallForHelp&) {
        out << app.help();
        return 0;
    } catch (const CLI::CallForAllHelp&) {
        out << app.help("", CLI::AppFormatMode::All);
        return 0;
    } catch (const CLI::CallForVersion& e) {
        out << e.what() << '\n';
        return 0;
    } catch (const CLI::ParseError& e) {
        // Help requested on a subcommand arrives here too.
        if (e.get_exit_code() == 0) {
            for (const auto* sub : app.get_subcommands()) out << sub->help();
            if (app.get_subcommands().empty()) out << app.help();
            return 0;
        }
        if (dynamic_cast<const CLI::ExtrasError*>(&e) || dynamic_cast<const CLI::RequiredError*>(&e)) {
            if (const std::string hint = unknown_argument_hint(app, args); !hint.empty()) {
                err << hint;
                return 2;
            }
        }
        err << "error: " << e.what() << "\n(run 'trainplan --help' for usage)\n";
        return 2;
    }

    try {
        if (app.got_subcommand("fit")) return run_fit(fit, out, err);
        if (app.got_subcommand("simulate")) return run_simulate(simulate, out, err);
        if (app.got_subcommand("plan")) return run_plan(plan, out, err);
        if (app.got_subcommand("size")) return run_size(size, out, err);
        if (app.got_subcommand("advise")) return run_advise(advise, out, err);
        if (app.got_subcommand("validate")) return run_validate(validate, out, err);
        if (app.got_subcommand("calibrate")) return run_calibrate(calibrate, out, err);
        if (app.got_subcommand("calibrate")) return run_calibrate(calibrate, out, err);
        if (app.got_subcommand("models")) return run_models(models, out, err);
        if (app.got_subcommand("gpus")) return run_gpus(gpus, out, err);
        if (app.got_subcommand("links")) return run_links(links, out, err);
        if (app.got_subcommand("nodes")) return run_nodes(nodes, out, err);
    } catch (const std::exception& e) {
        // Core reports bad input as values; reaching here is a bug, but the user
        // still gets a message and a defined exit code instead of a crash.
        err << "internal error: " << e.what() << '\n';
        return 3;
    }
    return 2;
}

}  // namespace

// Names, keys and values from input files reach the terminal: escape sequences
// in them are shown escaped, never interpreted (lines and tabs pass through).
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    std::ostringstream o, e;
    const int code = run_command(args, o, e);
    out << app::printable(o.str(), true);
    err << app::printable(e.str(), true);
    return code;
}

}  // namespace trainplan::cli
