// Where --plot's picture goes (PlotOptions, stage/io.h): SVG into a file
// or standard output, or a chart in block characters for the terminal.
#pragma once

#include "kpipe/plot.h"
#include "kpipe/stage/io.h"
#include "kpipe/status.h"

namespace kpipe {

// Writes `chart` where `plot` says: a file is replaced whole
// (write_file_atomically), so that a browser or a web server never shows
// half a picture; the text chart fits io.columns, in colour on a
// terminal.
Status write_plot(const Chart& chart, const PlotOptions& plot, Io& io);

}  // namespace kpipe
