#include "kpipe/store/key_samples.h"

#include <algorithm>

#include <fmt/format.h>

namespace kpipe {

namespace {

// The ring of a stage's partition is its rows of slot 0 to kKeySamplesKept
// - 1; seq counts the samples written, so that slot seq % kKeySamplesKept
// is the oldest. Looked up by (stage, hash) for keys of other partitions.
const std::vector<const char*> kMigrationTexts = {
    // v1
    "CREATE TABLE kpipe_key_samples ("
    "  stage TEXT NOT NULL,"
    "  topic TEXT NOT NULL,"
    "  partition {int} NOT NULL,"
    "  slot {int} NOT NULL,"
    "  seq {int} NOT NULL,"
    "  hash {int} NOT NULL,"
    "  key {blob} NOT NULL,"
    "  checkpoint {int} NOT NULL,"
    "  PRIMARY KEY (stage, topic, partition, slot));"
    "CREATE INDEX kpipe_key_samples_by_hash ON kpipe_key_samples (stage, hash)",
};

// Hashes are unsigned; both databases keep signed 64-bit integers.
int64_t as_column(uint64_t hash) {
  return static_cast<int64_t>(hash);
}

std::string placeholders(size_t first, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("?{}", first + i);
  }
  return out;
}

}  // namespace

Status KeySamples::ensure_table() {
  if (ready_) return {};
  KPIPE_TRY(db_.migrate("key_samples", dialect_migrations(db_.dialect(), kMigrationTexts, {})));
  ready_ = true;
  return {};
}

Expected<int64_t> KeySamples::next_seq(std::string_view stage, const TopicPartition& partition) {
  auto key = std::make_pair(std::string(stage), partition);
  auto it = next_.find(key);
  if (it != next_.end()) return it->second;
  // A ring holds at most kKeySamplesKept rows: bounded, whatever the table.
  auto stmt = db_.prepare(
      "SELECT COALESCE(MAX(seq) + 1, 0) FROM kpipe_key_samples WHERE stage = ? AND topic = ? AND "
      "partition = ?");
  if (!stmt) return stmt.take_error();
  stmt->bind_text(1, stage).bind_text(2, partition.topic).bind(3, partition.partition);
  auto row = stmt->step();
  if (!row) return row.take_error();
  int64_t seq = *row ? stmt->column_int(0) : 0;
  next_.emplace(std::move(key), seq);
  return seq;
}

Expected<std::optional<KeySplit>> KeySamples::record(std::string_view stage,
                                                     const std::vector<KeySample>& samples,
                                                     const std::vector<std::string>& topics,
                                                     int64_t checkpoint) {
  if (samples.empty()) return std::optional<KeySplit>{};
  KPIPE_TRY(ensure_table());
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.take_error();
  // Two instances recording the stage's samples at once must not each
  // miss the other's: PostgreSQL's BEGIN takes no lock, and under READ
  // COMMITTED each lookup would see only what the other had committed
  // before, so a key sampled by both at their last checkpoints would go
  // unwarned. The second waits for the first and then sees its rows.
  // (SQLite's write transaction holds its lock from BEGIN.)
  if (db_.postgres()) {
    auto lock = db_.prepare("SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))");
    if (!lock) return lock.take_error();
    lock->bind_text(1, fmt::format("kpipe_key_samples:{}", stage));
    auto locked = lock->step();
    if (!locked) return locked.take_error();
    lock->reset();
  }

  // Two of this batch's partitions may hold one key: the store has
  // neither yet.
  std::optional<KeySplit> split;
  std::vector<const KeySample*> by_hash;
  for (const KeySample& s : samples) by_hash.push_back(&s);
  std::sort(by_hash.begin(), by_hash.end(),
            [](const KeySample* a, const KeySample* b) { return a->hash < b->hash; });
  for (size_t i = 1; i < by_hash.size() && !split; ++i) {
    const KeySample& a = *by_hash[i - 1];
    const KeySample& b = *by_hash[i];
    if (a.hash == b.hash && a.partition != b.partition && a.key == b.key)
      split = KeySplit{b.key, a.partition, b.partition};
  }
  auto find = db_.prepare(fmt::format(
      "SELECT hash, topic, partition, key FROM kpipe_key_samples WHERE stage = ?1 AND hash IN "
      "({})",
      placeholders(2, samples.size())));
  if (!find) return find.take_error();
  find->bind_text(1, stage);
  for (size_t i = 0; i < samples.size(); ++i)
    find->bind(static_cast<int>(i + 2), as_column(samples[i].hash));
  for (;;) {
    auto row = find->step();
    if (!row) return row.take_error();
    if (!*row) break;
    if (split) continue;
    TopicPartition there{std::string(find->column_text(1)),
                         static_cast<int32_t>(find->column_int(2))};
    if (std::find(topics.begin(), topics.end(), there.topic) == topics.end()) continue;
    int64_t hash = find->column_int(0);
    std::string_view key = find->column_text(3);
    for (const KeySample& s : samples) {
      // The same hash and the same text kept: the same key.
      if (as_column(s.hash) != hash || s.partition == there || s.key != key) continue;
      split = KeySplit{s.key, there, s.partition};
      break;
    }
  }
  find->reset();

  // Each partition's samples go to the next slots of its ring.
  std::vector<int64_t> seqs(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    auto seq = next_seq(stage, samples[i].partition);
    if (!seq) return seq.take_error();
    seqs[i] = *seq;
    next_[{std::string(stage), samples[i].partition}] = *seq + 1;
  }
  std::string rows;
  constexpr size_t kColumns = 7;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i > 0) rows += ", ";
    rows += fmt::format("(?1, {})", placeholders(2 + i * kColumns, kColumns));
  }
  auto insert = db_.prepare(fmt::format(
      "INSERT INTO kpipe_key_samples (stage, topic, partition, slot, seq, hash, key, checkpoint) "
      "VALUES {} ON CONFLICT (stage, topic, partition, slot) DO UPDATE SET seq = excluded.seq, "
      "hash = excluded.hash, key = excluded.key, checkpoint = excluded.checkpoint",
      rows));
  if (!insert) return insert.take_error();
  insert->bind_text(1, stage);
  for (size_t i = 0; i < samples.size(); ++i) {
    const KeySample& s = samples[i];
    int p = static_cast<int>(2 + i * kColumns);
    insert->bind_text(p, s.partition.topic)
        .bind(p + 1, s.partition.partition)
        .bind(p + 2, seqs[i] % kKeySamplesKept)
        .bind(p + 3, seqs[i])
        .bind(p + 4, as_column(s.hash))
        .bind_blob(p + 5, s.key)
        .bind(p + 6, checkpoint);
  }
  KPIPE_TRY(insert->run());
  KPIPE_TRY(tx->commit());
  return split;
}

}  // namespace kpipe
