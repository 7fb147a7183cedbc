// The Python extension: the command line's in-process runner, so Python gets
// exactly what `trainplan COMMAND --json` prints (same keys, same numbers). The
// Python side (trainplan/__init__.py) turns keyword arguments into flags or a
// scenario file and the JSON into dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>

#include "app.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_trainplan, m) {
    m.doc() = "trainplan's command-line runner (use the trainplan package, not this module)";
    m.def(
        "run",
        [](const std::vector<std::string>& args) {
            std::ostringstream out, err;
            int code = 0;
            {
                py::gil_scoped_release release;  // analytic searches may take a while
                code = trainplan::cli::run(args, out, err);
            }
            return py::make_tuple(code, out.str(), err.str());
        },
        py::arg("args"), "Runs `trainplan ARGS...` in-process; returns (exit code, stdout, stderr).");
    m.attr("__version__") = TRAINPLAN_VERSION;
}
