#include "app.hpp"

#include <CLI/CLI.hpp>

#include "commands.hpp"

namespace trainplan::cli {

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    CLI::App app{"trainplan: will it fit, how fast, what to buy -- capacity planning for LLM training", "trainplan"};
    app.set_version_flag("--version", std::string("trainplan ") + TRAINPLAN_VERSION);
    app.require_subcommand(1);

    FitOptions fit;
    setup_fit(*app.add_subcommand("fit", "Memory per GPU, verdict, and the changes that would make it fit"), fit);
    SimulateOptions simulate;
    setup_simulate(*app.add_subcommand("simulate", "Step time and where it goes, throughput, MFU, time / energy / cost to train"), simulate);
    PlanOptions plan;
    setup_plan(*app.add_subcommand("plan", "Search parallel layouts and settings; inverse queries (max micro-batch / sequence, min GPUs)"), plan);
    SizeOptions size;
    setup_size(*app.add_subcommand("size", "Procurement sizing: the cheapest hardware and layout that trains N tokens by a deadline"), size);
    AdviseOptions advise;
    setup_advise(*app.add_subcommand("advise", "Diagnose the bottleneck (from the model and what you observe) and rank remedies"), advise);
    ValidateOptions validate;
    setup_validate(*app.add_subcommand("validate", "Accuracy against published measurements (exit 1 beyond the budgets)"), validate);
    CalibrateOptions_ calibrate;
    setup_calibrate(*app.add_subcommand("calibrate", "Fit efficiency factors to your own measured runs; write a calibration profile"), calibrate);
    ListOptions models, gpus, links, nodes;
    setup_list(*app.add_subcommand("models", "List model presets"), models);
    setup_list(*app.add_subcommand("gpus", "List GPU presets"), gpus);
    setup_list(*app.add_subcommand("links", "List link presets (PCIe, NVLink, InfiniBand, Ethernet)"), links);
    setup_list(*app.add_subcommand("nodes", "List node presets"), nodes);

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

}  // namespace trainplan::cli
