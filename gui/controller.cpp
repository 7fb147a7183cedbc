#include "controller.hpp"

#include <QBuffer>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QImage>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QRegularExpression>
#include <QSvgRenderer>
#include <QTextDocument>

#include "trainplan/app/candidates.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/calibrate.hpp"
#include "trainplan/policy.hpp"
#include "trainplan/app/report.hpp"
#include "trainplan/sizing.hpp"

namespace trainplan::gui {

std::optional<TextSource> CachedPresets::find(PresetKind kind, std::string_view name) {
    const auto key = std::make_pair(static_cast<int>(kind), std::string(name));
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    auto src = files_.find(kind, name);
    cache_[key] = src;
    return src;
}

std::vector<std::string> CachedPresets::names(PresetKind kind) {
    auto it = names_.find(static_cast<int>(kind));
    if (it != names_.end()) return it->second;
    return names_[static_cast<int>(kind)] = files_.names(kind);
}

Controller::Controller(std::vector<std::string> preset_dirs, QObject* parent) : QObject(parent), presets_(std::move(preset_dirs)) {
    input_.model = "llama-2-7b";
    input_.gpu = "rtx-4090";
    input_.gpus = 1;
    residuals_ = app::residual_table(presets_.files());
    evaluate();
}

QStringList Controller::names(PresetKind kind) {
    QStringList l;
    for (const auto& n : presets_.names(kind)) l << QString::fromStdString(n);
    return l;
}

void Controller::setInput(const ScenarioInput& in) {
    input_ = in;
    evaluate();
}

void Controller::setRun(const RunOptions& run) {
    run_ = run;
    evaluate();
}

void Controller::evaluate() {
    QElapsedTimer timer;
    timer.start();
    auto s = resolve_scenario(input_, presets_);
    if (!s) {
        valid_ = false;
        QStringList lines;
        // Located errors (a scenario file's key) say file:line:col, as the CLI does.
        for (const auto& d : s.error().diagnostics) lines << QString::fromStdString(d.file.empty() ? d.message : d.to_string());
        errors_ = lines.join("\n");
    } else {
        valid_ = true;
        errors_.clear();
        scenario_ = *s;
        scenario_.run = run_;
        scenario_.calibration = calibration_;
        const LayerGraph g = build_layer_graph(scenario_.model, scenario_.setup);
        memory_ = estimate_memory(scenario_, g, true);
        time_ = estimate_time(scenario_, g);
    }
    last_ms_ = timer.nsecsElapsed() / 1e6;
    emit changed();
}

AdviceReport Controller::advice() {
    // With the fabric, "2x the GPUs" past one node is timed as it loads (the row
    // read 40,861 tokens/s and loaded as 40,680). One node's figures do not change:
    // time.cpp counts inter-node traffic only across nodes.
    const Scenario s = withFabric(scenario_);
    return advise(s, Observations{}, app::advice_context(presets_, s), 8);
}

// Counts past one node need the fabric between nodes, which the resolver only
// picks for a multi-node cluster: without it a 32-GPU plan row was timed with no
// inter-node traffic and read faster than the same row loaded into the editor
// (81,295 against 81,104 tokens/s). The default is the policy's, as for sizing.
Scenario Controller::withFabric(Scenario s) {
    if (s.cluster.inter_node.id.empty())
        if (auto l = load_link(presets_, default_inter_node_link_id(s.cluster.gpu), "inter_node")) s.cluster.inter_node = *l;
    return s;
}

bool Controller::loadCalibration(const QString& path, QString* error) {
    std::string text, why;
    if (!app::read_text_file(path.toStdString(), text, why)) {
        if (error) *error = path + ": cannot read calibration profile: " + QString::fromStdString(why);
        return false;
    }
    auto c = parse_calibration_toml(text, path.toStdString());
    if (!c) {
        if (error) *error = QString::fromStdString(c.error().message());
        return false;
    }
    calibration_ = *c;
    evaluate();
    return true;
}

void Controller::clearCalibration() {
    calibration_ = Calibration{};
    evaluate();
}

std::optional<RatioBand> Controller::band(BandKind k, const Scenario& s) const { return app::prediction_band(residuals_, k, s); }

QString Controller::modelRef() const {
    if (input_.model_inline) return {};
    return QString::fromStdString(input_.model.value_or(""));
}

QString Controller::commandLine() const {
    if (!valid_) return {};
    return QString::fromStdString(app::command_line(scenario_, modelRef().toStdString()));
}

bool Controller::openScenario(const QString& path, QString* error) {
    std::string text, why;
    if (!app::read_text_file(path.toStdString(), text, why)) {
        if (error) *error = path + ": " + QString::fromStdString(why);
        return false;
    }
    auto in = parse_scenario_toml(text, path.toStdString());
    if (!in) {
        if (error) *error = QString::fromStdString(in.error().message());
        return false;
    }
    setInput(*in);
    return true;
}

bool Controller::saveScenario(const QString& path, QString* error) const {
    if (!valid_) {
        if (error) *error = "the scenario is not valid: " + errors_;
        return false;
    }
    std::string why;
    if (!app::write_file_atomically(path.toStdString(), scenario_to_toml(scenario_, modelRef().toStdString()), why)) {
        if (error) *error = QString::fromStdString(why);
        return false;
    }
    return true;
}

SizingReport Controller::sizingReport(double tokens, double deadline_days, std::vector<Diagnostic>* invalid) {
    SizingGoal goal;
    goal.tokens = tokens;
    goal.deadline_s = deadline_days * 86400;
    // The rent and price entered for the edited GPU apply to it in the report.
    const std::string gpu_id = scenario_.cluster.gpu.id;
    if (run_.rent_usd_per_gpu_hour > 0) goal.rent_usd_per_gpu_hour[gpu_id] = run_.rent_usd_per_gpu_hour;
    if (run_.purchase_usd_per_gpu > 0) goal.price_usd_per_gpu[gpu_id] = run_.purchase_usd_per_gpu;
    // The cluster being edited first, then every priced GPU preset in its usual
    // node, as `trainplan size` compares them.
    std::vector<SizingCandidate> candidates{{scenario_.cluster, "", "", 0}};
    for (const auto& id : app::priced_gpu_candidates(presets_, goal, invalid)) {
        if (id == scenario_.cluster.gpu.id) continue;
        if (auto c = app::sizing_candidate_cluster(presets_, id, invalid)) candidates.push_back({*c, "", "", 0});
    }
    // The validation residuals as `trainplan size` passes them: the report's
    // deadline and memory margin then hold at the goal's confidence (0.9, the
    // CLI's --confidence default), not at the point estimate (issue 12/13).
    const IntervalTable* bands = residuals_ && !residuals_->entries.empty() ? &*residuals_ : nullptr;
    return size_hardware(scenario_, scenario_.setup.global_batch(), candidates, goal, 0, bands);
}

bool Controller::exportReport(const QString& path, double tokens, double deadline_days, QString* error) {
    if (!valid_) {
        if (error) *error = "the scenario is not valid: " + errors_;
        return false;
    }
    // A preset file that does not parse is reported, not left out of the comparison silently.
    std::vector<Diagnostic> invalid;
    const SizingReport report = sizingReport(tokens, deadline_days, &invalid);
    if (!invalid.empty()) {
        if (error) *error = QString::fromStdString(Error(invalid).message());
        return false;
    }
    const std::string html = app::report_html(report);
    std::string why;
    if (!path.endsWith(".pdf", Qt::CaseInsensitive)) {
        if (!app::write_file_atomically(path.toStdString(), html, why)) {
            if (error) *error = QString::fromStdString(why);
            return false;
        }
        return true;
    }
    // PDF: Qt's rich text has no SVG, so each chart is rendered to an image first.
    QString doc_html = QString::fromStdString(html);
    QTextDocument doc;
    static const QRegularExpression svg_re("<svg[\\s\\S]*?</svg>");
    int n = 0;
    for (auto it = svg_re.globalMatch(doc_html); it.hasNext();) {
        const auto m = it.next();
        QSvgRenderer renderer(m.captured(0).toUtf8());
        QImage img(renderer.defaultSize() * 2, QImage::Format_ARGB32);
        img.fill(Qt::white);
        QPainter p(&img);
        renderer.render(&p);
        const QString name = QString("chart%1.png").arg(n++);
        doc.addResource(QTextDocument::ImageResource, QUrl(name), img);
        doc_html.replace(m.captured(0), QString("<img src=\"%1\" width=\"%2\">").arg(name).arg(renderer.defaultSize().width()));
    }
    doc.setHtml(doc_html);
    // Printed in memory, then written like every other output (random O_EXCL |
    // O_NOFOLLOW temporary, permissions kept, only a regular file replaced):
    // never through a predictable "PATH.tmp" another user could plant a link at.
    QByteArray bytes;
    {
        QBuffer buffer(&bytes);
        buffer.open(QIODevice::WriteOnly);
        QPdfWriter pdf(&buffer);
        pdf.setPageSize(QPageSize(QPageSize::A4));
        pdf.setResolution(150);
        doc.print(&pdf);
    }
    if (bytes.isEmpty()) {
        if (error) *error = path + ": cannot write the PDF";
        return false;
    }
    if (!app::write_file_atomically(path.toStdString(), std::string(bytes.constData(), static_cast<size_t>(bytes.size())), why)) {
        if (error) *error = QString::fromStdString(why);
        return false;
    }
    return true;
}

void Controller::pin(const QString& label) {
    if (!valid_) return;
    pinned_.push_back({label, scenario_, memory_.peak(), time_});
    emit pinsChanged();
}

void Controller::clearPins() {
    pinned_.clear();
    emit pinsChanged();
}

}  // namespace trainplan::gui
