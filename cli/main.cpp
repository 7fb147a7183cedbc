#include <iostream>

#include "app.hpp"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    return trainplan::cli::run(args, std::cout, std::cerr);
}
