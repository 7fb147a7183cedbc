// The GUI's single source of truth: the scenario as entered, its resolution
// through core, and the results every view shows. Widgets write inputs here and
// read results back; nothing in the GUI computes a number itself.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>

#include <map>
#include <optional>

#include "trainplan/app/presets.hpp"
#include "trainplan/advisor.hpp"
#include "trainplan/intervals.hpp"
#include "trainplan/io.hpp"
#include "trainplan/sizing.hpp"
#include "trainplan/time.hpp"

namespace trainplan::gui {

// Preset lookup with the files read once (the GUI re-resolves on every keystroke).
class CachedPresets final : public PresetLookup {
public:
    explicit CachedPresets(std::vector<std::string> dirs) : files_(std::move(dirs)) {}
    std::optional<TextSource> find(PresetKind kind, std::string_view name) override;
    std::vector<std::string> names(PresetKind kind) override;
    std::optional<TextSource> read_file(const std::string& path, std::string& why) override { return files_.read_file(path, why); }
    app::FilePresets& files() { return files_; }

private:
    app::FilePresets files_;
    std::map<std::pair<int, std::string>, std::optional<TextSource>> cache_;
    std::map<int, std::vector<std::string>> names_;
};

struct Pinned {
    QString label;
    Scenario scenario;
    MemoryBreakdown memory;
    TimeEstimate time;
};

class Controller : public QObject {
    Q_OBJECT
public:
    explicit Controller(std::vector<std::string> preset_dirs = {}, QObject* parent = nullptr);

    QStringList names(PresetKind kind);
    CachedPresets& presets() { return presets_; }

    // The scenario as entered; set it and everything re-evaluates.
    const ScenarioInput& input() const { return input_; }
    void setInput(const ScenarioInput& in);
    void setRun(const RunOptions& run);
    const RunOptions& run() const { return run_; }

    bool valid() const { return valid_; }
    QString errors() const { return errors_; }
    const Scenario& scenario() const { return scenario_; }
    const MemoryEstimate& memory() const { return memory_; }
    const TimeEstimate& time() const { return time_; }
    AdviceReport advice();                // computed on request (it simulates many variants)
    // `s` with the policy's default fabric between nodes when it has none, for
    // moves that grow it past one node (plan rows, the GPU sweep, advice).
    Scenario withFabric(Scenario s);

    // The calibration profile applied to every evaluation (`trainplan calibrate -o`,
    // the CLI's --calibration); cleared = the preset / policy efficiencies.
    bool loadCalibration(const QString& path, QString* error);
    void clearCalibration();
    const Calibration& calibration() const { return calibration_; }
    // simulate's P10-P90 band for a scenario (app/intervals.hpp): the calibration's
    // residual spread, else the validation regime's; nullopt when neither.
    std::optional<RatioBand> band(BandKind k, const Scenario& s) const;
    double lastUpdateMs() const { return last_ms_; }

    // The model as a preset name, shorthand or file path ("" when edited inline).
    QString modelRef() const;
    QString commandLine() const;

    bool openScenario(const QString& path, QString* error);
    bool saveScenario(const QString& path, QString* error) const;
    // The sizing report for a token budget and deadline: the edited cluster (with the
    // rent/price entered) against every priced GPU preset. Needs valid().
    // `invalid`: diagnostics of preset files that exist but do not parse (left out).
    SizingReport sizingReport(double tokens, double deadline_days, std::vector<Diagnostic>* invalid = nullptr);
    bool exportReport(const QString& path, double tokens, double deadline_days, QString* error);

    void pin(const QString& label);
    void clearPins();
    const QList<Pinned>& pinned() const { return pinned_; }

signals:
    void changed();   // after every evaluation
    void pinsChanged();

private:
    void evaluate();

    CachedPresets presets_;
    ScenarioInput input_;
    RunOptions run_;
    bool valid_ = false;
    QString errors_;
    Scenario scenario_;
    MemoryEstimate memory_;
    TimeEstimate time_;
    double last_ms_ = 0;
    QList<Pinned> pinned_;
    Calibration calibration_;
    std::optional<IntervalTable> residuals_;
};

}  // namespace trainplan::gui
