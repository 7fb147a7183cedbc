// Chart builders (Qt Charts) for the results, sweeps and comparison views.
#pragma once

#include <QChart>
#include <QString>
#include <QVector>

#include "trainplan/memory.hpp"
#include "trainplan/time.hpp"

namespace trainplan::gui {

// A P10-P90 error bar at x (the prediction band, app/intervals.hpp).
struct ErrorBar {
    double x = 0, lo = 0, hi = 0;
};
inline constexpr const char* kBandName = "P10-P90";
inline constexpr const char* kOutOfMemoryName = "out of memory";

// Stacked memory bars per pipeline stage with the capacity as a line, and each
// stage total's P10-P90 band as an error bar when `band_p10` > 0.
QChart* memory_chart(const MemoryEstimate& m, double band_p10 = 0, double band_p90 = 0);
// The same chart updated in place (bar values, axis range, capacity line and
// error bars replaced): false when `c` is not such a chart or its shape (stage
// count, band shown or not) differs, and the caller builds a new one. A repaint
// then re-lays no series, axis or legend (bench_gui: the rebuild was most of it).
bool update_memory_chart(QChart* c, const MemoryEstimate& m, double band_p10 = 0, double band_p90 = 0);
// One stacked bar: where the step time goes.
QChart* time_chart(const TimeBreakdown& t);
bool update_time_chart(QChart* c, const TimeBreakdown& t);
// y against x (x on a base-2 log axis with integer labels: the sweeps double
// their variable), optionally with a horizontal limit line. Points whose `fits`
// is false are drawn apart, as "out of memory"; `bars` are P10-P90 error bars.
QChart* line_chart(const QString& title, const QString& x_title, const QString& y_title, const QVector<QPointF>& points,
                   const QVector<bool>& fits = {}, const QVector<ErrorBar>& bars = {}, double limit = 0,
                   const QString& limit_name = {});
// Bars of one value per named scenario.
QChart* compare_chart(const QString& title, const QStringList& names, const QVector<double>& values, const QString& unit);

// Meaning and source of each memory term (tooltips).
QString memory_term_tooltip(const QString& term);

}  // namespace trainplan::gui
