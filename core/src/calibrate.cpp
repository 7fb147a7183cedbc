// The calibration fit: bounded Levenberg-Marquardt (Eigen) on the log ratio of
// predicted to measured figures, over the efficiency parameters the runs can
// identify. Parameters the runs do not move, or whose effect on them is
// collinear with parameters already in the fit, are held at their start values
// and the reason is reported. Standard errors: s^2 (J^T J)^-1 at the solution,
// s^2 = SSR / (n - p) (Bates & Watts 1988, Ch. 2).
#include <toml++/toml.h>

#include "toml_reader.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "trainplan/calibrate.hpp"
#include "trainplan/memory.hpp"
#include "trainplan/time.hpp"
#include "trainplan/validation.hpp"

namespace trainplan {

const char* to_string(CalParam p) {
    switch (p) {
        case CalParam::Gemm: return "gemm";
        case CalParam::Hbm: return "hbm";
        case CalParam::Attention: return "attention";
        case CalParam::IntraLink: return "intra_link";
        case CalParam::InterLink: return "inter_link";
        case CalParam::Reserve: return "reserve_fraction";
        case CalParam::Framework: return "framework_gib";
    }
    return "";
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr CalParam kAll[kCalParams] = {CalParam::Gemm, CalParam::Hbm, CalParam::Attention, CalParam::IntraLink,
                                       CalParam::InterLink, CalParam::Reserve, CalParam::Framework};

bool multiplier(CalParam p) { return p != CalParam::Reserve && p != CalParam::Framework; }

// The fit's coordinate of a parameter: ln(multiplier), the reserve fraction, framework GiB.
double get_coord(const Calibration& c, CalParam p) {
    switch (p) {
        case CalParam::Gemm: return std::log(c.gemm);
        case CalParam::Hbm: return std::log(c.hbm);
        case CalParam::Attention: return std::log(c.attention);
        case CalParam::IntraLink: return std::log(c.intra_link);
        case CalParam::InterLink: return std::log(c.inter_link);
        case CalParam::Reserve: return c.reserve_fraction;
        case CalParam::Framework: return c.framework_bytes / kGiB;
    }
    return 0;
}
void set_coord(Calibration& c, CalParam p, double x) {
    switch (p) {
        case CalParam::Gemm: c.gemm = std::exp(x); break;
        case CalParam::Hbm: c.hbm = std::exp(x); break;
        case CalParam::Attention: c.attention = std::exp(x); break;
        case CalParam::IntraLink: c.intra_link = std::exp(x); break;
        case CalParam::InterLink: c.inter_link = std::exp(x); break;
        case CalParam::Reserve: c.reserve_fraction = x; break;
        case CalParam::Framework: c.framework_bytes = x * kGiB; break;
    }
}
// The profile's value (multiplier, fraction, GiB) from a coordinate.
double value_of(CalParam p, double x) { return multiplier(p) ? std::exp(x) : x; }
std::pair<double, double> bounds(CalParam p) {
    if (multiplier(p)) return {std::log(0.1), std::log(3.0)};
    if (p == CalParam::Reserve) return {-0.05, 2.0};
    return {-1.0, 64.0};
}

std::vector<double> log_residuals(const std::vector<Observation>& obs, const Calibration& c) {
    std::vector<double> r(obs.size());
    for (size_t i = 0; i < obs.size(); ++i) {
        const double p = obs[i].predict(c);
        r[i] = p > 0 && std::isfinite(p) ? std::log(p / obs[i].measured) : 50.0;
    }
    return r;
}

Eigen::MatrixXd jacobian(const std::vector<Observation>& obs, const Calibration& c, const std::vector<CalParam>& ps) {
    Eigen::MatrixXd J(static_cast<Eigen::Index>(obs.size()), static_cast<Eigen::Index>(ps.size()));
    // Central differences of the real model (one evaluation is microseconds).
    const double h = 1e-4;
    for (size_t j = 0; j < ps.size(); ++j) {
        Calibration a = c, b = c;
        const double x = get_coord(c, ps[j]);
        set_coord(a, ps[j], x + h);
        set_coord(b, ps[j], x - h);
        const auto ra = log_residuals(obs, a), rb = log_residuals(obs, b);
        for (size_t i = 0; i < obs.size(); ++i) J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = (ra[i] - rb[i]) / (2 * h);
    }
    return J;
}

// Why a parameter the runs do not move is held.
std::string insensitive_reason(CalParam p, const std::vector<Observation>& obs) {
    auto any = [&](bool Observation::*f) { return std::any_of(obs.begin(), obs.end(), [&](const Observation& o) { return o.*f; }); };
    switch (p) {
        case CalParam::Gemm:
        case CalParam::Hbm:
            return any(&Observation::time) ? "the runs' time figures do not depend on it" : "no run measured step time or throughput";
        case CalParam::Attention:
            return any(&Observation::time) ? "no run's time depends on a fused attention kernel" : "no run measured step time or throughput";
        case CalParam::IntraLink:
            return any(&Observation::multi_gpu_node) ? "no run's exposed communication crosses links inside a node"
                                                      : "no run has more than one GPU communicating inside a node";
        case CalParam::InterLink:
            return any(&Observation::multi_node) ? "no run's exposed communication crosses nodes" : "no run spans more than one node";
        case CalParam::Reserve:
            return any(&Observation::reserved) || any(&Observation::device) ? "the memory figures do not depend on it"
                                                                            : "no run measured reserved or device memory";
        case CalParam::Framework:
            return any(&Observation::device) ? "the memory figures do not depend on it" : "no run measured device (nvidia-smi) memory";
    }
    return "";
}

double ssr(const std::vector<double>& r) {
    double s = 0;
    for (double x : r) s += x * x;
    return s;
}

}  // namespace

std::vector<Observation> observations(const std::vector<MeasuredRun>& runs) {
    std::vector<Observation> out;
    for (const MeasuredRun& r : runs) {
        const Scenario& s = r.scenario;
        const auto graph = std::make_shared<StepGraph>(build_step_graph(s.model, s.setup));
        const bool multi_node = s.cluster.num_gpus > s.cluster.gpus_per_node;
        const bool multi_gpu_node = s.cluster.gpus_per_node > 1 && s.cluster.num_gpus > 1;
        const double tokens_step = s.setup.tokens_per_step();
        const double gpus = s.cluster.num_gpus;
        auto time_obs = [&](const char* metric, double measured, std::function<double(double)> from_step) {
            Observation o;
            o.run = r.name;
            o.metric = metric;
            o.measured = measured;
            o.time = true;
            o.multi_node = multi_node;
            o.multi_gpu_node = multi_gpu_node;
            o.predict = [s, graph, from_step](const Calibration& c) {
                Scenario sc = s;
                sc.calibration = c;
                return from_step(estimate_time(sc, *graph).time.step_s);
            };
            out.push_back(std::move(o));
        };
        const Measured& m = r.measured;
        if (m.step_s) time_obs("step time (s)", *m.step_s, [](double st) { return st; });
        if (m.tokens_per_s) time_obs("tokens/s", *m.tokens_per_s, [tokens_step](double st) { return tokens_step / st; });
        if (m.tokens_per_s_per_gpu)
            time_obs("tokens/s per GPU", *m.tokens_per_s_per_gpu, [tokens_step, gpus](double st) { return tokens_step / st / gpus; });
        if (m.samples_per_s) {
            const double gb = static_cast<double>(s.setup.global_batch());
            time_obs("samples/s", *m.samples_per_s, [gb](double st) { return gb / st; });
        }
        auto mem_obs = [&](const char* metric, double measured, int which) {
            Observation o;
            o.run = r.name;
            o.metric = metric;
            o.measured = measured;
            o.reserved = which == 1;
            o.device = which == 2;
            o.predict = [s, graph, which](const Calibration& c) {
                Scenario sc = s;
                sc.calibration = c;
                const MemoryBreakdown mb = estimate_memory(sc, *graph).peak();
                return which == 0 ? mb.allocated : which == 1 ? mb.allocated + mb.fragmentation : mb.total;
            };
            out.push_back(std::move(o));
        };
        if (m.peak_allocated_bytes) mem_obs("peak allocated (GB)", *m.peak_allocated_bytes, 0);
        if (m.peak_reserved_bytes) mem_obs("peak reserved (GB)", *m.peak_reserved_bytes, 1);
        if (m.device_bytes) mem_obs("device memory (GB)", *m.device_bytes, 2);
    }
    return out;
}

Result<CalibrationFit> calibrate(const std::vector<MeasuredRun>& runs, const CalibrateOptions& opt) {
    return calibrate(observations(runs), opt);
}

Result<CalibrationFit> calibrate(const std::vector<Observation>& obs, const CalibrateOptions& opt) {
    if (obs.empty()) return Diagnostic{"", 0, 0, "", "no measured figure to calibrate against"};
    const auto n = static_cast<Eigen::Index>(obs.size());
    CalibrationFit fit;
    Calibration cal = opt.start;
    const std::vector<double> r0 = log_residuals(obs, cal);

    // ---- identifiability: sensitivities at the start, then a greedy rank test
    // on the column-normalised Jacobian (parameters in priority order).
    const std::vector<CalParam> all(std::begin(kAll), std::end(kAll));
    const Eigen::MatrixXd J0 = jacobian(obs, cal, all);
    std::vector<CalParam> chosen;
    std::vector<std::string> reason(kCalParams);
    for (int j = 0; j < kCalParams; ++j) {
        const double sens = J0.col(j).norm() / std::sqrt(static_cast<double>(n));
        if (sens < opt.min_sensitivity) {
            reason[static_cast<size_t>(j)] = insensitive_reason(all[static_cast<size_t>(j)], obs);
            if (sens > 1e-9) {
                std::ostringstream os;
                os.precision(2);
                os << "the runs barely depend on it (rms d ln(prediction) / d " << (multiplier(all[static_cast<size_t>(j)]) ? "ln factor" : "value") << " = " << sens << ")";
                reason[static_cast<size_t>(j)] = os.str();
            }
            continue;
        }
        std::vector<CalParam> trial = chosen;
        trial.push_back(all[static_cast<size_t>(j)]);
        Eigen::MatrixXd S(n, static_cast<Eigen::Index>(trial.size()));
        for (size_t k = 0; k < trial.size(); ++k) {
            const auto col = J0.col(static_cast<int>(std::find(all.begin(), all.end(), trial[k]) - all.begin()));
            S.col(static_cast<Eigen::Index>(k)) = col / col.norm();
        }
        Eigen::JacobiSVD<Eigen::MatrixXd> svd(S);
        const auto sv = svd.singularValues();
        const double cond = sv(sv.size() - 1) > 0 ? sv(0) / sv(sv.size() - 1) : std::numeric_limits<double>::infinity();
        if (static_cast<Eigen::Index>(trial.size()) > n || cond > opt.max_condition) {
            std::string with;
            for (CalParam c : chosen) with += (with.empty() ? "" : ", ") + std::string(to_string(c));
            reason[static_cast<size_t>(j)] = static_cast<Eigen::Index>(trial.size()) > n
                                                 ? "more parameters than measured figures (" + std::to_string(n) + ")"
                                                 : "its effect on these runs is not separable from " + with + " (collinear)";
            continue;
        }
        chosen.push_back(all[static_cast<size_t>(j)]);
    }

    // ---- bounded Levenberg-Marquardt (Marquardt's diagonal scaling; steps projected onto the bounds).
    const auto p = static_cast<Eigen::Index>(chosen.size());
    std::vector<double> r = r0;
    double cost = ssr(r);
    double lambda = 1e-3;
    for (int it = 0; it < opt.max_iterations && p > 0 && cost > 1e-24; ++it) {
        fit.iterations = it + 1;
        const Eigen::MatrixXd J = jacobian(obs, cal, chosen);
        const Eigen::VectorXd rv = Eigen::Map<const Eigen::VectorXd>(r.data(), n);
        const Eigen::MatrixXd A = J.transpose() * J;
        const Eigen::VectorXd g = J.transpose() * rv;
        bool improved = false;
        for (int tries = 0; tries < 12 && !improved; ++tries) {
            Eigen::MatrixXd M = A;
            for (Eigen::Index k = 0; k < p; ++k) M(k, k) += lambda * std::max(A(k, k), 1e-12);
            const Eigen::VectorXd step = M.ldlt().solve(-g);
            Calibration trial = cal;
            double moved = 0;
            for (Eigen::Index k = 0; k < p; ++k) {
                const CalParam cp = chosen[static_cast<size_t>(k)];
                const auto [lo, hi] = bounds(cp);
                const double x0 = get_coord(cal, cp);
                const double x = std::clamp(x0 + step(k), lo, hi);
                moved = std::max(moved, std::fabs(x - x0));
                set_coord(trial, cp, x);
            }
            const auto rt = log_residuals(obs, trial);
            const double ct = ssr(rt);
            if (ct < cost) {
                const double gain = cost - ct;
                cal = trial;
                r = rt;
                cost = ct;
                lambda = std::max(lambda / 10, 1e-12);
                improved = true;
                if (moved < 1e-12 || gain < 1e-16 * std::max(1.0, cost)) it = opt.max_iterations;
            } else {
                lambda *= 10;
            }
        }
        if (!improved) break;
    }

    // ---- standard errors and the report.
    Eigen::MatrixXd cov;
    const double dof = static_cast<double>(n - p);
    if (p > 0) {
        const Eigen::MatrixXd J = jacobian(obs, cal, chosen);
        // A parameter the runs stopped depending on at the solution (its column
        // zero: e.g. an overhead where every run's allocator reserve already takes
        // only what the card has free) keeps a zero column and lowers the rank; no
        // standard errors then (the normal matrix is singular).
        Eigen::MatrixXd S = J;
        for (Eigen::Index k = 0; k < p; ++k)
            if (const double norm = J.col(k).norm(); norm > 0) S.col(k) /= norm;
        Eigen::JacobiSVD<Eigen::MatrixXd> svd(S);
        for (Eigen::Index k = 0; k < svd.singularValues().size(); ++k) fit.singular_values.push_back(svd.singularValues()(k));
        fit.rank = static_cast<int>(svd.rank());
        if (dof > 0 && fit.rank == p) cov = (cost / dof) * (J.transpose() * J).inverse();
    }
    for (int j = 0; j < kCalParams; ++j) {
        const CalParam cp = all[static_cast<size_t>(j)];
        FittedParam fp;
        fp.param = cp;
        fp.key = to_string(cp);
        fp.start = value_of(cp, get_coord(opt.start, cp));
        fp.value = value_of(cp, get_coord(cal, cp));
        const auto at = std::find(chosen.begin(), chosen.end(), cp);
        fp.fitted = at != chosen.end();
        fp.stderr_ = std::numeric_limits<double>::quiet_NaN();
        if (fp.fitted && cov.size() > 0) {
            const auto k = at - chosen.begin();
            const double se = std::sqrt(std::max(0.0, cov(k, k)));
            fp.stderr_ = multiplier(cp) ? fp.value * se : se;  // delta method for exp()
        }
        if (!fp.fitted) fp.held_reason = reason[static_cast<size_t>(j)];
        const auto [lo, hi] = bounds(cp);
        const double x = get_coord(cal, cp);
        fp.at_bound = fp.fitted && (x <= lo + 1e-9 || x >= hi - 1e-9);
        fit.params.push_back(fp);
    }
    fit.calibration = cal;
    fit.calibration.source.clear();
    // Residual spread per kind, for prediction intervals of the calibrated model: the
    // fitted parameters' degrees of freedom are charged to the kind they act on.
    {
        double ss[2] = {0, 0};
        int n_kind[2] = {0, 0}, p_kind[2] = {0, 0};
        for (size_t i = 0; i < obs.size(); ++i) {
            const int k = obs[i].time ? 0 : 1;
            ss[k] += r[i] * r[i];
            ++n_kind[k];
        }
        for (CalParam cp : chosen) ++p_kind[cp == CalParam::Reserve || cp == CalParam::Framework ? 1 : 0];
        const int dof_t = n_kind[0] - p_kind[0], dof_m = n_kind[1] - p_kind[1];
        fit.calibration.time_dof = std::max(0, dof_t);
        fit.calibration.memory_dof = std::max(0, dof_m);
        fit.calibration.time_log_sd = dof_t > 0 ? std::sqrt(ss[0] / dof_t) : 0;
        fit.calibration.memory_log_sd = dof_m > 0 ? std::sqrt(ss[1] / dof_m) : 0;
    }
    double before = 0;
    for (size_t i = 0; i < obs.size(); ++i) {
        Residual res;
        res.run = obs[i].run;
        res.metric = obs[i].metric;
        res.measured = obs[i].measured;
        res.before = obs[i].measured * std::exp(r0[i]);
        res.after = obs[i].measured * std::exp(r[i]);
        fit.residuals.push_back(res);
        before += r0[i] * r0[i];
    }
    fit.rms_log_before = std::sqrt(before / static_cast<double>(n));
    fit.rms_log_after = std::sqrt(cost / static_cast<double>(n));
    return fit;
}

// ---- the profile file.
std::string calibration_to_toml(const CalibrationFit& fit, int runs) {
    std::ostringstream os;
    os.precision(6);
    os << "# trainplan calibration profile: efficiency multipliers fitted by `trainplan calibrate`\n"
       << "# to " << runs << " run(s), " << fit.residuals.size() << " measured figure(s); rms |ln(pred/meas)| "
       << fit.rms_log_before << " before, " << fit.rms_log_after << " after.\n"
       << "# Apply with --calibration FILE. Multipliers scale the preset / policy efficiency;\n"
       << "# reserve_fraction and framework_gib are added to the memory overheads.\n[calibration]\n";
    for (const FittedParam& p : fit.params) os << p.key << " = " << p.value << "\n";
    os << "\n# spread of the fit's residuals: sd of ln(measured / predicted) and its degrees of\n"
       << "# freedom, per kind (simulate's P10-P90 band when the degrees of freedom are >= 3)\n[calibration.residuals]\n"
       << "time_log_sd = " << fit.calibration.time_log_sd << "\ntime_dof = " << fit.calibration.time_dof << "\n"
       << "memory_log_sd = " << fit.calibration.memory_log_sd << "\nmemory_dof = " << fit.calibration.memory_dof << "\n";
    os << "\n# standard errors of the fitted parameters (informational)\n[calibration.stderr]\n";
    for (const FittedParam& p : fit.params)
        if (p.fitted && std::isfinite(p.stderr_)) os << p.key << " = " << p.stderr_ << "\n";
    os << "\n# parameters held at their defaults, and why (informational)\n[calibration.held]\n";
    for (const FittedParam& p : fit.params)
        if (!p.fitted) {
            std::string r = p.held_reason;
            for (char& ch : r) if (ch == '"' || ch == '\\') ch = '\'';
            os << p.key << " = \"" << r << "\"\n";
        }
    return os.str();
}

Result<Calibration> parse_calibration_toml(std::string_view text, const std::string& file) {
    toml::table doc;
    if (auto err = detail::parse_document(text, file, doc)) return *err;
    std::vector<Diagnostic> errs;
    for (const auto& [k, node] : doc)
        if (k.str() != "calibration")
            errs.push_back({file, static_cast<int>(node.source().begin.line), static_cast<int>(node.source().begin.column), std::string(k.str()),
                            "unknown table \"" + std::string(k.str()) + "\" in a calibration profile (only [calibration])"});
    const toml::table* t = doc["calibration"].as_table();
    if (!t) {
        errs.push_back({file, 1, 1, "calibration", "a calibration profile needs a [calibration] table"});
        return Error(errs);
    }
    Calibration c;
    c.source = file;
    for (const auto& [k, node] : *t) {
        const std::string key(k.str());
        const int line = static_cast<int>(node.source().begin.line), col = static_cast<int>(node.source().begin.column);
        if (key == "stderr" || key == "held") continue;  // informational
        if (key == "residuals") {
            const toml::table* rt = node.as_table();
            for (const auto& [rk, rn] : rt ? *rt : toml::table{}) {
                const std::string k2(rk.str());
                const int l2 = static_cast<int>(rn.source().begin.line), c2 = static_cast<int>(rn.source().begin.column);
                std::optional<double> v;
                if (auto d = rn.value_exact<double>()) v = *d;
                else if (auto i = rn.value_exact<std::int64_t>()) v = static_cast<double>(*i);
                if (!v || !std::isfinite(*v) || *v < 0 || *v > 1e6) {
                    errs.push_back({file, l2, c2, k2, k2 + " must be a number >= 0"});
                    continue;
                }
                if (k2 == "time_log_sd") c.time_log_sd = *v;
                else if (k2 == "memory_log_sd") c.memory_log_sd = *v;
                else if (k2 == "time_dof") c.time_dof = static_cast<int>(*v);
                else if (k2 == "memory_dof") c.memory_dof = static_cast<int>(*v);
                else errs.push_back({file, l2, c2, k2, "unknown key \"" + k2 + "\" in [calibration.residuals] (known: time_log_sd, time_dof, memory_log_sd, memory_dof)"});
            }
            continue;
        }
        CalParam cp{};
        bool known = false;
        for (CalParam p : kAll) if (key == to_string(p)) { cp = p; known = true; }
        if (!known) {
            errs.push_back({file, line, col, key, "unknown key \"" + key + "\" in [calibration] (known: gemm, hbm, attention, intra_link, inter_link, reserve_fraction, framework_gib)"});
            continue;
        }
        std::optional<double> v;
        if (auto d = node.value_exact<double>()) v = *d;
        else if (auto i = node.value_exact<std::int64_t>()) v = static_cast<double>(*i);
        const auto [lo, hi] = bounds(cp);
        const double vlo = value_of(cp, lo), vhi = value_of(cp, hi);
        if (!v || !std::isfinite(*v) || *v < vlo - 1e-12 || *v > vhi + 1e-12) {
            std::ostringstream os;
            os << key << " = " << (v ? std::to_string(*v) : std::string("(not a number)")) << " must be a number in [" << vlo << ", " << vhi << "]";
            errs.push_back({file, line, col, key, os.str()});
            continue;
        }
        set_coord(c, cp, multiplier(cp) ? std::log(*v) : *v);
    }
    if (!errs.empty()) return Error(errs);
    return c;
}

}  // namespace trainplan

// ---- cross-validation on the validation cases.

namespace trainplan {

namespace {

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double p90_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(v.size()))) - 1];
}

Observation case_observation(const ValidationCase& c, const Scenario& s) {
    Observation o;
    o.run = c.id;
    o.metric = c.metric_name;
    o.measured = *c.value;
    o.time = c.kind == "throughput";
    o.reserved = c.kind == "memory" && c.memory == MemoryConvention::Reserved;
    o.device = c.kind == "memory" && c.memory == MemoryConvention::Device;
    o.multi_node = s.cluster.num_gpus > s.cluster.gpus_per_node;
    o.multi_gpu_node = s.cluster.gpus_per_node > 1 && s.cluster.num_gpus > 1;
    o.predict = [c, s](const Calibration& cal) {
        Scenario sc = s;
        sc.calibration = cal;
        return predict_case(c, sc).value_or(0);
    };
    return o;
}

}  // namespace

Result<CrossValidation> calibration_cross_validation(const std::vector<TextSource>& files, PresetLookup& lookup) {
    auto cases = load_validation_cases(files);
    if (!cases) return cases.error();
    std::map<std::string, std::vector<Observation>> by_source;
    for (const ValidationCase& c : *cases) {
        if (!c.missing_mechanism.empty() || !c.missing_input.empty() || !c.scenario || !c.value) continue;
        if (c.metric == CaseMetric::OutOfMemory || c.metric == CaseMetric::FitsUnder) continue;
        auto s = resolve_scenario(*c.scenario, lookup);
        if (!s) continue;
        by_source[c.source].push_back(case_observation(c, *s));
    }
    CrossValidation cv;
    std::vector<double> all_before, all_after;
    for (auto& [source, obs] : by_source) {
        if (obs.size() < 2) continue;
        // Alternate cases in id order within each kind (time / memory), so both
        // halves hold both kinds when the source has both (sources often pair a
        // memory and a throughput case of the same run: X_mem, X_tps, Y_mem, ...).
        std::stable_sort(obs.begin(), obs.end(), [](const Observation& a, const Observation& b) {
            return a.time != b.time ? a.time : a.run < b.run;
        });
        std::vector<Observation> train, test;
        int in_kind = 0;
        for (size_t i = 0; i < obs.size(); ++i) {
            if (i > 0 && obs[i].time != obs[i - 1].time) in_kind = 0;
            (in_kind++ % 2 == 0 ? train : test).push_back(obs[i]);
        }
        if (test.empty()) continue;  // one case of each kind: nothing to hold back
        auto fit = calibrate(train);
        if (!fit) continue;
        CvSource row;
        row.source = source;
        row.train = static_cast<int>(train.size());
        row.test = static_cast<int>(test.size());
        for (const FittedParam& p : fit->params)
            if (p.fitted) {
                std::ostringstream os;
                os.precision(3);
                os << p.key << " " << p.value;
                row.fitted.push_back(os.str());
            }
        std::vector<double> before, after;
        for (const Observation& o : test) {
            const double b = std::fabs(o.predict(Calibration{}) / o.measured - 1);
            const double a = std::fabs(o.predict(fit->calibration) / o.measured - 1);
            before.push_back(b);
            after.push_back(a);
            if (a < b - 1e-9) ++cv.improved;
            else if (a > b + 1e-9) ++cv.worsened;
        }
        row.median_before = median_of(before);
        row.median_after = median_of(after);
        all_before.insert(all_before.end(), before.begin(), before.end());
        all_after.insert(all_after.end(), after.begin(), after.end());
        cv.sources.push_back(row);
    }
    cv.held_back = static_cast<int>(all_before.size());
    cv.median_before = median_of(all_before);
    cv.median_after = median_of(all_after);
    cv.p90_before = p90_of(all_before);
    cv.p90_after = p90_of(all_after);
    return cv;
}

}  // namespace trainplan
