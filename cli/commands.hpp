// Subcommands: each has an options struct, a setup_* that registers its flags
// and a run_* that maps them onto core calls and prints.
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>

#include "scenario_flags.hpp"

namespace trainplan::cli {

struct FitOptions {
    ScenarioFlags scenario;
    bool json = false;
    bool all_stages = false;
    int max_remedies = 6;
};
void setup_fit(CLI::App& app, FitOptions& o);
int run_fit(const FitOptions& o, std::ostream& out, std::ostream& err);

struct ListOptions {
    std::vector<std::string> preset_dirs;
    bool json = false;
};
void setup_list(CLI::App& app, ListOptions& o);
int run_models(const ListOptions& o, std::ostream& out, std::ostream& err);
int run_gpus(const ListOptions& o, std::ostream& out, std::ostream& err);
int run_links(const ListOptions& o, std::ostream& out, std::ostream& err);
int run_nodes(const ListOptions& o, std::ostream& out, std::ostream& err);

// Prints diagnostics and returns exit code 2.
int report_error(const Error& e, std::ostream& err);

}  // namespace trainplan::cli
