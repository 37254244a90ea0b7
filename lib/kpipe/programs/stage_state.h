// The pipeline's state store (--state, store/state_store.h) as the
// SnapshotStore of a stateful stage (stage/stateful.h): the stage layer
// may not see a database, so the two meet here.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/stage/io.h"
#include "kpipe/stage/stateful.h"
#include "kpipe/status.h"

namespace kpipe {

// Opens (creating) the state file at `path` for a stage, whose lock it
// takes at restore() and holds until closed (kpipe(7), CONTROL
// LINES AND CHECKPOINTS); null when `path` is empty (no --state).
Expected<std::unique_ptr<SnapshotStore>> open_stage_state(const std::string& path);

// Waits for the stage's input to have a first line (wait_for_input) and
// hands `store` (when not null) the instance its instance line names, so
// that restore() locks the stage's name within that instance (kpipe(7),
// MANY INSTANCES).
Status await_input(SnapshotStore* store, const InputOptions& input, const std::atomic<bool>* stop);

class StateStore;
// For a stage that completes checkpoints but saves no snapshots (kupsert,
// kproduce --transactional): refuses, as a stateful stage refuses a state
// saved with other options (StateFormat), when `options` are not those
// the stage ran with before in `store`; saves them when none are kept.
// `remedy` ends the refusal (check_state_options).
Status keep_stage_options(StateStore& store, std::string_view stage,
                          const std::vector<std::string>& options,
                          std::string_view remedy = "give another --name or state file");
// The terminal stage completed `c` in `store` at `now`: its meter counts it,
// with the end-to-end latency the store gives (kpipe(7), METRICS).
Status meter_completed(StateStore& store, CheckpointMeter& meter, const Checkpoint& c, Millis now);

}  // namespace kpipe
