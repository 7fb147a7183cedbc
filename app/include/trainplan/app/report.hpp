// The sizing report in Markdown, self-contained HTML (inline SVG charts), JSON
// and CSV; and atomic file output (temporary file + rename).
#pragma once

#include <string>

#include "trainplan/sizing.hpp"

namespace trainplan::app {

// The report's date (UTC, YYYY-MM-DD; $SOURCE_DATE_EPOCH when set, for reproducible output).
std::string report_date();
std::string report_markdown(const SizingReport& r);
std::string report_html(const SizingReport& r);
std::string report_json(const SizingReport& r);
std::string report_csv(const SizingReport& r);

// Writes `text` to `path` through a temporary file in the same directory and a
// rename, so the target is either the old file or the whole new one. The
// temporary is created O_CREAT | O_EXCL | O_NOFOLLOW under an unpredictable name;
// an existing target keeps its permission bits; a target that exists and is not
// a regular file (device, FIFO, directory, symbolic link) is refused. False with
// a reason naming the path when it cannot.
bool write_file_atomically(const std::string& path, const std::string& text, std::string& why);

// Prints the HTML report to PDF with a headless Chromium ($TRAINPLAN_CHROMIUM, else
// chromium / chromium-browser / google-chrome on PATH; Debian: apt install chromium),
// started with posix_spawn, an argument vector and a fixed environment (no shell),
// in a private mkdtemp directory; the PDF is then written as above.
bool write_pdf_atomically(const std::string& path, const std::string& html, std::string& why);

}  // namespace trainplan::app
