#include "trainplan/training.hpp"

#include <string>

namespace trainplan {

// The enums' to_string live with their tables in enums.cpp.

// validate() lives with the rule table in rules.cpp.

}  // namespace trainplan
