#include "mainwindow.hpp"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QChartView>
#include <QClipboard>
#include <QCursor>
#include <QGuiApplication>
#include <QPalette>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QScrollBar>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "charts.hpp"
#include "trainplan/app/format.hpp"
#include "trainplan/app/intervals.hpp"
#include "trainplan/moves.hpp"
#include "trainplan/opgraph.hpp"
#include "trainplan/search.hpp"
#include "trainplan/units.hpp"

namespace trainplan::gui {

namespace {

QComboBox* combo(const char* name, const QStringList& items, QWidget* parent) {
    auto* c = new QComboBox(parent);
    c->setObjectName(name);
    c->addItems(items);
    return c;
}
QSpinBox* spin(const char* name, int lo, int hi, int value, QWidget* parent) {
    auto* s = new QSpinBox(parent);
    s->setObjectName(name);
    s->setRange(lo, hi);
    s->setValue(value);
    s->setKeyboardTracking(false);
    return s;
}
QString gbtext(double bytes) { return QString("%1 GB").arg(bytes / units::GB, 0, 'f', 2); }
QString layout_text(const Scenario& s);
// "llama-2-13b / 8 x a100-sxm-80gb / tp2 pp1 dp4 sp"
QString pin_label(const Scenario& s) {
    return QString("%1 / %2 x %3 / %4").arg(QString::fromStdString(s.model.id), QString::number(s.cluster.num_gpus),
                                            QString::fromStdString(s.cluster.gpu.id), layout_text(s));
}
QString layout_text(const Scenario& s) { return QString::fromStdString(app::layout_text(s)); }
void set_combo(QComboBox* c, const QString& v) {
    const int i = c->findText(v);
    if (i >= 0) c->setCurrentIndex(i);
    else if (c->isEditable()) c->setEditText(v);
}

// Combo and spin boxes of the editor take the mouse wheel only once focused
// (clicked or tabbed into); otherwise the wheel scrolls the editor, as in a web
// form (issue 12: the wheel flipped Method from full to qlora).
class WheelToScroll final : public QObject {
public:
    WheelToScroll(QScrollArea* area, QObject* parent) : QObject(parent), area_(area) {}
    bool eventFilter(QObject* o, QEvent* e) override {
        if (e->type() != QEvent::Wheel) return false;
        auto* w = qobject_cast<QWidget*>(o);
        if (!w || w->hasFocus()) return false;
        QCoreApplication::sendEvent(area_->verticalScrollBar(), e);
        return true;
    }

private:
    QScrollArea* area_;
};

// A label whose text never sets the window's width: it wraps, and the layout
// ignores its one-line width (issue 12: an invalid model name widened the
// window from 1,440 to 1,666 px). The whole text stays in the tooltip.
void never_widens(QLabel* l) {
    l->setWordWrap(true);
    l->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    l->setMinimumWidth(0);
}

// Whether a form field matters for the scenario: LoRA settings for LoRA and
// QLoRA, quantization settings for QLoRA (the conditions rules.cpp checks them
// under); the editor greys out the rest.
bool field_applies(const Field& f, const Scenario& s) {
    const std::string key = f.key;
    if (key.rfind("lora_", 0) == 0 || key == "train_embeddings") return s.setup.method != Method::Full;
    if (key == "quant" || key == "double_quant" || key == "kbit_upcast") return s.setup.method == Method::QLoRA;
    // Settings of one engine, precision or policy only (their help says which).
    const TrainingSetup& t = s.setup;
    if (key == "tf32") return t.precision == Precision::FP32;
    if (key == "grad_accum_fusion") return t.framework == Framework::Megatron;
    if (key == "nccl") return s.cluster.num_gpus > 1 && s.cluster.intra_node.nvls;  // only NVLS buffers depend on it
    if (key == "recompute_method" || key == "recompute_layers") return t.recompute == Recompute::Full;
    if (key == "ds_sub_group_size" || key == "ds_prefetch_bucket" || key == "ds_max_reuse_distance") return runs_deepspeed_zero3(t);
    if (key == "fused_linear_ce") return fused_linear_ce_runs(t);
    if (key == "ds_reduce_bucket") return runs_deepspeed_zero(t);
    if (key == "ds_overlap_comm") return runs_deepspeed_zero(t);
    if (key == "fsdp_limit_all_gathers") return t.fsdp != FsdpStrategy::None;
    if (key == "ds_gather_per_tensor") return t.zero_stage == 3 && t.fsdp == FsdpStrategy::None;
    if (key == "ds_reduce_per_rank") return runs_deepspeed_zero12(t);
    if (key == "ddp_bucket_view") return runs_torch_ddp(t);
    return true;
}

}  // namespace

MainWindow::MainWindow(Controller* controller, QWidget* parent) : QMainWindow(parent), c_(controller) {
    setObjectName("mainWindow");
    setWindowTitle("trainplan -- will it fit, how fast, what to buy");
    auto* split = new QSplitter(this);
    auto* scroll = new QScrollArea(split);
    scroll->setWidgetResizable(true);
    auto* editor = new QWidget(scroll);
    buildEditor(editor);
    scroll->setWidget(editor);
    scroll->setMinimumWidth(400);
    scroll_ = scroll;
    auto* wheel = new WheelToScroll(scroll, this);
    for (QWidget* w : editor->findChildren<QWidget*>())
        if (qobject_cast<QComboBox*>(w) || qobject_cast<QAbstractSpinBox*>(w)) {
            w->setFocusPolicy(Qt::StrongFocus);
            w->installEventFilter(wheel);
        }
    tabs_ = new QTabWidget(split);
    tabs_->setObjectName("tabs");
    auto* results = new QWidget;
    buildResults(results);
    tabs_->addTab(results, "Results");
    auto* sweeps = new QWidget;
    buildSweeps(sweeps);
    tabs_->addTab(sweeps, "Sweeps");
    auto* plan = new QWidget;
    buildPlan(plan);
    tabs_->addTab(plan, "Plan");
    auto* compare = new QWidget;
    buildCompare(compare);
    tabs_->addTab(compare, "Compare");
    auto* advice = new QWidget;
    buildAdvice(advice);
    tabs_->addTab(advice, "Advice");
    split->addWidget(scroll);
    split->addWidget(tabs_);
    split->setStretchFactor(1, 1);
    setCentralWidget(split);
    update_label_ = new QLabel(this);
    update_label_->setObjectName("updateTimeLabel");
    statusBar()->addPermanentWidget(update_label_);
    buildMenus();
    connect(c_, &Controller::changed, this, &MainWindow::showResults);
    connect(c_, &Controller::pinsChanged, this, &MainWindow::showCompare);
    connect(tabs_, &QTabWidget::currentChanged, this, [this](int i) {
        if (tabs_->widget(i)->objectName() == "adviceTab") showAdvice();
        if (tabs_->widget(i)->objectName() == "sweepsTab") runSweep();
    });
    resize(1280, 800);
    // The token budget shown in the editor is the one evaluated from the start
    // (issue 12: time and energy appeared only after a rent was typed).
    RunOptions run = c_->run();
    run.tokens_to_train = tokens_->value() * 1e9;
    run.rent_usd_per_gpu_hour = rent_->value();
    c_->setRun(run);
    // The controller's input stays minimal (model, GPU, count): the form shows the
    // resolved values, so a method's recipe defaults (QLoRA: bf16, full recompute)
    // follow until a field is set.
    showInput();
}

MainWindow::~MainWindow() {
    cancelPlan();
    if (plan_thread_ && plan_thread_->joinable()) plan_thread_->join();
}

namespace {

// "gpus_per_node" -> "gpusPerNode": widget object names come from the schema keys.
QString camel(const char* key) {
    QString out;
    bool up = false;
    for (const char* p = key; *p; ++p) {
        if (*p == '_') { up = true; continue; }
        out += up ? QChar(*p).toUpper() : QChar(*p);
        up = false;
    }
    return out;
}

// A field whose value may be left to the resolver (it shows "(default)").
bool has_default_state(const Field& f) {
    if (f.rule.type == FieldType::Text) return f.rule.preset != PresetKind::Gpu;
    static const Scenario defaults{};
    return f.read && !f.read(defaults);
}

constexpr const char* kDefault = "(default)";
constexpr int kDefaultRole = Qt::UserRole + 1;  // marks a combo's "(default)" entry

// The combo's "(default)" entry, or -1 where it has none.
int default_index(const QComboBox* c) { return c->count() > 0 && c->itemData(0, kDefaultRole).toBool() ? 0 : -1; }

}  // namespace

QWidget* MainWindow::makeFieldWidget(const Field& f, QWidget* host) {
    const FieldRule& r = f.rule;
    const QString name = camel(f.key);
    const bool optional = has_default_state(f);
    QWidget* w = nullptr;
    switch (r.type) {
        case FieldType::Int: {
            const int hi = static_cast<int>(std::min<double>(r.hi, std::numeric_limits<int>::max()));
            const int lo = static_cast<int>(r.lo) - (optional ? 1 : 0);
            auto* s = spin(qPrintable(name + "Spin"), lo, hi, lo, host);
            if (optional) s->setSpecialValueText(kDefault);
            w = s;
            break;
        }
        case FieldType::Number: {
            auto* d = new QDoubleSpinBox(host);
            d->setObjectName(name + "Spin");
            // Counts with a huge range (DeepSpeed bucket and sub-group sizes, in
            // elements) are whole numbers: no decimals ("500000000", not "500000000.0000").
            const int decimals = r.lo >= 1 && r.hi >= 1e9 ? 0 : 4;
            d->setDecimals(decimals);
            const double step = decimals == 0 ? 1.0 : 0.0001;
            d->setRange(r.lo - (optional ? step : 0), r.hi);
            d->setSingleStep(r.hi <= 1 ? 0.01 : 1);
            if (optional) d->setSpecialValueText(kDefault);
            d->setKeyboardTracking(false);
            w = d;
            break;
        }
        case FieldType::Bool: {
            auto* c = new QCheckBox(f.label, host);
            c->setObjectName(name + "Check");
            w = c;
            break;
        }
        case FieldType::Enum: {
            auto* c = combo(qPrintable(name + "Combo"), {}, host);
            // A value that follows other settings (the stack's engine, QLoRA's
            // precision) can be handed back to them: the first entry, shown as
            // "(default: <what it resolves to>)" while chosen.
            if (f.contextual_default) {
                c->addItem(kDefault);
                c->setItemData(0, true, kDefaultRole);
                c->setItemData(0, QString("follows the other settings (as the command line does when --%1 is not given)").arg(QString(f.key).replace('_', '-')),
                               Qt::ToolTipRole);
            }
            for (const EnumEntry& e : r.choices->entries) {
                c->addItem(e.name);
                c->setItemData(c->count() - 1, QString(e.help), Qt::ToolTipRole);
            }
            w = c;
            break;
        }
        case FieldType::LoraTargets: {
            auto* c = combo(qPrintable(name + "Combo"), {"all", "attention", "mlp", "q,v", "q,k,v,o"}, host);
            c->setEditable(true);
            w = c;
            break;
        }
        case FieldType::Text: {
            QStringList items = c_->names(*r.preset);
            if (optional) items.prepend(kDefault);
            w = combo(qPrintable(name + "Combo"), items, host);
            break;
        }
    }
    w->setToolTip(QString("%1 (%2 = ...): %3").arg(f.flag, f.key, f.help));
    return w;
}

std::optional<FieldValue> MainWindow::widgetValue(const Field& f, QWidget* w) const {
    auto text = [&](const QString& t) -> std::optional<FieldValue> {
        if (t == kDefault) return std::nullopt;
        auto v = value_from_text(f.rule, t.toStdString(), f.key);
        if (!v) return std::nullopt;
        return *v;
    };
    if (auto* s = qobject_cast<QSpinBox*>(w)) {
        if (!s->specialValueText().isEmpty() && s->value() == s->minimum()) return std::nullopt;
        return std::int64_t{s->value()};
    }
    if (auto* d = qobject_cast<QDoubleSpinBox*>(w)) {
        if (!d->specialValueText().isEmpty() && d->value() == d->minimum()) return std::nullopt;
        return d->value();
    }
    if (auto* c = qobject_cast<QCheckBox*>(w)) return c->isChecked();
    if (auto* c = qobject_cast<QComboBox*>(w)) {
        if (default_index(c) >= 0 && c->currentIndex() == default_index(c)) return std::nullopt;
        return text(c->currentText().trimmed());
    }
    return std::nullopt;
}

void MainWindow::showFieldValue(const Field& f, QWidget* w, const std::optional<FieldValue>& v) {
    const QSignalBlocker block(w);
    if (auto* s = qobject_cast<QSpinBox*>(w)) s->setValue(v ? static_cast<int>(std::min<std::int64_t>(std::get<std::int64_t>(*v), s->maximum())) : s->minimum());
    else if (auto* d = qobject_cast<QDoubleSpinBox*>(w)) d->setValue(v ? std::get<double>(*v) : d->minimum());
    else if (auto* c = qobject_cast<QCheckBox*>(w)) c->setChecked(v && std::get<bool>(*v));
    else if (auto* c = qobject_cast<QComboBox*>(w)) {
        if (!v && default_index(c) >= 0) c->setCurrentIndex(default_index(c));
        else set_combo(c, v ? QString::fromStdString(value_to_text(f.rule, *v)) : QString(kDefault));
    }
}

// Widgets of fields the input leaves to the resolver show the resolved value
// (QLoRA's bf16 and full recompute, dp); fields the user set keep what was typed.
void MainWindow::refreshFields() {
    for (const auto& [f, w] : field_widgets_) {
        if (c_->valid()) {
            const bool on = field_applies(*f, c_->scenario());
            w->setEnabled(on);
            if (auto* form = qobject_cast<QFormLayout*>(w->parentWidget() ? w->parentWidget()->layout() : nullptr))
                if (QWidget* label = form->labelForField(w)) label->setEnabled(on);
        }
        if (f->get(c_->input())) continue;
        if (!c_->valid()) continue;
        std::optional<FieldValue> v = f->read ? f->read(c_->scenario()) : std::nullopt;
        if (has_default_state(*f) && f->rule.type == FieldType::Text && f->rule.preset != PresetKind::Gpu) v.reset();
        if (auto* c = qobject_cast<QComboBox*>(w); c && default_index(c) >= 0) {
            // Left to the other settings: the "(default)" entry, naming what it resolves to.
            const QSignalBlocker block(c);
            c->setItemText(default_index(c), v ? QString("%1: %2)").arg(QString(kDefault).chopped(1), QString::fromStdString(value_to_text(f->rule, *v)))
                                                : QString(kDefault));
            v.reset();
        }
        showFieldValue(*f, w, v);
    }
    if (c_->valid()) dp_label_->setText(QString::number(c_->scenario().setup.layout.dp));
}

void MainWindow::fieldEdited(const Field& f, QWidget* w) {
    if (loading_) return;
    QElapsedTimer timer;
    timer.start();
    ScenarioInput in = c_->input();
    if (auto v = widgetValue(f, w)) f.set(in, *v);
    else f.clear(in);
    in.origin.erase(f.key);  // set here now, no longer where a file set it
    c_->setInput(in);  // emits changed() -> showResults()
    repaint_ms_ = timer.nsecsElapsed() / 1e6;
    update_label_->setText(QString("updated in %1 ms (model %2 ms)").arg(repaint_ms_, 0, 'f', 2).arg(c_->lastUpdateMs(), 0, 'f', 2));
}

void MainWindow::buildModelGroup(QFormLayout* fm, QWidget* host) {
    model_ = combo("modelCombo", c_->names(PresetKind::Model), host);
    model_->setEditable(true);
    model_->setToolTip("A preset, a size shorthand (7b, 13b, 70b: Llama-shaped, approximate), or a file via Open model");
    open_model_ = new QPushButton("Open TOML / config.json...", host);
    open_model_->setObjectName("openModelButton");
    fm->addRow("Model", model_);
    fm->addRow("", open_model_);
    layers_ = spin("layersSpin", 1, 100000, 32, host);
    hidden_ = spin("hiddenSpin", 1, 1 << 22, 4096, host);
    heads_ = spin("headsSpin", 1, 65536, 32, host);
    kv_heads_ = spin("kvHeadsSpin", 1, 65536, 32, host);
    ffn_ = spin("ffnSpin", 1, 1 << 22, 11008, host);
    vocab_ = spin("vocabSpin", 1, 1 << 24, 32000, host);
    auto pair = [](QWidget* a, QWidget* b) {
        auto* w = new QWidget;
        auto* h = new QHBoxLayout(w);
        h->setContentsMargins(0, 0, 0, 0);
        h->addWidget(a);
        h->addWidget(b);
        return w;
    };
    fm->addRow("Layers", layers_);
    fm->addRow("Hidden", hidden_);
    fm->addRow("Heads / KV heads", pair(heads_, kv_heads_));
    fm->addRow("FFN", ffn_);
    fm->addRow("Vocabulary", vocab_);
    max_seq_ = spin("maxSeqSpin", 1, 1 << 26, 4096, host);
    auto names = [](const EnumTable& t) {
        QStringList l;
        for (const auto& n : t.names()) l << QString::fromStdString(n);
        return l;
    };
    activation_ = combo("activationCombo", names(enum_table<Activation>()), host);
    norm_ = combo("normCombo", names(enum_table<NormKind>()), host);
    tied_ = new QCheckBox("Tied embeddings", host);
    tied_->setObjectName("tiedCheck");
    experts_ = spin("expertsSpin", 0, 65536, 0, host);
    experts_->setSpecialValueText("dense");
    top_k_ = spin("topKSpin", 1, 65536, 2, host);
    fm->addRow("Context", max_seq_);
    fm->addRow("Activation / norm", pair(activation_, norm_));
    fm->addRow(tied_);
    fm->addRow("Experts / top-k", pair(experts_, top_k_));
}

// One group per schema section, one widget per row.
void MainWindow::buildFieldGroups(QVBoxLayout* v, QWidget* host) {
    const std::map<std::string, QString> titles{{"hardware", "Hardware"}, {"training", "Training"}, {"parallel", "Parallel layout"}};
    for (const std::string& section : scenario_sections()) {
        auto* g = new QGroupBox(titles.count(section) ? titles.at(section) : QString::fromStdString(section), host);
        auto* form = new QFormLayout(g);
        v->addWidget(g);
        for (const Field& f : scenario_fields()) {
            if (section != f.section || !f.in_form) continue;
            QWidget* w = makeFieldWidget(f, host);
            field_widgets_.push_back({&f, w});
            if (f.rule.type == FieldType::Bool) form->addRow(w);
            else form->addRow(f.label, w);
            if (auto* s = qobject_cast<QSpinBox*>(w)) connect(s, qOverload<int>(&QSpinBox::valueChanged), this, [this, &f, w] { fieldEdited(f, w); });
            else if (auto* d = qobject_cast<QDoubleSpinBox*>(w)) connect(d, qOverload<double>(&QDoubleSpinBox::valueChanged), this, [this, &f, w] { fieldEdited(f, w); });
            else if (auto* c = qobject_cast<QCheckBox*>(w)) connect(c, &QCheckBox::toggled, this, [this, &f, w] { fieldEdited(f, w); });
            else if (auto* c = qobject_cast<QComboBox*>(w)) connect(c, &QComboBox::currentTextChanged, this, [this, &f, w] { fieldEdited(f, w); });
        }
        if (section == "parallel") {
            dp_label_ = new QLabel(host);
            dp_label_->setObjectName("dpLabel");
            form->addRow("DP", dp_label_);
        }
    }
}

void MainWindow::buildBudgetGroup(QFormLayout* fb, QWidget* host) {
    tokens_ = new QDoubleSpinBox(host);
    tokens_->setObjectName("tokensSpin");
    tokens_->setRange(0, 1e9);
    tokens_->setDecimals(1);
    tokens_->setSuffix(" B tokens");
    tokens_->setValue(1);
    rent_ = new QDoubleSpinBox(host);
    rent_->setObjectName("rentSpin");
    rent_->setRange(0, option_field("rent").rule.hi);
    rent_->setDecimals(2);
    rent_->setPrefix("$ ");
    rent_->setSuffix(" / GPU-hour");
    fb->addRow("Train", tokens_);
    fb->addRow("Rent", rent_);
}

void MainWindow::connectModelGroup() {
    connect(model_, &QComboBox::currentTextChanged, this, [this] {
        if (!loading_) readInputs();
    });
    // Editing an architecture field turns the model into an inline one.
    auto edited = [this] {
        if (loading_ || !c_->valid()) return;
        ScenarioInput in = c_->input();
        ModelSpec m = c_->scenario().model;
        m.num_layers = layers_->value();
        m.hidden = hidden_->value();
        m.num_heads = heads_->value();
        m.num_kv_heads = kv_heads_->value();
        m.head_dim = m.hidden / std::max(1, heads_->value());
        m.ffn = ffn_->value();
        if (m.is_moe()) m.moe.expert_ffn = m.ffn;
        m.vocab = vocab_->value();
        m.max_seq_len = max_seq_->value();
        m.activation = parse_enum<Activation>(activation_->currentText().toStdString()).value_or(m.activation);
        const bool layernorm = parse_enum<NormKind>(norm_->currentText().toStdString()) == NormKind::LayerNorm;
        if (layernorm != (m.norm == NormKind::LayerNorm)) m.norm_bias = layernorm;
        m.norm = layernorm ? NormKind::LayerNorm : NormKind::RMSNorm;
        m.tied_embeddings = tied_->isChecked();
        m.moe.num_experts = experts_->value();
        if (m.is_moe()) {
            m.moe.top_k = std::min(top_k_->value(), experts_->value());
            if (m.moe.shared_expert_ffn == 0) m.moe.shared_expert_ffn = m.moe.expert_ffn;
        }
        m.name = QString::fromStdString(m.name).remove(" (edited)").toStdString() + " (edited)";
        in.model_inline = m;
        in.model.reset();
        loading_ = true;
        model_->setEditText(QString::fromStdString(m.name));
        loading_ = false;
        c_->setInput(in);
    };
    for (QSpinBox* s : {layers_, hidden_, heads_, kv_heads_, ffn_, vocab_, max_seq_, experts_, top_k_})
        connect(s, qOverload<int>(&QSpinBox::valueChanged), this, edited);
    for (QComboBox* cb : {activation_, norm_}) connect(cb, &QComboBox::currentTextChanged, this, edited);
    connect(tied_, &QCheckBox::toggled, this, edited);
    connect(open_model_, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, "Open a model", {}, "Model (*.toml *.json)");
        if (!f.isEmpty()) {
            loading_ = true;
            model_->setEditText(f);
            loading_ = false;
            readInputs();
        }
    });
    for (QDoubleSpinBox* d : {tokens_, rent_})
        connect(d, qOverload<double>(&QDoubleSpinBox::valueChanged), this, [this] {
            RunOptions r = c_->run();
            r.tokens_to_train = tokens_->value() * 1e9;
            r.rent_usd_per_gpu_hour = rent_->value();
            c_->setRun(r);
        });
}

void MainWindow::buildEditor(QWidget* host) {
    auto* v = new QVBoxLayout(host);
    auto* gm = new QGroupBox("Model", host);
    auto* fm = new QFormLayout(gm);
    v->addWidget(gm);
    buildModelGroup(fm, host);
    buildFieldGroups(v, host);
    auto* gb = new QGroupBox("Token budget and price", host);
    auto* fb = new QFormLayout(gb);
    v->addWidget(gb);
    buildBudgetGroup(fb, host);
    // Calibration (issue 13): a profile from `trainplan calibrate -o`, what it
    // changes, and clearing it (the CLI's --calibration).
    auto* gc = new QGroupBox("Calibration", host);
    auto* vc = new QVBoxLayout(gc);
    calib_label_ = new QLabel(gc);
    calib_label_->setObjectName("calibrationLabel");
    never_widens(calib_label_);
    vc->addWidget(calib_label_);
    auto* hc = new QHBoxLayout;
    auto* load = new QPushButton("Load profile...", gc);
    load->setObjectName("loadCalibrationButton");
    load->setToolTip("A calibration profile written by `trainplan calibrate -o` (the CLI's --calibration)");
    calib_clear_ = new QPushButton("Clear", gc);
    calib_clear_->setObjectName("clearCalibrationButton");
    hc->addWidget(load);
    hc->addWidget(calib_clear_);
    hc->addStretch();
    vc->addLayout(hc);
    v->addWidget(gc);
    connect(load, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, "Load calibration profile", {}, "Calibration profile (*.toml)");
        if (f.isEmpty()) return;
        QString err;
        if (!c_->loadCalibration(f, &err)) QMessageBox::warning(this, "Cannot load calibration profile", err);
    });
    connect(calib_clear_, &QPushButton::clicked, c_, &Controller::clearCalibration);
    error_ = new QLabel(host);
    error_->setObjectName("errorLabel");
    never_widens(error_);
    error_->setStyleSheet("color: #d1242f; font-weight: 600;");
    v->addWidget(error_);
    v->addStretch();
    connectModelGroup();
    connect(c_, &Controller::changed, this, &MainWindow::refreshFields);
}

// The model field: a preset, shorthand or path; the other fields stay as set.
void MainWindow::readInputs() {
    if (loading_) return;
    QElapsedTimer timer;
    timer.start();
    ScenarioInput in = c_->input();
    const QString model = model_->currentText().trimmed();
    if (!(in.model_inline && model.endsWith("(edited)"))) {
        in.model_inline.reset();
        in.model = model.toStdString();
        in.origin.erase("model");
    }
    c_->setInput(in);  // emits changed() -> showResults()
    repaint_ms_ = timer.nsecsElapsed() / 1e6;
    update_label_->setText(QString("updated in %1 ms (model %2 ms)").arg(repaint_ms_, 0, 'f', 2).arg(c_->lastUpdateMs(), 0, 'f', 2));
}

void MainWindow::setArchitectureFields(const ModelSpec& m) {
    layers_->setValue(static_cast<int>(m.num_layers));
    hidden_->setValue(static_cast<int>(m.hidden));
    heads_->setValue(static_cast<int>(m.num_heads));
    kv_heads_->setValue(static_cast<int>(m.num_kv_heads));
    ffn_->setValue(static_cast<int>(m.is_moe() ? m.moe.expert_ffn : m.ffn));
    vocab_->setValue(static_cast<int>(m.vocab));
    max_seq_->setValue(static_cast<int>(std::min<std::int64_t>(m.max_seq_len, 1 << 26)));
    activation_->setCurrentText(to_string(m.activation));
    norm_->setCurrentText(to_string(m.norm));
    tied_->setChecked(m.tied_embeddings);
    experts_->setValue(m.moe.num_experts);
    top_k_->setValue(std::max(1, m.moe.top_k));
}

// Every form field of `s` becomes an input (the global batch standing for the
// accumulation, the GPU count for dp), so the editor re-evaluates exactly this scenario.
void MainWindow::loadScenario(const Scenario& s, const QString& model_ref) {
    loading_ = true;
    ScenarioInput in;
    for (const Field& f : scenario_fields())
        if (f.in_form && f.read)
            if (auto v = f.read(s)) f.set(in, *v);
    if (model_ref.isEmpty()) in.model_inline = s.model;
    else in.model = model_ref.toStdString();
    // A field whose default depends on others (precision and recompute on the
    // method) stays a default where it has the default's value, so it follows a
    // later change of what it depends on (issue 12: QLoRA chosen after loading a
    // row kept bf16-mixed and no recompute, 36.97 GB instead of the recipe's 10.99 GB).
    for (const Field& f : scenario_fields()) {
        if (!f.contextual_default || !f.get(in)) continue;
        ScenarioInput without = in;
        f.clear(without);
        auto r = resolve_scenario(without, c_->presets());
        if (r && f.read && f.read(*r) == f.get(in)) in = without;
    }
    const QList<QWidget*> all = findChildren<QWidget*>();
    for (QWidget* w : all) w->blockSignals(true);
    set_combo(model_, model_ref.isEmpty() ? QString::fromStdString(s.model.name) : model_ref);
    setArchitectureFields(s.model);
    for (const auto& [f, w] : field_widgets_) showFieldValue(*f, w, f->get(in));
    for (QWidget* w : all) w->blockSignals(false);
    loading_ = false;
    c_->setInput(in);
}

void MainWindow::showInput() {
    const ScenarioInput& in = c_->input();
    loading_ = true;
    const QList<QWidget*> all = findChildren<QWidget*>();
    for (QWidget* w : all) w->blockSignals(true);
    set_combo(model_, in.model_inline ? QString::fromStdString(in.model_inline->name) : c_->modelRef());
    // The architecture of the model named, even when the rest does not resolve.
    if (c_->valid()) setArchitectureFields(c_->scenario().model);
    else if (in.model_inline) setArchitectureFields(*in.model_inline);
    else if (in.model)
        if (auto m = load_model(c_->presets(), *in.model, "model")) setArchitectureFields(*m);
    for (const auto& [f, w] : field_widgets_) {
        if (auto v = f->get(in)) showFieldValue(*f, w, v);
        else if (has_default_state(*f)) showFieldValue(*f, w, std::nullopt);
    }
    for (QWidget* w : all) w->blockSignals(false);
    loading_ = false;
    refreshFields();
    showResults();
}

void MainWindow::buildResults(QWidget* host) {
    auto* v = new QVBoxLayout(host);
    banner_ = new QLabel(host);
    banner_->setObjectName("verdictBanner");
    banner_->setAlignment(Qt::AlignCenter);
    banner_->setMinimumHeight(44);
    never_widens(banner_);
    v->addWidget(banner_);
    auto* row = new QHBoxLayout;
    mem_chart_ = new QChartView(host);
    mem_chart_->setObjectName("memoryChart");
    mem_chart_->setRenderHint(QPainter::Antialiasing);
    mem_chart_->setMinimumHeight(300);
    row->addWidget(mem_chart_, 3);
    mem_table_ = new QTableWidget(9, 2, host);
    mem_table_->setObjectName("memoryTable");
    mem_table_->setHorizontalHeaderLabels({"term", "per GPU"});
    mem_table_->verticalHeader()->hide();
    mem_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    mem_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    row->addWidget(mem_table_, 2);
    v->addLayout(row, 3);
    time_chart_ = new QChartView(host);
    time_chart_->setObjectName("timeChart");
    time_chart_->setRenderHint(QPainter::Antialiasing);
    time_chart_->setMinimumHeight(170);
    v->addWidget(time_chart_, 1);
    metrics_ = new QLabel(host);
    metrics_->setObjectName("metricsLabel");
    metrics_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    never_widens(metrics_);
    v->addWidget(metrics_);
}

namespace {
// A style sheet set again re-polishes the widget and its layout even when equal.
void setStyleIfChanged(QWidget* w, const QString& css) {
    if (w->styleSheet() != css) w->setStyleSheet(css);
}
}  // namespace

void MainWindow::showResults() {
    const bool ok = c_->valid();
    error_->setText(ok ? QString() : "Not a valid configuration:\n" + c_->errors());
    error_->setVisible(!ok);
    error_->setToolTip(error_->text());
    showCalibration();
    if (!ok) {
        banner_->setText("INVALID: " + c_->errors().section('\n', 0, 0));
        banner_->setToolTip(c_->errors());
        setStyleIfChanged(banner_, "background: #9a6700; color: white; font-size: 16px; font-weight: 600; border-radius: 6px;");
        clearResults();
        return;
    }
    banner_->setToolTip({});
    const Scenario& s = c_->scenario();
    const MemoryEstimate& me = c_->memory();
    const MemoryBreakdown& m = me.peak();
    dp_label_->setText(QString::number(s.setup.layout.dp));
    if (!loading_) {
        const QList<QWidget*> arch = {layers_, hidden_, heads_, kv_heads_, ffn_, vocab_, max_seq_, experts_, top_k_, activation_, norm_, tied_};
        for (QWidget* w : arch) w->blockSignals(true);
        setArchitectureFields(s.model);
        for (QWidget* w : arch) w->blockSignals(false);
    }
    // P10-P90 bands (issue 13), as `simulate` prints them (app/intervals.hpp).
    const std::optional<RatioBand> mband = c_->band(BandKind::Memory, s);
    const std::optional<RatioBand> tband = c_->band(BandKind::StepTime, s);
    const QString mrange = mband ? QString(" (P10-P90 %1-%2)").arg(gbtext(m.total * mband->p10), gbtext(m.total * mband->p90)) : QString();
    if (m.fits() && mband && over_capacity_at_p90(*mband, m.firm(), m.capacity)) {
        // As `fit` says it: the estimate fits, the upper end of its band does not.
        banner_->setText(QString("FITS, but not at the P90 end: %1%4 of %2 per GPU, %3 headroom").arg(gbtext(m.total), gbtext(m.capacity), gbtext(m.headroom()), mrange));
        banner_->setToolTip("The estimate fits; published runs like this one peaked up to the P90 figure, which does not: leave more headroom before buying or launching.");
        setStyleIfChanged(banner_, "background: #9a6700; color: white; font-size: 16px; font-weight: 600; border-radius: 6px;");
    } else if (m.fits()) {
        // What the allocator gives back before an out-of-memory (layers gathered
        // ahead, the optimizer step's own segments): the headroom counts it as free,
        // as fit says.
        const QString back = QString::fromStdString(app::given_back_text(m));
        banner_->setText(QString("FITS: %1%4 of %2 per GPU, %3 headroom%5").arg(gbtext(m.total), gbtext(m.capacity), gbtext(m.headroom()), mrange,
                                                                            back.isEmpty() ? QString() : QString(" (%1 given back first)").arg(back)));
        banner_->setToolTip(back.isEmpty() ? QString()
                                           : QString("The peak includes the %1: they are held only while the card has room and given "
                                                     "back before it would run out, so the headroom counts them as free.").arg(back));
        setStyleIfChanged(banner_, "background: #1a7f37; color: white; font-size: 16px; font-weight: 600; border-radius: 6px;");
    } else if (m.total <= m.capacity) {
        banner_->setToolTip(QString());
        banner_->setText(QString("DOES NOT FIT in host memory: %1 per GPU offloaded, %2 over its share of the node's RAM")
                             .arg(gbtext(m.cpu), gbtext(m.cpu - m.host_capacity)));
        setStyleIfChanged(banner_, "background: #d1242f; color: white; font-size: 16px; font-weight: 600; border-radius: 6px;");
    } else {
        banner_->setToolTip(QString());
        banner_->setText(QString("DOES NOT FIT: needs %1%4 per GPU, %2 over the %3").arg(gbtext(m.total), gbtext(-m.headroom()), gbtext(m.capacity), mrange));
        setStyleIfChanged(banner_, "background: #d1242f; color: white; font-size: 16px; font-weight: 600; border-radius: 6px;");
    }
    const std::pair<const char*, double> terms[] = {{"weights", m.weights}, {"gradients", m.gradients}, {"optimizer", m.optimizer},
                                                    {"activations", m.activations}, {"logits", m.logits}, {"temporary", m.temporary},
                                                    {"framework", m.framework}, {"fragmentation", m.fragmentation}, {"total", m.total}};
    int r = 0;
    for (auto [name, v] : terms) {
        // Items made once; a repaint changes only the text that changed.
        if (!mem_table_->item(r, 1)) {
            auto* k = new QTableWidgetItem(name);
            auto* val = new QTableWidgetItem;
            val->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            const QString tip = memory_term_tooltip(name);
            k->setToolTip(tip);
            val->setToolTip(tip);
            mem_table_->setItem(r, 0, k);
            mem_table_->setItem(r, 1, val);
        }
        const QString text = gbtext(v);
        if (mem_table_->item(r, 1)->text() != text) mem_table_->item(r, 1)->setText(text);
        // Where DeepSpeed's step copies set the peak, the temporary row is them
        // (beyond the freed activations): say so in its name.
        QString key = std::string_view(name) == "temporary" && m.peak_at_step ? QString("temporary (optimizer step)") : QString(name);
        if (std::string_view(name) == "temporary" && m.peak_at_backward_end) key = "temporary (backward's end)";
        // Gradients freed between steps: the row holds what backward's start holds,
        // its tooltip the whole set and when it exists.
        if (std::string_view(name) == "gradients") {
            QString tip = memory_term_tooltip(name);
            if (m.grads_at_step > 0) {
                key = "gradients (backward's start)";
                tip += QString("\n\nzero_grad frees them between steps: backward's start holds the head's and one layer's, "
                               "and all %1 exist from late in backward to the optimizer step.")
                           .arg(gbtext(m.all_gradients() - m.ddp_buckets));
            }
            if (mem_table_->item(r, 1)->toolTip() != tip) {
                mem_table_->item(r, 0)->setToolTip(tip);
                mem_table_->item(r, 1)->setToolTip(tip);
            }
        }
        if (mem_table_->item(r, 0)->text() != key) mem_table_->item(r, 0)->setText(key);
        ++r;
    }
    // Charts are updated in place when their shape is unchanged (a repaint re-lays
    // no series, axis or legend); rebuilt when the stage count or band changes.
    const double p10 = mband ? mband->p10 : 0, p90 = mband ? mband->p90 : 0;
    if (!update_memory_chart(mem_chart_->chart(), me, p10, p90)) {
        QChart* old = mem_chart_->chart();
        mem_chart_->setChart(memory_chart(me, p10, p90));
        delete old;
    }
    if (!update_time_chart(time_chart_->chart(), c_->time().time)) {
        QChart* old = time_chart_->chart();
        time_chart_->setChart(time_chart(c_->time().time));
        delete old;
    }
    const TimeEstimate& te = c_->time();
    // Rates scale with 1 / step time: their P10 comes from the step's P90.
    const QString trange = tband ? QString(" (P10-P90 %1-%2)").arg(te.throughput.tokens_per_s / tband->p90, 0, 'f', 0).arg(te.throughput.tokens_per_s / tband->p10, 0, 'f', 0)
                                 : QString();
    QString text = QString("<b>%1 tokens/s</b>%6 (%2 per GPU), step %3 s, <b>MFU %4 %</b>, HFU %5 %")
                       .arg(te.throughput.tokens_per_s, 0, 'f', 0)
                       .arg(te.throughput.tokens_per_s / s.cluster.num_gpus, 0, 'f', 0)
                       .arg(te.time.step_s, 0, 'g', 4)
                       .arg(100 * te.throughput.mfu, 0, 'f', 1)
                       .arg(100 * te.throughput.hfu, 0, 'f', 1)
                       .arg(trange);
    if (tband) text += QString("<br><small>P10-P90: %1</small>").arg(QString::fromStdString(tband->regime).toHtmlEscaped());
    // Under LoRA / QLoRA MFU counts the base model's 6N per token, weight gradients the
    // frozen base never runs included (as simulate says it); HFU counts what runs.
    if (s.setup.method != Method::Full)
        text += QString("<br><small>MFU counts the base model's 6N FLOPs per token, the frozen weights' gradient GEMMs that never run "
                        "included (PaLM convention, comparable across methods); HFU counts the FLOPs executed.</small>");
    if (s.run.tokens_to_train > 0)
        text += QString("<br>%1 B tokens: %2 days, %3 GPU-hours, %4 MWh")
                    .arg(s.run.tokens_to_train / 1e9, 0, 'g', 4)
                    .arg(te.cost.train_time_s / 86400, 0, 'f', 1)
                    .arg(te.cost.gpu_hours, 0, 'f', 0)
                    .arg(te.cost.energy_kwh / 1e3, 0, 'f', 1) +
                (te.cost.rent_cost_usd > 0 ? QString(", $%1 rented").arg(te.cost.rent_cost_usd, 0, 'f', 0) : QString());
    // The one bottleneck classifier (core diagnosis.hpp), as advise and size use it.
    text += QString("<br>bottleneck: <b>%1</b> (the Advice tab explains it)").arg(to_string(classify(s, m, te.time)));
    text += "<br>" + QString::fromStdString(app::describe_params(s, me.trainable_params)).toHtmlEscaped();
    text += "<br><i>" + QString::fromStdString(app::describe_setup(s)).toHtmlEscaped() + "</i>";
    metrics_->setText(text);
}

// No numbers of a scenario that is not valid: the results of the one before
// would read as this one's (issue 12: an invalid scenario file opened over the
// default model's numbers).
void MainWindow::clearResults() {
    for (int r = 0; r < mem_table_->rowCount(); ++r)
        if (mem_table_->item(r, 1)) mem_table_->item(r, 1)->setText(QString::fromUtf8("\u2014"));
    for (QChartView* v : {mem_chart_, time_chart_}) {
        QChart* old = v->chart();
        auto* empty = new QChart;
        empty->setTitle("no result: the scenario is not valid");
        v->setChart(empty);
        delete old;
    }
    metrics_->setText("No result: fix the scenario (the errors are listed under the editor).");
    dp_label_->setText(QString::fromUtf8("\u2014"));
}

void MainWindow::showCalibration() {
    const Calibration& k = c_->calibration();
    calib_clear_->setEnabled(!k.source.empty());
    if (k.source.empty()) {
        calib_label_->setText("None: the preset and policy efficiencies.");
        calib_label_->setToolTip({});
        return;
    }
    const std::string changes = app::describe_calibration(k);
    QString text = QString("<b>%1</b>: %2").arg(QFileInfo(QString::fromStdString(k.source)).fileName().toHtmlEscaped(),
                                               changes.empty() ? QString("changes no efficiency factor")
                                                               : QString::fromStdString(changes).toHtmlEscaped());
    if (auto b = calibrated_band(k, BandKind::StepTime))
        text += QString("<br>P10-P90 from its residuals: %1").arg(QString::fromStdString(b->regime).toHtmlEscaped());
    calib_label_->setText(text);
    calib_label_->setToolTip(QString::fromStdString(k.source));
}

void MainWindow::buildSweeps(QWidget* host) {
    host->setObjectName("sweepsTab");
    auto* v = new QVBoxLayout(host);
    auto* top = new QHBoxLayout;
    sweep_kind_ = combo("sweepCombo", {"micro-batch", "sequence length", "GPU count"}, host);
    top->addWidget(new QLabel("Sweep over", host));
    top->addWidget(sweep_kind_);
    top->addStretch();
    v->addLayout(top);
    sweep_mem_ = new QChartView(host);
    sweep_mem_->setObjectName("sweepMemoryChart");
    sweep_tps_ = new QChartView(host);
    sweep_tps_->setObjectName("sweepThroughputChart");
    for (QChartView* cv : {sweep_mem_, sweep_tps_}) {
        cv->setRenderHint(QPainter::Antialiasing);
        v->addWidget(cv, 1);
    }
    connect(sweep_kind_, &QComboBox::currentTextChanged, this, &MainWindow::runSweep);
    connect(c_, &Controller::changed, this, [this] {
        if (tabs_->currentWidget() && tabs_->currentWidget()->objectName() == "sweepsTab") runSweep();
    });
}

void MainWindow::runSweep() {
    if (!c_->valid()) return;
    const Scenario base = c_->withFabric(c_->scenario());
    QVector<QPointF> mem, tps;
    QVector<bool> fits;
    QVector<ErrorBar> mem_bars, tps_bars;
    const QString kind = sweep_kind_->currentText();
    const LayerGraph g = build_layer_graph(base.model, base.setup);
    auto add = [&](double x, Scenario s) {
        if (!validate(s).empty()) return;
        const MemoryBreakdown m = estimate_memory(s, g).peak();
        const double t = estimate_time(s, g).throughput.tokens_per_s;
        mem.push_back({x, m.total / units::GB});
        tps.push_back({x, t});
        fits.push_back(m.fits());
        // Each point's P10-P90 band (its own regime: the GPU count changes the scale).
        if (auto b = c_->band(BandKind::Memory, s)) mem_bars.push_back({x, m.total * b->p10 / units::GB, m.total * b->p90 / units::GB});
        if (auto b = c_->band(BandKind::StepTime, s)) tps_bars.push_back({x, t / b->p90, t / b->p10});
    };
    QString xt;
    if (kind == "micro-batch") {
        xt = "micro-batch (global batch kept where it divides)";
        for (int mb = 1; mb <= 64; mb *= 2) {
            Scenario s = base;
            const std::int64_t per_replica = base.setup.micro_batch * base.setup.grad_accum;
            s.setup.micro_batch = mb;
            s.setup.grad_accum = std::max<std::int64_t>(1, per_replica / mb);
            add(mb, s);
        }
    } else if (kind == "sequence length") {
        xt = "sequence length";
        for (std::int64_t seq = 256; seq <= 131072; seq *= 2) {
            Scenario s = base;
            s.setup.seq_len = seq;
            add(static_cast<double>(seq), s);
        }
    } else {
        xt = "GPUs (data parallel, same global batch)";
        // The one GPU ladder; data parallel with the same global batch (core moves.hpp).
        const int mp = base.setup.layout.tp * base.setup.layout.pp;
        for (int n : gpu_ladder(growth_node_size(base.cluster), mp, std::max(mp * 256, 64))) {
            Scenario s = base;
            Changes ch;
            if (n != base.cluster.num_gpus && !set_data_parallel(s, n, ch)) continue;
            add(n, s);
        }
    }
    QChart* old = sweep_mem_->chart();
    sweep_mem_->setChart(line_chart("Memory per GPU (GB)", xt, "GB", mem, fits, mem_bars, c_->memory().peak().capacity / units::GB, "capacity"));
    delete old;
    old = sweep_tps_->chart();
    sweep_tps_->setChart(line_chart("Throughput (tokens/s)", xt, "tokens/s", tps, fits, tps_bars));
    delete old;
}

void MainWindow::buildPlan(QWidget* host) {
    host->setObjectName("planTab");
    auto* v = new QVBoxLayout(host);
    auto* top = new QHBoxLayout;
    plan_button_ = new QPushButton("Search layouts", host);
    plan_button_->setObjectName("planButton");
    plan_cancel_ = new QPushButton("Cancel", host);
    plan_cancel_->setObjectName("planCancelButton");
    plan_cancel_->setEnabled(false);
    plan_progress_ = new QProgressBar(host);
    plan_progress_->setObjectName("planProgress");
    top->addWidget(plan_button_);
    top->addWidget(plan_cancel_);
    top->addWidget(plan_progress_, 1);
    v->addLayout(top);
    auto* hint = new QLabel("Searches every layout for the current GPU count and for 1/4x to 4x of it (same global batch). "
                            "Double-click a row to load it into the editor.",
                            host);
    hint->setWordWrap(true);
    v->addWidget(hint);
    plan_table_ = new QTableWidget(0, 8, host);
    plan_table_->setObjectName("planTable");
    plan_table_->setHorizontalHeaderLabels({"GPUs", "layout", "micro x accum", "sharding", "recompute", "tokens/s", "MFU", "needs/GPU"});
    plan_table_->horizontalHeaderItem(7)->setToolTip(QString::fromUtf8(app::kNeedsMeaning.data(), static_cast<int>(app::kNeedsMeaning.size())) +
                                                     " (the Results tab shows the peak the card would show)");
    // Every column as wide as its header or its widest cell (the layout text carries
    // cp, ovl, act>host); the layout column takes what is left.
    plan_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    plan_table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    plan_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    plan_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    v->addWidget(plan_table_, 1);
    // Issue 14: the Pareto front of step time against memory headroom at the
    // current GPU count (core PlanResult::pareto); a click loads that layout.
    plan_chart_ = new QChartView(host);
    plan_chart_->setObjectName("planParetoChart");
    plan_chart_->setRenderHint(QPainter::Antialiasing);
    plan_chart_->setMinimumHeight(260);
    // No tooltip on the view itself: it would cover each point's own (layout, step, cost).
    v->addWidget(plan_chart_, 1);
    connect(plan_button_, &QPushButton::clicked, this, &MainWindow::startPlan);
    connect(plan_cancel_, &QPushButton::clicked, this, &MainWindow::cancelPlan);
    connect(plan_table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
        if (row >= 0 && row < plan_rows_.size()) loadScenario(plan_rows_[row].scenario, c_->modelRef());
    });
}

void MainWindow::startPlan() {
    if (!c_->valid() || (plan_thread_ && plan_thread_->joinable())) return;
    const Scenario base = c_->withFabric(c_->scenario());
    plan_cancel_flag_ = false;
    plan_button_->setEnabled(false);
    plan_cancel_->setEnabled(true);
    // The one GPU ladder (core moves.hpp) from a quarter to four times the current count.
    QVector<int> counts;
    const int n = base.cluster.num_gpus;
    const int node = growth_node_size(base.cluster);
    for (int k : gpu_ladder(node, std::max(1, n / 4), n * 4)) counts.push_back(k);
    // Progress in thousandths of the whole search (each GPU count an equal share).
    plan_progress_->setRange(0, 1000);
    plan_progress_->setValue(0);
    // The search runs on its own thread; it reads only its copies (base, counts)
    // and reports back through queued calls, so the GUI thread stays responsive.
    // The core calls `progress` on the searching thread: it posts the fraction
    // and returns false once Cancel was pressed (an atomic flag).
    plan_thread_ = std::make_unique<std::thread>([this, base, counts, node] {
        QVector<PlanCandidate> rows, front;
        int done = 0;
        const double share = 1.0 / static_cast<double>(std::max<qsizetype>(1, counts.size()));
        for (int k : counts) {
            if (plan_cancel_flag_) break;
            Scenario s = base;
            s.cluster.num_gpus = k;
            s.cluster.gpus_per_node = std::min(node, k);
            SearchSpace space;
            space.pareto = k == base.cluster.num_gpus;
            space.progress = [this, done, share](double f) {
                const int permille = static_cast<int>(1000 * share * (done + std::clamp(f, 0.0, 1.0)));
                QMetaObject::invokeMethod(this, [this, permille] { plan_progress_->setValue(permille); }, Qt::QueuedConnection);
                return !plan_cancel_flag_;
            };
            const PlanResult r = plan_layouts(s, space, 5, RankBy::Throughput, 1, base.setup.global_batch());
            for (const auto& c : r.top) rows.push_back(c);
            if (space.pareto)
                for (const auto& c : r.pareto) front.push_back(c);
            if (r.cancelled) break;
            ++done;
        }
        std::sort(rows.begin(), rows.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
            return a.time.throughput.tokens_per_s > b.time.throughput.tokens_per_s;
        });
        const bool cancelled = plan_cancel_flag_;
        QMetaObject::invokeMethod(this, [this, rows, front, cancelled] { planFinished(rows, front, cancelled); }, Qt::QueuedConnection);
    });
}

void MainWindow::cancelPlan() { plan_cancel_flag_ = true; }



void MainWindow::planFinished(const QVector<PlanCandidate>& rows, const QVector<PlanCandidate>& front, bool cancelled) {
    if (plan_thread_ && plan_thread_->joinable()) plan_thread_->join();
    plan_thread_.reset();
    plan_rows_ = rows;
    plan_front_ = front;
    if (!cancelled) plan_progress_->setValue(plan_progress_->maximum());
    showFront();
    plan_button_->setEnabled(true);
    plan_cancel_->setEnabled(false);
    plan_table_->setRowCount(static_cast<int>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) {
        const PlanCandidate& c = rows[i];
        const TrainingSetup& t = c.scenario.setup;
        const QStringList cells = {QString::number(c.scenario.cluster.num_gpus), layout_text(c.scenario),
                                   QString("%1 x %2").arg(t.micro_batch).arg(t.grad_accum), QString::fromStdString(app::sharding_text(t)),
                                   to_string(t.recompute), QString::number(c.time.throughput.tokens_per_s, 'f', 0),
                                   QString("%1 %").arg(100 * c.time.throughput.mfu, 0, 'f', 1), gbtext(c.memory.firm())};
        for (int j = 0; j < cells.size(); ++j) plan_table_->setItem(i, j, new QTableWidgetItem(cells[j]));
    }
    statusBar()->showMessage(cancelled ? "Search cancelled" : QString("Search done: %1 layouts").arg(rows.size()), 4000);
}

// The front as a scatter: x = memory headroom per GPU, y = step time; with a rent
// each point's colour (green cheapest .. red dearest) and tooltip give the cost per
// million tokens (core's rent cost of the token budget over the budget).
void MainWindow::showFront() {
    QChart* old = plan_chart_->chart();
    auto* chart = new QChart;
    if (QGuiApplication::palette().color(QPalette::Window).lightness() < 128) chart->setTheme(QChart::ChartThemeDark);
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->setMargins(QMargins(4, 4, 4, 4));
    chart->legend()->hide();
    const int gpus = plan_front_.isEmpty() ? 0 : plan_front_.front().scenario.cluster.num_gpus;
    chart->setTitle(plan_front_.isEmpty() ? QString("Pareto front: search to see step time against memory headroom")
                                          : QString("Pareto front at %1 GPUs: step time against memory headroom (click a point to load it)").arg(gpus));
    auto* dots = new QScatterSeries;
    dots->setObjectName("paretoSeries");
    dots->setMarkerSize(11);
    double xmax = 0, ymax = 0, cmin = 1e300, cmax = 0;
    auto per_mtok = [](const PlanCandidate& p) {
        const double tokens = p.scenario.run.tokens_to_train;
        return tokens > 0 ? p.time.cost.rent_cost_usd / tokens * 1e6 : 0.0;
    };
    for (const PlanCandidate& p : plan_front_) {
        dots->append(p.memory.headroom() / units::GB, p.time.time.step_s);
        xmax = std::max(xmax, p.memory.headroom() / units::GB);
        ymax = std::max(ymax, p.time.time.step_s);
        const double c = per_mtok(p);
        if (c > 0) cmin = std::min(cmin, c), cmax = std::max(cmax, c);
    }
    if (cmax > 0)
        for (int i = 0; i < plan_front_.size(); ++i) {
            const double c = per_mtok(plan_front_[i]);
            const double f = cmax > cmin ? (c - cmin) / (cmax - cmin) : 0;
            dots->setPointConfiguration(i, QXYSeries::PointConfiguration::Color, QColor::fromHsvF((1 - f) / 3, 0.8, 0.85));
        }
    chart->addSeries(dots);
    auto* x = new QValueAxis;
    x->setTitleText("memory headroom per GPU (GB)");
    x->setRange(0, xmax > 0 ? xmax * 1.1 : 1);
    x->applyNiceNumbers();
    auto* y = new QValueAxis;
    y->setTitleText("step time (s)");
    y->setRange(0, ymax > 0 ? ymax * 1.1 : 1);
    y->applyNiceNumbers();
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    dots->attachAxis(x);
    dots->attachAxis(y);
    connect(dots, &QScatterSeries::clicked, this, &MainWindow::loadFrontPoint);
    connect(dots, &QScatterSeries::hovered, this, [this, per_mtok](const QPointF& p, bool on) {
        if (!on) return QToolTip::hideText();
        for (const PlanCandidate& c : plan_front_) {
            if (c.memory.headroom() / units::GB != p.x() || c.time.time.step_s != p.y()) continue;
            QString tip = QString("%1, micro %2 x %3, %4, %5\nstep %6 s, %7 tokens/s, headroom %8")
                              .arg(layout_text(c.scenario))
                              .arg(c.scenario.setup.micro_batch)
                              .arg(c.scenario.setup.grad_accum)
                              .arg(QString::fromStdString(app::sharding_text(c.scenario.setup)))
                              .arg(to_string(c.scenario.setup.recompute))
                              .arg(c.time.time.step_s, 0, 'g', 4)
                              .arg(c.time.throughput.tokens_per_s, 0, 'f', 0)
                              .arg(gbtext(c.memory.headroom()));
            if (per_mtok(c) > 0) tip += QString("\n$%1 per million tokens").arg(per_mtok(c), 0, 'f', 3);
            QToolTip::showText(QCursor::pos(), tip, plan_chart_);
            return;
        }
    });
    plan_chart_->setChart(chart);
    delete old;
}

// The front point nearest to the clicked position (in screen distance) goes
// into the editor, as a double-clicked row does.
void MainWindow::loadFrontPoint(const QPointF& p) {
    QChart* chart = plan_chart_->chart();
    if (!chart || plan_front_.isEmpty() || chart->series().isEmpty()) return;
    QAbstractSeries* series = chart->series().front();
    const QPointF at = chart->mapToPosition(p, series);
    int best = -1;
    double best_d = 1e300;
    for (int i = 0; i < plan_front_.size(); ++i) {
        const PlanCandidate& c = plan_front_[i];
        const QPointF q = chart->mapToPosition(QPointF(c.memory.headroom() / units::GB, c.time.time.step_s), series);
        const double d = std::hypot(q.x() - at.x(), q.y() - at.y());
        if (d < best_d) best_d = d, best = i;
    }
    if (best >= 0) loadScenario(plan_front_[best].scenario, c_->modelRef());
}

void MainWindow::buildCompare(QWidget* host) {
    auto* v = new QVBoxLayout(host);
    auto* top = new QHBoxLayout;
    auto* pin = new QPushButton("Pin current scenario", host);
    pin->setObjectName("pinButton");
    auto* clear = new QPushButton("Clear", host);
    clear->setObjectName("clearPinsButton");
    top->addWidget(pin);
    top->addWidget(clear);
    top->addStretch();
    v->addLayout(top);
    compare_table_ = new QTableWidget(0, 0, host);
    compare_table_->setObjectName("compareTable");
    compare_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // Short, distinct column titles; the scenario and what differs are rows that wrap.
    compare_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    compare_table_->setWordWrap(true);
    v->addWidget(compare_table_, 1);
    compare_chart_ = new QChartView(host);
    compare_chart_->setObjectName("compareChart");
    compare_chart_->setRenderHint(QPainter::Antialiasing);
    v->addWidget(compare_chart_, 1);
    connect(pin, &QPushButton::clicked, this, [this] {
        c_->pin(pin_label(c_->scenario()));
    });
    connect(clear, &QPushButton::clicked, c_, &Controller::clearPins);
}

void MainWindow::showCompare() {
    const auto& pins = c_->pinned();
    // Issue 12: clipped headers, columns titled alike, nothing saying what differs.
    // Each column is "#n"; the scenario and its differences from #1 (core's
    // diff_settings, the lines advise prints) are rows.
    const QStringList rows = {"scenario", "differs from #1", "memory/GPU", "fits", "step (s)", "tokens/s", "MFU", "compute", "communication", "bubble"};
    compare_table_->setColumnCount(static_cast<int>(pins.size()));
    compare_table_->setRowCount(static_cast<int>(rows.size()));
    compare_table_->setVerticalHeaderLabels(rows);
    QStringList names;
    QVector<double> tps;
    for (int j = 0; j < pins.size(); ++j) {
        const Pinned& p = pins[j];
        names << QString("#%1").arg(j + 1);
        tps << p.time.throughput.tokens_per_s;
        auto* head = new QTableWidgetItem(QString("#%1").arg(j + 1));
        head->setToolTip(p.label);
        compare_table_->setHorizontalHeaderItem(j, head);
        QStringList diff;
        for (const auto& line : diff_settings(pins.front().scenario, p.scenario)) diff << QString::fromStdString(line);
        if (pins.front().scenario.calibration.source != p.scenario.calibration.source)
            diff << QString("calibration: %1 -> %2").arg(QString::fromStdString(pins.front().scenario.calibration.source),
                                                        QString::fromStdString(p.scenario.calibration.source));
        const QString differs = j == 0 ? QString("(reference)") : diff.isEmpty() ? QString("nothing (same scenario)") : diff.join("\n");
        const TimeBreakdown& t = p.time.time;
        const QStringList cells = {p.label, differs, gbtext(p.memory.total), p.memory.fits() ? "yes" : "NO", QString::number(t.step_s, 'g', 4),
                                   QString::number(p.time.throughput.tokens_per_s, 'f', 0),
                                   QString("%1 %").arg(100 * p.time.throughput.mfu, 0, 'f', 1),
                                   QString("%1 %").arg(100 * t.compute_s / t.step_s, 0, 'f', 0),
                                   QString("%1 %").arg(100 * t.communication_s / t.step_s, 0, 'f', 0),
                                   QString("%1 %").arg(100 * t.bubble_s / t.step_s, 0, 'f', 0)};
        for (int i = 0; i < cells.size(); ++i) {
            auto* item = new QTableWidgetItem(cells[i]);
            item->setToolTip(cells[i]);
            compare_table_->setItem(i, j, item);
        }
    }
    compare_table_->resizeRowsToContents();
    QChart* old = compare_chart_->chart();
    compare_chart_->setChart(compare_chart("Throughput of pinned scenarios (tokens/s)", names, tps, "tokens/s"));
    delete old;
}

void MainWindow::buildAdvice(QWidget* host) {
    host->setObjectName("adviceTab");
    auto* v = new QVBoxLayout(host);
    advice_label_ = new QLabel(host);
    advice_label_->setObjectName("adviceLabel");
    advice_label_->setWordWrap(true);
    advice_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->addWidget(advice_label_);
    advice_table_ = new QTableWidget(0, 4, host);
    advice_table_->setObjectName("adviceTable");
    advice_table_->setHorizontalHeaderLabels({"remedy", "tokens/s", "needs / peak per GPU", "what changes"});
    advice_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    advice_table_->horizontalHeader()->setStretchLastSection(true);
    advice_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    advice_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    advice_table_->setSelectionMode(QAbstractItemView::SingleSelection);
    v->addWidget(advice_table_, 1);
    apply_advice_ = new QPushButton("Apply to the editor", host);
    apply_advice_->setObjectName("applyAdviceButton");
    apply_advice_->setToolTip("Load the selected remedy's scenario into the editor (or double-click a row)");
    v->addWidget(apply_advice_);
    connect(apply_advice_, &QPushButton::clicked, this, [this] { applyAdvice(advice_table_->currentRow()); });
    connect(advice_table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) { applyAdvice(row); });
    connect(c_, &Controller::changed, this, [this] {
        if (tabs_->currentWidget() && tabs_->currentWidget()->objectName() == "adviceTab") showAdvice();
    });
}

void MainWindow::showAdvice() {
    if (!c_->valid()) return;
    const AdviceReport rep = c_->advice();
    QString text = QString("<b>%1</b>: %2<ul>").arg(QString(to_string(rep.diagnosis.bottleneck)).toUpper(),
                                                     QString::fromStdString(rep.diagnosis.headline).toHtmlEscaped());
    for (const auto& e : rep.diagnosis.evidence) text += "<li>" + QString::fromStdString(e).toHtmlEscaped() + "</li>";
    text += "</ul>";
    if (!rep.diagnosis.observation_gap.empty()) text += QString::fromStdString(rep.diagnosis.observation_gap).toHtmlEscaped();
    advice_label_->setText(text);
    advice_scenarios_.clear();
    advice_table_->setRowCount(static_cast<int>(rep.remedies.size()));
    for (int i = 0; i < static_cast<int>(rep.remedies.size()); ++i) {
        const Advice& a = rep.remedies[static_cast<size_t>(i)];
        advice_scenarios_.push_back(a.scenario);
        QStringList changes;
        for (const auto& ch : a.changes) changes << QString::fromStdString(ch);
        const QStringList cells = {QString::fromStdString(a.title) + (a.changes_result ? "  [changes what is trained]" : ""),
                                   a.fixes_memory ? QString("%1 (fits)").arg(a.time.throughput.tokens_per_s, 0, 'f', 0)
                                                  : QString("%1 (%2x)").arg(a.time.throughput.tokens_per_s, 0, 'f', 0).arg(a.speedup, 0, 'f', 2),
                                   QString("%1 / %2").arg(gbtext(a.memory.firm()), gbtext(a.memory.total)), changes.join("; ")};
        for (int j = 0; j < cells.size(); ++j) {
            auto* item = new QTableWidgetItem(cells[j]);
            item->setToolTip(QString::fromStdString("assumes: " + a.assumption));
            advice_table_->setItem(i, j, item);
        }
    }
}

void MainWindow::applyAdvice(int row) {
    if (row < 0 || row >= static_cast<int>(advice_scenarios_.size())) return;
    loadScenario(advice_scenarios_[static_cast<size_t>(row)], c_->modelRef());
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu("&File");
    QAction* open = file->addAction("&Open scenario...", this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, "Open scenario", {}, "Scenario (*.toml)");
        if (f.isEmpty()) return;
        QString err;
        if (!c_->openScenario(f, &err)) QMessageBox::warning(this, "Cannot open scenario", err);
        else showInput();
    });
    open->setObjectName("openScenarioAction");
    open->setShortcut(QKeySequence::Open);
    QAction* save = file->addAction("&Save scenario...", this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, "Save scenario", "scenario.toml", "Scenario (*.toml)");
        if (f.isEmpty()) return;
        QString err;
        if (!c_->saveScenario(f, &err)) QMessageBox::warning(this, "Cannot save scenario", err);
    });
    save->setObjectName("saveScenarioAction");
    save->setShortcut(QKeySequence::Save);
    QAction* exp = file->addAction("&Export report (HTML or PDF)...", this, [this] {
        if (tokens_->value() <= 0) {
            QMessageBox::warning(this, "Cannot export", "The sizing report needs a token budget: set Train (B tokens) above 0.");
            return;
        }
        const QString f = QFileDialog::getSaveFileName(this, "Export report", "report.html", "Report (*.html *.pdf)");
        if (f.isEmpty()) return;
        bool ok = false;
        const double days = QInputDialog::getDouble(this, "Deadline", "Train the token budget within (days):", 30, 0.1, 36500, 1, &ok);
        if (!ok) return;
        QString err;
        if (!c_->exportReport(f, tokens_->value() * 1e9, days, &err)) QMessageBox::warning(this, "Cannot export", err);
    });
    exp->setObjectName("exportReportAction");
    QAction* copy = file->addAction("&Copy as command line", this, [this] { QApplication::clipboard()->setText(c_->commandLine()); });
    copy->setObjectName("copyCommandAction");
    copy->setShortcut(QKeySequence("Ctrl+Shift+C"));
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, qApp, &QApplication::quit);
}

bool MainWindow::saveScreenshots(const QString& dir) {
    QDir().mkpath(dir);
    bool ok = true;
    const QStringList names = {"results", "sweeps", "plan", "compare", "advice"};
    for (int i = 0; i < tabs_->count(); ++i) {
        tabs_->setCurrentIndex(i);
        if (names[i] == "plan" && plan_rows_.isEmpty()) {
            startPlan();
            while (plan_thread_) QApplication::processEvents(QEventLoop::AllEvents, 50);
        }
        if (names[i] == "compare" && c_->pinned().isEmpty()) {
            // The scenario against the search's fastest layout, so the view shows
            // two columns and what differs between them.
            c_->pin(pin_label(c_->scenario()));
            if (!plan_rows_.isEmpty()) {
                const ScenarioInput before = c_->input();
                loadScenario(plan_rows_.front().scenario, c_->modelRef());
                c_->pin("fastest layout found: " + pin_label(c_->scenario()));
                c_->setInput(before);
                showInput();
            }
        }
        QApplication::processEvents();
        ok &= grab().save(dir + "/" + names[i] + ".png");
    }
    tabs_->setCurrentIndex(0);
    return ok;
}

}  // namespace trainplan::gui
