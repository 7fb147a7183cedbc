// GUI tests (QtTest, QT_QPA_PLATFORM=offscreen): drive the real window by
// object name and check that what is shown is core's result for the same scenario.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>
#include <sstream>

#include "app.hpp"
#include "mainwindow.hpp"
#include "trainplan/units.hpp"

using namespace trainplan;
using namespace trainplan::gui;

namespace {

template <class T>
T* child(QWidget& w, const char* name) {
    T* c = w.findChild<T*>(name);
    if (!c) qFatal("no widget %s", name);
    return c;
}

QString table_value(QTableWidget* t, const QString& term) {
    for (int r = 0; r < t->rowCount(); ++r)
        if (t->item(r, 0) && t->item(r, 0)->text() == term) return t->item(r, 1)->text();
    return {};
}

QString gb(double bytes) { return QString("%1 GB").arg(bytes / units::GB, 0, 'f', 2); }

// The same scenario through core directly.
MemoryBreakdown core_memory(const ScenarioInput& in) {
    app::FilePresets p({TRAINPLAN_SOURCE_DIR});
    auto s = resolve_scenario(in, p);
    if (!s) qFatal("%s", s.error().message().c_str());
    return estimate_memory(*s).peak();
}

nlohmann::json cli_json(const std::vector<std::string>& args) {
    std::vector<std::string> full{"trainplan"};
    full.insert(full.end(), args.begin(), args.end());
    std::ostringstream out, err;
    trainplan::cli::run(full, out, err);
    return nlohmann::json::parse(out.str());
}

}  // namespace

class GuiTest : public QObject {
    Q_OBJECT
private slots:
    void showsCoresResult() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        w.show();
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("rtx-4090");
        child<QSpinBox>(w, "gpusSpin")->setValue(1);
        QVERIFY(c.valid());
        ScenarioInput in = c.input();
        const MemoryBreakdown m = core_memory(in);
        QVERIFY(child<QLabel>(w, "verdictBanner")->text().startsWith("DOES NOT FIT"));
        QCOMPARE(table_value(child<QTableWidget>(w, "memoryTable"), "total"), gb(m.total));
        QCOMPARE(table_value(child<QTableWidget>(w, "memoryTable"), "weights"), QString("13.48 GB"));  // 6,738,415,616 x 2 B
        // QLoRA: fits, and the display follows.
        child<QComboBox>(w, "methodCombo")->setCurrentText("qlora");
        child<QComboBox>(w, "precisionCombo")->setCurrentText("bf16");
        child<QComboBox>(w, "recomputeCombo")->setCurrentText("full");
        QVERIFY(child<QLabel>(w, "verdictBanner")->text().startsWith("FITS"));
        QCOMPARE(table_value(child<QTableWidget>(w, "memoryTable"), "total"), gb(core_memory(c.input()).total));
        // Throughput shown is core's.
        const TimeEstimate te = estimate_time(c.scenario());
        QVERIFY(child<QLabel>(w, "metricsLabel")->text().contains(QString("%1 tokens/s").arg(te.throughput.tokens_per_s, 0, 'f', 0)));
    }

    void infeasibleLayoutShowsItsReason() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("a100-sxm-80gb");
        child<QSpinBox>(w, "gpusSpin")->setValue(6);
        child<QSpinBox>(w, "globalBatchSpin")->setValue(6);
        child<QSpinBox>(w, "tpSpin")->setValue(3);
        QVERIFY(!c.valid());
        QVERIFY2(child<QLabel>(w, "errorLabel")->text().contains("tp = 3 must divide num_heads = 32"), qPrintable(child<QLabel>(w, "errorLabel")->text()));
        QVERIFY(child<QLabel>(w, "verdictBanner")->text().startsWith("INVALID"));
        // Nothing was silently corrected: the editor still says 3.
        QCOMPARE(child<QSpinBox>(w, "tpSpin")->value(), 3);
        child<QSpinBox>(w, "tpSpin")->setValue(2);
        QVERIFY(c.valid());
        QVERIFY(child<QLabel>(w, "errorLabel")->text().isEmpty());
    }

    void savedScenarioReopensIdenticallyAndMatchesTheCli() {
        QTemporaryDir dir;
        const QString path = dir.filePath("scenario.toml");
        double gui_total = 0, gui_tps = 0;
        {
            Controller c({TRAINPLAN_SOURCE_DIR});
            MainWindow w(&c);
            child<QComboBox>(w, "modelCombo")->setEditText("llama-2-13b");
            child<QComboBox>(w, "gpuCombo")->setCurrentText("a100-sxm-80gb");
            child<QSpinBox>(w, "gpusSpin")->setValue(8);
            child<QSpinBox>(w, "tpSpin")->setValue(2);
            child<QCheckBox>(w, "spCheck")->setChecked(true);
            child<QComboBox>(w, "zeroCombo")->setCurrentText("1");
            child<QComboBox>(w, "recomputeCombo")->setCurrentText("selective");
            child<QSpinBox>(w, "seqLenSpin")->setValue(4096);
            child<QSpinBox>(w, "microBatchSpin")->setValue(2);
            child<QSpinBox>(w, "globalBatchSpin")->setValue(64);
            QVERIFY2(c.valid(), qPrintable(c.errors()));
            QString err;
            QVERIFY2(c.saveScenario(path, &err), qPrintable(err));
            gui_total = c.memory().peak().total;
            gui_tps = c.time().throughput.tokens_per_s;
        }
        Controller c2({TRAINPLAN_SOURCE_DIR});
        MainWindow w2(&c2);
        QString err;
        QVERIFY2(c2.openScenario(path, &err), qPrintable(err));
        w2.loadScenario(c2.scenario(), c2.modelRef());
        QCOMPARE(child<QComboBox>(w2, "modelCombo")->currentText(), QString("llama-2-13b"));
        QCOMPARE(child<QSpinBox>(w2, "gpusSpin")->value(), 8);
        QCOMPARE(child<QSpinBox>(w2, "tpSpin")->value(), 2);
        QVERIFY(child<QCheckBox>(w2, "spCheck")->isChecked());
        QCOMPARE(child<QComboBox>(w2, "zeroCombo")->currentText(), QString("1"));
        QCOMPARE(child<QSpinBox>(w2, "globalBatchSpin")->value(), 64);
        QCOMPARE(c2.memory().peak().total, gui_total);
        QCOMPARE(c2.time().throughput.tokens_per_s, gui_tps);
        // The CLI reads the same file to the same numbers.
        const auto fit = cli_json({"fit", "--scenario", path.toStdString(), "--json"});
        QCOMPARE(fit["memory"]["total_bytes"].get<double>(), gui_total);
        const auto sim = cli_json({"simulate", "--scenario", path.toStdString(), "--json"});
        QVERIFY(qAbs(sim["throughput"]["tokens_per_s"].get<double>() - gui_tps) < 1e-6 * gui_tps);
        // And the copied command line reproduces it too.
        QVERIFY(c2.commandLine().startsWith("trainplan fit llama-2-13b --gpu a100-sxm-80gb --gpus 8"));
    }

    void planRunsOffTheGuiThreadAndLoadsARow() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-13b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("a100-sxm-80gb");
        child<QSpinBox>(w, "gpusSpin")->setValue(16);
        child<QSpinBox>(w, "globalBatchSpin")->setValue(128);
        QVERIFY(c.valid());
        QTest::mouseClick(child<QPushButton>(w, "planButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(child<QPushButton>(w, "planButton")->isEnabled(), 30000);
        auto* table = child<QTableWidget>(w, "planTable");
        QVERIFY(table->rowCount() > 0);
        const QString layout = table->item(0, 1)->text();
        const int gpus = table->item(0, 0)->text().toInt();
        emit table->cellDoubleClicked(0, 0);
        QCOMPARE(child<QSpinBox>(w, "gpusSpin")->value(), gpus);
        QVERIFY(layout.startsWith(QString("tp%1 pp%2").arg(child<QSpinBox>(w, "tpSpin")->value()).arg(child<QSpinBox>(w, "ppSpin")->value())));
        QVERIFY(c.valid());
        QVERIFY(c.memory().peak().fits());
    }

    void compareAndAdvice() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("a100-sxm-80gb");
        QTest::mouseClick(child<QPushButton>(w, "pinButton"), Qt::LeftButton);
        child<QComboBox>(w, "gpuCombo")->setCurrentText("h100-sxm");
        QTest::mouseClick(child<QPushButton>(w, "pinButton"), Qt::LeftButton);
        auto* table = child<QTableWidget>(w, "compareTable");
        QCOMPARE(table->columnCount(), 2);
        QCOMPARE(table->item(3, 1)->text(), QString::number(c.pinned()[1].time.throughput.tokens_per_s, 'f', 0));
        child<QTabWidget>(w, "tabs")->setCurrentIndex(4);
        QVERIFY(child<QLabel>(w, "adviceLabel")->text().contains(QString(to_string(c.advice().diagnosis.bottleneck)).toUpper()));
        QVERIFY(child<QTableWidget>(w, "adviceTable")->rowCount() >= 1);
    }

    void editingAnArchitectureFieldMakesAnInlineModel() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("a100-sxm-80gb");
        child<QSpinBox>(w, "layersSpin")->setValue(16);
        QVERIFY(c.input().model_inline.has_value());
        QCOMPARE(c.scenario().model.num_layers, std::int64_t{16});
        QVERIFY(child<QComboBox>(w, "modelCombo")->currentText().endsWith("(edited)"));
        // Half the layers of Llama-2-7B: 16 x 202,383,360 + 2 x 131,072,000 + 4096 parameters.
        QCOMPARE(count_params(c.scenario().model).total, std::int64_t{16} * 202'383'360 + 2 * 131'072'000 + 4096);
        QCOMPARE(table_value(child<QTableWidget>(w, "memoryTable"), "total"), gb(core_memory(c.input()).total));
        // A mixture of experts from the same editor.
        child<QSpinBox>(w, "expertsSpin")->setValue(8);
        child<QSpinBox>(w, "topKSpin")->setValue(2);
        QCOMPARE(c.scenario().model.moe.num_experts, 8);
        QCOMPARE(table_value(child<QTableWidget>(w, "memoryTable"), "total"), gb(core_memory(c.input()).total));
        // Saved inline and read back to the same numbers.
        QTemporaryDir dir;
        QString err;
        QVERIFY2(c.saveScenario(dir.filePath("inline.toml"), &err), qPrintable(err));
        Controller c2({TRAINPLAN_SOURCE_DIR});
        QVERIFY2(c2.openScenario(dir.filePath("inline.toml"), &err), qPrintable(err));
        QVERIFY2(c2.valid(), qPrintable(c2.errors()));
        QCOMPARE(count_params(c2.scenario().model).total, count_params(c.scenario().model).total);
        QCOMPARE(c2.memory().peak().total, c.memory().peak().total);
    }

    void exportedReportComparesTheEditedClusterWithThePricedGpus() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("a100-sxm-40gb");  // has no price preset
        child<QSpinBox>(w, "gpusSpin")->setValue(8);
        child<QSpinBox>(w, "globalBatchSpin")->setValue(64);
        child<QDoubleSpinBox>(w, "rentSpin")->setValue(2.0);
        QVERIFY2(c.valid(), qPrintable(c.errors()));
        // The rent typed in the editor prices the edited GPU: rent = $2 x GPU-hours.
        const SizingReport rep = c.sizingReport(1e11, 30);
        QVERIFY(rep.options.size() >= 5);
        QCOMPARE(QString::fromStdString(rep.options.front().gpu_id), QString("a100-sxm-40gb"));
        QCOMPARE(rep.options.front().rent_usd_per_gpu_hour, 2.0);
        QVERIFY(rep.options.front().gpu_hours > 0);
        QVERIFY(qAbs(rep.options.front().rent_cost_usd - 2.0 * rep.options.front().gpu_hours) < 1e-6 * rep.options.front().rent_cost_usd);
        QTemporaryDir dir;
        QString err;
        const QString html_path = dir.filePath("report.html");
        QVERIFY2(c.exportReport(html_path, 1e11, 30, &err), qPrintable(err));
        QFile f(html_path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString html = QString::fromUtf8(f.readAll());
        // The edited GPU and the priced presets `trainplan size` compares by default.
        for (const char* name : {"NVIDIA A100 40GB SXM4", "NVIDIA H100 SXM5 80GB", "NVIDIA GeForce RTX 4090", "NVIDIA A100 80GB SXM4"})
            QVERIFY2(html.contains(name), name);
        const QString pdf_path = dir.filePath("report.pdf");
        QVERIFY2(c.exportReport(pdf_path, 1e11, 30, &err), qPrintable(err));
        QFile p(pdf_path);
        QVERIFY(p.open(QIODevice::ReadOnly));
        QVERIFY(p.read(5) == "%PDF-");
    }

    // Issue 16: an invalid GPU preset in a preset folder is reported by the export
    // (item 5); the PDF never goes through the old predictable "report.pdf.tmp",
    // where a planted link would have sent it over another file (item 3).
    void exportReportsInvalidPresetsAndFollowsNoPlantedLink() {
        QTemporaryDir presets;
        const QString broken = presets.filePath("hardware/gpu/broken.toml");
        QVERIFY(QDir().mkpath(presets.filePath("hardware/gpu")));
        {
            QFile f(broken);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("name = 5\n");
        }
        QTemporaryDir dir;
        QString err;
        {
            Controller c({presets.path().toStdString(), TRAINPLAN_SOURCE_DIR});
            MainWindow w(&c);
            child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
            child<QComboBox>(w, "gpuCombo")->setCurrentText("h100-sxm");
            QVERIFY2(c.valid(), qPrintable(c.errors()));
            QVERIFY(!c.exportReport(dir.filePath("r.html"), 1e11, 30, &err));
            QVERIFY2(err.startsWith(broken + ":1:8: error: name = 5 must be a string"), qPrintable(err));
        }
        QVERIFY(QFile::remove(broken));
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        child<QComboBox>(w, "modelCombo")->setEditText("llama-2-7b");
        child<QComboBox>(w, "gpuCombo")->setCurrentText("h100-sxm");
        QVERIFY2(c.valid(), qPrintable(c.errors()));
        const QString victim = dir.filePath("victim.txt");
        {
            QFile v(victim);
            QVERIFY(v.open(QIODevice::WriteOnly));
            v.write("precious\n");
        }
        QVERIFY(QFile::link(victim, dir.filePath("report.pdf.tmp")));
        QVERIFY2(c.exportReport(dir.filePath("report.pdf"), 1e11, 30, &err), qPrintable(err));
        QFile v(victim);
        QVERIFY(v.open(QIODevice::ReadOnly));
        QCOMPARE(v.readAll(), QByteArray("precious\n"));
        QFile p(dir.filePath("report.pdf"));
        QVERIFY(p.open(QIODevice::ReadOnly));
        QVERIFY(p.read(5) == "%PDF-");
    }

    void everyInputIsReachableByKeyboard() {
        Controller c({TRAINPLAN_SOURCE_DIR});
        MainWindow w(&c);
        int inputs = 0;
        for (QWidget* x : w.findChildren<QWidget*>()) {
            if (!qobject_cast<QSpinBox*>(x) && !qobject_cast<QComboBox*>(x) && !qobject_cast<QCheckBox*>(x) && !qobject_cast<QPushButton*>(x)) continue;
            if (qobject_cast<QSpinBox*>(x->parentWidget()) || qobject_cast<QComboBox*>(x->parentWidget())) continue;
            ++inputs;
            QVERIFY2(!x->objectName().isEmpty(), qPrintable(x->metaObject()->className()));
            QVERIFY2(x->focusPolicy() & Qt::TabFocus, qPrintable(x->objectName()));
        }
        QVERIFY(inputs >= 30);
    }
};

QTEST_MAIN(GuiTest)
#include "test_gui.moc"
