// Repaint benchmark: change an input, let the window re-evaluate and repaint,
// print the average and worst time (budget 16 ms). Runs offscreen.
#include <QApplication>
#include <QElapsedTimer>
#include <QSpinBox>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "mainwindow.hpp"

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", qgetenv("QT_QPA_PLATFORM").isEmpty() ? QByteArray("offscreen") : qgetenv("QT_QPA_PLATFORM"));
    QApplication app(argc, argv);
    trainplan::gui::Controller controller;
    trainplan::gui::MainWindow window(&controller);
    window.show();
    QApplication::processEvents();
    auto* micro = window.findChild<QSpinBox*>("microBatchSpin");
    auto* seq = window.findChild<QSpinBox*>("seqLenSpin");
    // Changes to time (argv[1]; 200 by default; fewer under callgrind).
    const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
    double total = 0, worst = 0;
    for (int i = 0; i < n; ++i) {
        QElapsedTimer t;
        t.start();
        micro->setValue(1 + (i % 4));
        seq->setValue(i % 2 ? 2048 : 4096);
        window.repaint();  // synchronous paint of the whole window
        QApplication::processEvents();
        const double ms = t.nsecsElapsed() / 1e6 / 2;  // two input changes per round
        total += ms;
        worst = std::max(worst, ms);
    }
    std::printf("GUI: changed input -> results repainted: %.2f ms average, %.2f ms worst over %d changes  [budget 16 ms]\n", total / n, worst, n);
    // A bench of the early return for an invalid scenario would time nothing.
    if (!controller.valid()) {
        std::printf("the benchmarked scenario is not valid: %s\n", qPrintable(controller.errors()));
        return 1;
    }
    return 0;
}
