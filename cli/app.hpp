// Entry point of the trainplan command line, callable in-process (tests pass
// string streams). Exit codes: 0 success / fits, 1 does not fit, 2 bad input.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace trainplan::cli {

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace trainplan::cli
