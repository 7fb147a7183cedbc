// Number formatting for the few messages core writes itself (reasons, remedy
// texts). Core does not link fmt; the front ends format everything else.
#pragma once

#include <sstream>
#include <string>

namespace trainplan::detail {

// `v` with `prec` digits after the point ("12.50").
inline std::string fixed(double v, int prec = 2) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(prec);
    o << v;
    return o.str();
}

}  // namespace trainplan::detail
