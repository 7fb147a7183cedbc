#include "charts.hpp"

#include <QBarCategoryAxis>
#include <QGuiApplication>
#include <QPalette>
#include <QBarSet>
#include <QHorizontalStackedBarSeries>
#include <QBarSeries>
#include <QLineSeries>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QValueAxis>

#include <algorithm>

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
}  // namespace

QString memory_term_tooltip(const QString& term) {
    static const std::map<QString, QString> tips = {
        {"weights", "Model weights held on this GPU: bytes/parameter by precision policy (2 for 16-bit), split by TP/PP/EP, sharded by ZeRO-3."},
        {"gradients", "Gradients: 16-bit (DeepSpeed) or fp32 main grads (Megatron); sharded from ZeRO-2. Source: Rajbhandari et al. 2020, Table 1."},
        {"optimizer", "Optimizer states incl. the fp32 master copy: 12 B/param for mixed-precision Adam (K = 12, ZeRO paper); sharded from ZeRO-1."},
        {"activations", "Tensors kept for backward, from the per-op layer graph; x micro-batches in flight (1F1B: p - i on stage i). Korthikanti et al. 2022."},
        {"logits", "Logits of s x b x V / t in 16-bit plus the fp32 copy the softmax / cross-entropy works on (last stage)."},
        {"temporary", "ZeRO-3 gathered layers, the full-recompute working set of one layer, gradient buckets, QLoRA's dequantized matrix."},
        {"framework", "CUDA context (~400 MB, pytorch#109888), cuBLAS workspace, NCCL buffers."},
        {"fragmentation", "Allocator reserve: the stack's share of the transient bytes (activations, logits, buffers) by default."},
    };
    auto it = tips.find(term);
    return it == tips.end() ? QString() : it->second;
}

QChart* memory_chart(const MemoryEstimate& est) {
    QChart* c = base_chart("Memory per GPU by pipeline stage (GB)");
    c->legend()->setAlignment(Qt::AlignRight);
    auto* series = new QStackedBarSeries;
    const char* names[] = {"weights", "gradients", "optimizer", "activations", "logits", "temporary", "framework", "fragmentation"};
    QStringList cats;
    double top = 0;
    for (const auto& st : est.stages) cats << QString("stage %1").arg(st.stage + 1);
    for (int k = 0; k < 8; ++k) {
        auto* set = new QBarSet(names[k]);
        for (const auto& st : est.stages) {
            const MemoryBreakdown& m = st.mem;
            const double v[] = {m.weights, m.gradients, m.optimizer, m.activations, m.logits, m.temporary, m.framework, m.fragmentation};
            *set << v[k] / units::GB;
        }
        series->append(set);
    }
    for (const auto& st : est.stages) top = std::max({top, st.mem.total, st.mem.capacity});
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
    return c;
}

QChart* time_chart(const TimeBreakdown& t) {
    QChart* c = base_chart(QString("Where the %1 s step goes").arg(t.step_s, 0, 'g', 4));
    auto* series = new QHorizontalStackedBarSeries;
    const std::pair<const char*, double> parts[] = {{"compute", t.compute_s}, {"communication", t.communication_s}, {"bubble", t.bubble_s},
                                                    {"optimizer", t.optimizer_s}, {"offload", t.offload_s}, {"data stall", t.data_s}};
    for (auto [name, v] : parts) {
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

QChart* line_chart(const QString& title, const QString& x_title, const QString& y_title, const QVector<QPointF>& points, double limit,
                   const QString& limit_name) {
    QChart* c = base_chart(title);
    auto* s = new QLineSeries;
    s->setName(y_title);
    auto* dots = new QScatterSeries;
    dots->setMarkerSize(7);
    dots->setName("evaluated");
    double xmin = 1e300, xmax = -1e300, ymax = limit;
    for (const QPointF& p : points) {
        s->append(p);
        dots->append(p);
        xmin = std::min(xmin, p.x());
        xmax = std::max(xmax, p.x());
        ymax = std::max(ymax, p.y());
    }
    c->addSeries(s);
    c->addSeries(dots);
    auto* x = new QValueAxis;
    x->setTitleText(x_title);
    if (xmin < xmax) x->setRange(xmin, xmax);
    auto* y = new QValueAxis;
    y->setTitleText(y_title);
    y->setRange(0, ymax > 0 ? ymax * 1.1 : 1);
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    for (auto* series : {static_cast<QXYSeries*>(s), static_cast<QXYSeries*>(dots)}) {
        series->attachAxis(x);
        series->attachAxis(y);
    }
    if (limit > 0 && xmin < xmax) {
        auto* l = new QLineSeries;
        l->setName(limit_name);
        l->append(xmin, limit);
        l->append(xmax, limit);
        QPen pen(QColor("#d1242f"));
        pen.setStyle(Qt::DashLine);
        pen.setWidth(2);
        l->setPen(pen);
        c->addSeries(l);
        l->attachAxis(x);
        l->attachAxis(y);
    }
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
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    c->legend()->setVisible(false);
    return c;
}

}  // namespace trainplan::gui
