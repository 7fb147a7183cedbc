#include <QApplication>
#include <QCommandLineParser>

#include "mainwindow.hpp"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName("trainplan");
    QApplication::setApplicationVersion(TRAINPLAN_GUI_VERSION);
    QCommandLineParser parser;
    parser.setApplicationDescription("trainplan desktop: explore configurations live");
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption scenario("scenario", "Open this scenario file.", "file");
    QCommandLineOption presets("presets", "Extra preset directory.", "dir");
    QCommandLineOption shots("screenshots", "Save a PNG of every view into DIR and exit.", "dir");
    parser.addOptions({scenario, presets, shots});
    parser.process(app);
    std::vector<std::string> dirs;
    for (const QString& d : parser.values(presets)) dirs.push_back(d.toStdString());
    trainplan::gui::Controller controller(dirs);
    trainplan::gui::MainWindow window(&controller);
    if (parser.isSet(scenario)) {
        QString err;
        if (!controller.openScenario(parser.value(scenario), &err)) {
            fprintf(stderr, "%s\n", qPrintable(err));
            return 2;
        }
        // Valid or not, the editor shows the file's values (an invalid one's errors
        // name file:line), never the default model's.
        window.showInput();
    }
    window.show();
    if (parser.isSet(shots)) return window.saveScreenshots(parser.value(shots)) ? 0 : 1;
    return app.exec();
}
