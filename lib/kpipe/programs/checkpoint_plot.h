// kcheckpoint history --plot's picture (kcheckpoint(1), history): how long
// each checkpoint took from its barrier to its completion, and the
// end-to-end latency (p50, p99) of the records it covered, at each
// checkpoint's completion time. Pure: the checkpoints come from the store
// (StateStore::checkpoints), the picture goes to write_plot.
#pragma once

#include <string_view>
#include <vector>

#include "kpipe/plot.h"
#include "kpipe/status.h"
#include "kpipe/store/state_store.h"

namespace kpipe {

// The chart of a state's `checkpoints` (by id, as the store gives them);
// `state` is the store's target as given, shown without its password. An
// error when fewer than two checkpoints are complete: one point is not a
// trend, and an empty picture says nothing.
Expected<Chart> checkpoint_chart(const std::vector<CheckpointRecord>& checkpoints,
                                 std::string_view state);

}  // namespace kpipe
