#include "charts.hpp"

#include <QBarCategoryAxis>
#include <QGuiApplication>
#include <QPalette>
#include <QBarSet>
#include <QHorizontalStackedBarSeries>
#include <QBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QValueAxis>

#include <algorithm>
#include <array>
#include <functional>

#include "trainplan/units.hpp"

namespace trainplan::gui {

namespace {
QChart* base_chart(const QString& title) {
    auto* c = new QChart;
    // Follow the system light/dark palette.
    if (QGuiApplication::palette().color(QPalette::Window).lightness() < 128) c->setTheme(QChart::ChartThemeDark);
    c->setTitle(title);
    c->setAnimationOptions(QChart::NoAnimation);
    c->legend()->setAlignment(Qt::AlignBottom);
    c->setMargins(QMargins(4, 4, 4, 4));
    return c;
}

// Error bars as I-beams (one line series each: bottom cap, stem, top cap), the
// first named in the legend. `cap(x, side)` is where a cap ends at x.
void add_error_bars(QChart* c, QAbstractAxis* x, QAbstractAxis* y, const QVector<ErrorBar>& bars,
                    const std::function<double(double, int)>& cap) {
    QPen pen(QColor("#24292f"));
    pen.setWidth(2);
    bool first = true;
    for (const ErrorBar& b : bars) {
        auto* s = new QLineSeries;
        s->setName(kBandName);
        const double l = cap(b.x, -1), r = cap(b.x, +1);
        s->append(QList<QPointF>{QPointF(l, b.lo), QPointF(r, b.lo), QPointF(b.x, b.lo), QPointF(b.x, b.hi), QPointF(l, b.hi), QPointF(r, b.hi)});
        s->setPen(pen);
        c->addSeries(s);
        s->attachAxis(x);
        s->attachAxis(y);
        if (!first)
            for (QLegendMarker* m : c->legend()->markers(s)) m->setVisible(false);
        first = false;
    }
}
}  // namespace

QString memory_term_tooltip(const QString& term) {
    static const std::map<QString, QString> tips = {
        {"weights", "Model weights held on this GPU: bytes/parameter by precision policy (2 for 16-bit), split by TP/PP/EP, sharded by ZeRO-3."},
        {"gradients", "Gradients: 16-bit (DeepSpeed) or fp32 main grads (Megatron); sharded from ZeRO-2. Source: Rajbhandari et al. 2020, Table 1."},
        {"optimizer", "Optimizer states incl. the fp32 master copy: 12 B/param for mixed-precision Adam (K = 12, ZeRO paper); sharded from ZeRO-1."},
        {"activations", "Tensors kept for backward, from the per-op layer graph; x micro-batches in flight (1F1B: p - i on stage i). Korthikanti et al. 2022."},
        {"logits", "Logits of s x b x V / t in 16-bit plus the fp32 copy the softmax / cross-entropy works on (last stage)."},
        {"temporary", "ZeRO-3 gathered layers, one layer's backward working set (its recomputed tensors and the MLP's gradients), gradient buckets, QLoRA's dequantized matrix, DeepSpeed's fp32 gradient copies or torch AdamW's foreach temporaries (one moment's size) for the optimizer step (beyond the freed activations)."},
        {"framework", QString("CUDA context (%1 MiB, pytorch#109888), cuBLAS workspace, NCCL buffers of each communicator this GPU opens "
                              "(%2 MiB for a 2-rank group, %3 MiB for a larger one, NVIDIA/nccl#964), and on NVSwitch nodes "
                              "that multicast NCCL's NVLink SHARP buffers (%4 MiB per GPU of the node in a communicator "
                              "with more than two of them under NCCL 2.22+, %5 MiB under 2.17-2.20).")
                          .arg(memory_defaults().cuda_context_bytes / units::MiB, 0, 'f', 0)
                          .arg(memory_defaults().communicator_pair_bytes / units::MiB, 0, 'f', 0)
                          .arg(memory_defaults().communicator_bytes / units::MiB, 0, 'f', 0)
                          .arg(memory_defaults().nvls_head_bytes / units::MiB, 0, 'f', 0)
                          .arg(memory_defaults().nvls_head_bytes_2_20 / units::MiB, 0, 'f', 0)},
        {"fragmentation", "Allocator reserve: a share of the transient bytes (activations, logits, buffers) by the allocator's mode (default or expandable segments), no more than the device has free; under DeepSpeed also the optimizer step's gradient copies that no freed block could hold (new segments)."},
    };
    auto it = tips.find(term);
    return it == tips.end() ? QString() : it->second;
}

namespace {
constexpr int kMemoryTerms = 8;
double memory_term(const MemoryBreakdown& m, int k) {
    const double v[kMemoryTerms] = {m.weights, m.gradients, m.optimizer, m.activations, m.logits, m.temporary, m.framework, m.fragmentation};
    return v[k];
}
double memory_top(const MemoryEstimate& est, double band_p90) {
    double top = 0;
    for (const auto& st : est.stages) top = std::max({top, st.mem.total, st.mem.capacity, st.mem.total * band_p90});
    return top;
}
QVector<ErrorBar> memory_bars(const MemoryEstimate& est, double band_p10, double band_p90) {
    QVector<ErrorBar> bars;
    if (band_p10 <= 0) return bars;
    const double n = static_cast<double>(est.stages.size());
    for (size_t i = 0; i < est.stages.size(); ++i)
        bars.push_back({(static_cast<double>(i) + 0.5) / n, est.stages[i].mem.total * band_p10 / units::GB, est.stages[i].mem.total * band_p90 / units::GB});
    return bars;
}
double memory_cap(double x, int side, double n) { return x + side * 0.06 / n; }
QList<QPointF> error_bar_points(const ErrorBar& b, double l, double r) {
    return {QPointF(l, b.lo), QPointF(r, b.lo), QPointF(b.x, b.lo), QPointF(b.x, b.hi), QPointF(l, b.hi), QPointF(r, b.hi)};
}
}  // namespace

bool update_memory_chart(QChart* c, const MemoryEstimate& est, double band_p10, double band_p90) {
    if (!c || est.stages.empty()) return false;
    const QList<QAbstractSeries*> all = c->series();
    const QVector<ErrorBar> bars = memory_bars(est, band_p10, band_p90);
    if (all.size() != 2 + bars.size()) return false;
    auto* series = qobject_cast<QStackedBarSeries*>(all[0]);
    auto* cap = qobject_cast<QLineSeries*>(all[1]);
    if (!series || !cap || series->count() != kMemoryTerms) return false;
    const int n = static_cast<int>(est.stages.size());
    for (QBarSet* set : series->barSets())
        if (set->count() != n) return false;
    for (int k = 0; k < kMemoryTerms; ++k) {
        QBarSet* set = series->barSets()[k];
        for (int i = 0; i < n; ++i) {
            const double v = memory_term(est.stages[static_cast<size_t>(i)].mem, k) / units::GB;
            if (set->at(i) != v) set->replace(i, v);
        }
    }
    const auto ys = c->axes(Qt::Vertical, series);
    auto* y = ys.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(ys.front());
    if (!y) return false;
    const double top = memory_top(est, band_p90) / units::GB * 1.1;
    if (y->max() != top) y->setRange(0, top);
    const double capacity = est.stages.front().mem.capacity / units::GB;
    if (cap->count() != 2 || cap->at(0).y() != capacity) cap->replace(QList<QPointF>{QPointF(0, capacity), QPointF(1, capacity)});
    for (int i = 0; i < bars.size(); ++i) {
        auto* s = qobject_cast<QLineSeries*>(all[2 + i]);
        if (!s) return false;
        const ErrorBar& b = bars[i];
        const QList<QPointF> pts = error_bar_points(b, memory_cap(b.x, -1, n), memory_cap(b.x, +1, n));
        if (s->points() != pts) s->replace(pts);
    }
    return true;
}

QChart* memory_chart(const MemoryEstimate& est, double band_p10, double band_p90) {
    QChart* c = base_chart("Memory per GPU by pipeline stage (GB)");
    c->legend()->setAlignment(Qt::AlignRight);
    auto* series = new QStackedBarSeries;
    const char* names[] = {"weights", "gradients", "optimizer", "activations", "logits", "temporary", "framework", "fragmentation"};
    QStringList cats;
    double top = 0;
    for (const auto& st : est.stages) cats << QString("stage %1").arg(st.stage + 1);
    for (int k = 0; k < kMemoryTerms; ++k) {
        auto* set = new QBarSet(names[k]);
        for (const auto& st : est.stages) *set << memory_term(st.mem, k) / units::GB;
        series->append(set);
    }
    top = memory_top(est, band_p90);
    c->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(cats);
    auto* y = new QValueAxis;
    y->setRange(0, top / units::GB * 1.1);
    y->setLabelFormat("%.0f");
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    // Capacity line across the whole plot.
    auto* cap = new QLineSeries;
    cap->setName("capacity");
    const double capacity = est.stages.empty() ? 0 : est.stages.front().mem.capacity / units::GB;
    cap->append(0, capacity);
    cap->append(1, capacity);
    QPen pen(QColor("#d1242f"));
    pen.setWidth(2);
    pen.setStyle(Qt::DashLine);
    cap->setPen(pen);
    c->addSeries(cap);
    auto* hx = new QValueAxis;
    hx->setRange(0, 1);
    hx->setVisible(false);
    c->addAxis(hx, Qt::AlignTop);
    cap->attachAxis(hx);
    cap->attachAxis(y);
    // Each stage's total with its P10-P90 band, at the bar's centre on the 0..1 axis.
    if (band_p10 > 0 && !est.stages.empty()) {
        const double n = static_cast<double>(est.stages.size());
        add_error_bars(c, hx, y, memory_bars(est, band_p10, band_p90), [n](double x, int side) { return memory_cap(x, side, n); });
    }
    return c;
}

namespace {
QString time_title(const TimeBreakdown& t) { return QString("Where the %1 s step goes").arg(t.step_s, 0, 'g', 4); }
std::array<std::pair<const char*, double>, 6> time_parts(const TimeBreakdown& t) {
    return {{{"compute", t.compute_s}, {"communication", t.communication_s}, {"bubble", t.bubble_s},
             {"optimizer", t.optimizer_s}, {"offload", t.offload_s}, {"data stall", t.data_s}}};
}
}  // namespace

bool update_time_chart(QChart* c, const TimeBreakdown& t) {
    if (!c || c->series().size() != 1) return false;
    auto* series = qobject_cast<QHorizontalStackedBarSeries*>(c->series().front());
    const auto parts = time_parts(t);
    if (!series || series->count() != static_cast<int>(parts.size())) return false;
    for (size_t k = 0; k < parts.size(); ++k) {
        QBarSet* set = series->barSets()[static_cast<int>(k)];
        const double v = t.step_s > 0 ? 100.0 * parts[k].second / t.step_s : 0;
        if (set->count() != 1) return false;
        if (set->at(0) != v) set->replace(0, v);
    }
    const QString title = time_title(t);
    if (c->title() != title) c->setTitle(title);
    return true;
}

QChart* time_chart(const TimeBreakdown& t) {
    QChart* c = base_chart(time_title(t));
    auto* series = new QHorizontalStackedBarSeries;
    for (auto [name, v] : time_parts(t)) {
        auto* set = new QBarSet(name);
        *set << (t.step_s > 0 ? 100.0 * v / t.step_s : 0);
        series->append(set);
    }
    c->addSeries(series);
    auto* y = new QBarCategoryAxis;
    y->append("step");
    auto* x = new QValueAxis;
    x->setRange(0, 100);
    x->setLabelFormat("%.0f %%");
    x->setTickCount(6);
    c->addAxis(y, Qt::AlignLeft);
    c->addAxis(x, Qt::AlignBottom);
    series->attachAxis(x);
    series->attachAxis(y);
    return c;
}

QChart* line_chart(const QString& title, const QString& x_title, const QString& y_title, const QVector<QPointF>& points,
                   const QVector<bool>& fits, const QVector<ErrorBar>& bars, double limit, const QString& limit_name) {
    QChart* c = base_chart(title);
    auto* s = new QLineSeries;
    s->setName(y_title);
    auto* dots = new QScatterSeries;
    dots->setMarkerSize(8);
    dots->setName("fits");
    // Out-of-memory points: red diamonds, never drawn like a point that fits.
    auto* oom = new QScatterSeries;
    oom->setName(kOutOfMemoryName);
    oom->setMarkerShape(QScatterSeries::MarkerShapeRotatedRectangle);
    oom->setMarkerSize(11);
    oom->setColor(QColor("#d1242f"));
    oom->setBorderColor(QColor("#82071e"));
    double xmin = 1e300, xmax = -1e300, ymax = limit;
    for (int i = 0; i < points.size(); ++i) {
        const QPointF& p = points[i];
        s->append(p);
        (i < fits.size() && !fits[i] ? oom : dots)->append(p);
        xmin = std::min(xmin, p.x());
        xmax = std::max(xmax, p.x());
        ymax = std::max(ymax, p.y());
    }
    for (const ErrorBar& b : bars) ymax = std::max(ymax, b.hi);
    c->addSeries(s);
    c->addSeries(dots);
    c->addSeries(oom);
    // The sweeps double their variable (micro-batch, sequence length, GPU count):
    // a base-2 log axis puts a tick on each power of two, labelled as an integer.
    auto* x = new QLogValueAxis;
    x->setBase(2);
    x->setLabelFormat("%.0f");
    x->setMinorTickCount(0);
    x->setTitleText(x_title);
    if (xmin > 0 && xmin < xmax) x->setRange(xmin / 1.15, xmax * 1.15);
    auto* y = new QValueAxis;
    y->setTitleText(y_title);
    y->setRange(0, ymax > 0 ? ymax * 1.1 : 1);
    y->applyNiceNumbers();
    y->setLabelFormat("%.0f");
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    for (auto* series : {static_cast<QXYSeries*>(s), static_cast<QXYSeries*>(dots), static_cast<QXYSeries*>(oom)}) {
        series->attachAxis(x);
        series->attachAxis(y);
    }
    if (oom->count() == 0)
        for (QLegendMarker* m : c->legend()->markers(oom)) m->setVisible(false);
    if (limit > 0 && xmin < xmax) {
        auto* l = new QLineSeries;
        l->setName(limit_name);
        l->append(xmin / 1.15, limit);
        l->append(xmax * 1.15, limit);
        QPen pen(QColor("#d1242f"));
        pen.setStyle(Qt::DashLine);
        pen.setWidth(2);
        l->setPen(pen);
        c->addSeries(l);
        l->attachAxis(x);
        l->attachAxis(y);
    }
    add_error_bars(c, x, y, bars, [](double v, int side) { return v * (side < 0 ? 1 / 1.05 : 1.05); });
    return c;
}

QChart* compare_chart(const QString& title, const QStringList& names, const QVector<double>& values, const QString& unit) {
    QChart* c = base_chart(title);
    auto* series = new QBarSeries;
    auto* set = new QBarSet(unit);
    double top = 0;
    for (double v : values) {
        *set << v;
        top = std::max(top, v);
    }
    series->append(set);
    c->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(names);
    auto* y = new QValueAxis;
    y->setRange(0, top > 0 ? top * 1.15 : 1);
    y->applyNiceNumbers();
    y->setLabelFormat("%.0f");
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    c->legend()->setVisible(false);
    return c;
}

}  // namespace trainplan::gui
