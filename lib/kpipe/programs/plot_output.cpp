#include "kpipe/programs/plot_output.h"

namespace kpipe {

Status write_plot(const Chart& chart, const PlotOptions& plot, Io& io) {
  if (plot.file.empty()) {
    TextChartOptions text;
    text.columns = io.columns;
    text.color = io.interactive;
    io.out.write(render_text_chart(chart, text));
    return {};
  }
  if (plot.file == "-") {
    io.out.write(render_svg(chart));
    return {};
  }
  return write_file_atomically(plot.file, render_svg(chart));
}

}  // namespace kpipe
