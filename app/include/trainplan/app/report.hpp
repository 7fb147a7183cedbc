// The sizing report in Markdown, self-contained HTML (inline SVG charts), JSON
// and CSV; and atomic file output (temporary file + rename).
#pragma once

#include <string>

#include "trainplan/sizing.hpp"

namespace trainplan::app {

std::string report_markdown(const SizingReport& r);
std::string report_html(const SizingReport& r);
std::string report_json(const SizingReport& r);
std::string report_csv(const SizingReport& r);

// Writes `text` to `path` through a temporary file in the same directory and a
// rename, so the target is either the old file or the whole new one. False with
// a reason naming the path when it cannot.
bool write_file_atomically(const std::string& path, const std::string& text, std::string& why);

// Prints the HTML report to PDF with a headless Chromium found on PATH
// (Debian: apt install chromium), into a temporary file that is renamed into place.
bool write_pdf_atomically(const std::string& path, const std::string& html, std::string& why);

}  // namespace trainplan::app
