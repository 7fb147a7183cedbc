// The main window: the whole scenario editable on the left, live results,
// sweeps, layout search, comparison and advice on the right.
#pragma once

#include <QMainWindow>
#include <QPointF>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>
#include <thread>

#include "controller.hpp"
#include "trainplan/schema.hpp"
#include "trainplan/search.hpp"

class QCheckBox;
class QChartView;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QVBoxLayout;
class QLabel;
class QProgressBar;
class QScrollArea;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTabWidget;

namespace trainplan::gui {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(Controller* controller, QWidget* parent = nullptr);
    ~MainWindow() override;

    // Loads a resolved scenario into the editor (what a plan or advice row does).
    void loadScenario(const Scenario& s, const QString& model_ref);
    // Shows the controller's input as entered (an opened scenario file, valid or
    // not): the fields it sets, the rest as the resolver fills them.
    void showInput();
    // Saves every tab as a PNG into `dir` (for review of the look).
    bool saveScreenshots(const QString& dir);
    // Time of the last input -> painted results round trip, in ms.
    double lastRepaintMs() const { return repaint_ms_; }

public slots:
    void readInputs();
    void showResults();
    void runSweep();
    void startPlan();
    void cancelPlan();

private:
    void buildEditor(QWidget* host);
    void buildResults(QWidget* host);
    void buildSweeps(QWidget* host);
    void buildPlan(QWidget* host);
    void buildCompare(QWidget* host);
    void buildAdvice(QWidget* host);
    void buildMenus();
    void showCompare();
    void showAdvice();
    void applyAdvice(int row);
    void planFinished(const QVector<PlanCandidate>& rows, const QVector<PlanCandidate>& front, bool cancelled);
    void showFront();
    void loadFrontPoint(const QPointF& p);
    void setArchitectureFields(const ModelSpec& m);
    void clearResults();
    void showCalibration();
    // The editor form, generated from the scenario schema (schema.hpp).
    void buildModelGroup(QFormLayout* form, QWidget* host);
    void buildFieldGroups(QVBoxLayout* v, QWidget* host);
    void buildBudgetGroup(QFormLayout* form, QWidget* host);
    void connectModelGroup();
    QWidget* makeFieldWidget(const Field& f, QWidget* host);
    std::optional<FieldValue> widgetValue(const Field& f, QWidget* w) const;
    void showFieldValue(const Field& f, QWidget* w, const std::optional<FieldValue>& v);
    void fieldEdited(const Field& f, QWidget* w);
    void refreshFields();

    Controller* c_;
    bool loading_ = false;
    double repaint_ms_ = 0;

    // editor
    QComboBox *model_, *activation_, *norm_;
    QPushButton* open_model_;
    QSpinBox *layers_, *hidden_, *heads_, *kv_heads_, *ffn_, *vocab_, *max_seq_, *experts_, *top_k_;
    QCheckBox* tied_;
    std::vector<std::pair<const Field*, QWidget*>> field_widgets_;  // one per schema row in the form
    QDoubleSpinBox *tokens_, *rent_;
    QLabel *dp_label_, *error_;
    QScrollArea* scroll_;
    QLabel* calib_label_;
    QPushButton* calib_clear_;
    // results
    QTabWidget* tabs_;
    QLabel *banner_, *metrics_;
    QTableWidget* mem_table_;
    QChartView *mem_chart_, *time_chart_;
    // sweeps
    QComboBox* sweep_kind_;
    QChartView *sweep_mem_, *sweep_tps_;
    // plan
    QPushButton *plan_button_, *plan_cancel_;
    QProgressBar* plan_progress_;
    QTableWidget* plan_table_;
    QVector<PlanCandidate> plan_rows_;
    QChartView* plan_chart_;
    QVector<PlanCandidate> plan_front_;  // PlanResult::pareto at the current GPU count, fastest first
    std::unique_ptr<std::thread> plan_thread_;
    std::atomic<bool> plan_cancel_flag_{false};
    // compare
    QTableWidget* compare_table_;
    QChartView* compare_chart_;
    // advice
    QLabel* advice_label_;
    QTableWidget* advice_table_;
    QPushButton* apply_advice_;
    std::vector<Scenario> advice_scenarios_;  // the remedy of each advice row
    QLabel* update_label_;
};

}  // namespace trainplan::gui
