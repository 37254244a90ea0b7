// The pipeline's state file (--state FILE, store/state_store.h) as the
// SnapshotStore of a stateful stage (stage/stateful.h): the stage layer
// may not see SQLite, so the two meet here.
#pragma once

#include <memory>
#include <string>

#include "kpipe/stage/stateful.h"
#include "kpipe/status.h"

namespace kpipe {

// Opens (creating) the state file at `path` for a stage, whose lock it
// takes at restore() and holds until closed (kpipe(7), CONTROL
// LINES AND CHECKPOINTS); null when `path` is empty (no --state).
Expected<std::unique_ptr<SnapshotStore>> open_state_file(const std::string& path);

class StateStore;
// The terminal stage completed `c` in `store` at `now`: its meter counts it,
// with the end-to-end latency the store gives (kpipe(7), METRICS).
Status meter_completed(StateStore& store, CheckpointMeter& meter, const Checkpoint& c, Millis now);

}  // namespace kpipe
