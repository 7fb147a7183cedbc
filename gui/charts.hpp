// Chart builders (Qt Charts) for the results, sweeps and comparison views.
#pragma once

#include <QChart>
#include <QString>
#include <QVector>

#include "trainplan/memory.hpp"
#include "trainplan/time.hpp"

namespace trainplan::gui {

// Stacked memory bars per pipeline stage with the capacity as a line.
QChart* memory_chart(const MemoryEstimate& m);
// One stacked bar: where the step time goes.
QChart* time_chart(const TimeBreakdown& t);
// y against x, optionally with a horizontal limit line.
QChart* line_chart(const QString& title, const QString& x_title, const QString& y_title, const QVector<QPointF>& points,
                   double limit = 0, const QString& limit_name = {});
// Bars of one value per named scenario.
QChart* compare_chart(const QString& title, const QStringList& names, const QVector<double>& values, const QString& unit);

// Meaning and source of each memory term (tooltips).
QString memory_term_tooltip(const QString& term);

}  // namespace trainplan::gui
