#!/usr/bin/env bash
# kcheckpoint history --plot (issue 38): the checkpoints a real pipeline
# completed, drawn. The SVG is well-formed, has a series for the time each
# checkpoint took and for its latency's p50 and p99, each with a point per
# complete checkpoint (with records, for the latency) where history's
# ndjson puts it, names them and its axes, and renders with rsvg-convert;
# --plot - writes the same SVG; --plot alone draws the text chart within
# $COLUMNS; a state with fewer than two complete checkpoints is an error.
# The state is an SQLite file or a PostgreSQL database (lib.sh, store).
source "$(dirname "$0")/lib.sh"
start_broker ev:2
T=$(topic ev)
S=$(store plot)
command -v rsvg-convert >/dev/null || fail "rsvg-convert is missing (Debian's librsvg2-bin; scripts/test installs it)"

# run_once N AGE PAUSE: N more records through the pipeline, to the end of
# the topic, and the checkpoint kconsume writes at the end covers them.
# Their Kafka timestamps are AGE seconds and more before now, 100 ms apart
# (so that each checkpoint's latency, its p50 and its p99 differ), and the
# checkpoint takes PAUSE seconds more to complete (--each: the command
# stands for a slow sink), so that the picture's values differ too.
run_once() {
  local now
  now=$(date +%s%3N)
  jq -nc --argjson n "$1" --argjson at "$((now - $2 * 1000))" \
    'range($n) | {key: "k\(. % 5)", value: {i: .}, timestamp: ($at - . * 100)}' |
    kproduce -b "$BROKERS" -t "$T" --envelope
  kconsume -b "$BROKERS" -t "$T" -e --state "$S" --checkpoint-interval 1h |
    kcheckpoint commit --state "$S" --each "cat >/dev/null && sleep $3"
}

# 1. One complete checkpoint is a point, not a trend: an error of one
# line, and no picture.
run_once 30 60 0
assert_eq "$(kcheckpoint history --state "$S" | jq -s 'map(select(.completed_at)) | length')" 1 "complete checkpoints after one run"
expect_exit 1 kcheckpoint history --state "$S" --plot "$WORK/one.svg"
assert_empty "$WORK/out"
[[ $(wc -l <"$WORK/err") == 1 ]] || fail "not one line of error: $(cat "$WORK/err")"
assert_contains "$WORK/err" "holds 1 complete checkpoint: a plot needs at least two"
[[ "$KPIPE_TEST_STORE" != sqlite ]] ||
  assert_eq "$(cat "$WORK/err")" "kcheckpoint: error: state '$S' holds 1 complete checkpoint: a plot needs at least two" "the error"
[[ ! -e "$WORK/one.svg" ]] || fail "a picture was written for one checkpoint"
expect_exit 2 kcheckpoint history --state "$S" --plot "$WORK/one.svg" --format ndjson
assert_contains "$WORK/err" "--plot and --format cannot be combined"

# 2. More runs, each with records at a checkpoint of its own.
run_once 20 5 0.4
run_once 40 20 0.1
kcheckpoint history --state "$S" --format ndjson >"$WORK/history.ndjson"
complete=$(jq -s 'map(select(.completed_at)) | length' "$WORK/history.ndjson")
with_latency=$(jq -s 'map(select(.completed_at and .latency_ms.records > 0)) | length' "$WORK/history.ndjson")
((complete >= 3 && with_latency >= 3)) || fail "$complete complete checkpoints, $with_latency with latency: $(cat "$WORK/history.ndjson")"

expect_exit 0 kcheckpoint history --state "$S" --plot "$WORK/out.svg"
assert_empty "$WORK/out"
assert_empty "$WORK/err"

# The picture read back with an XML parser: each series' points, where the
# renderer put them, against the history's own numbers. A point's x must
# follow from its checkpoint's completion time and its y from its value by
# one linear scale per axis (the panels share the time axis; p50 and p99
# share their panel's value axis), higher values higher up.
# The title names the state: a file as given; a PostgreSQL target shown
# without a password (this one has none), so its database's name at least.
shown=$S
! is_postgres "$S" || shown=${S##*/}
python3 "$KPIPE_SOURCE_DIR/tests/integration/bin/svg_info" "$WORK/out.svg" >"$WORK/info.json" ||
  fail "out.svg is not well-formed SVG"
python3 - "$WORK/info.json" "$WORK/history.ndjson" "$shown" <<'EOF' || fail "the SVG does not show the history (above)"
import datetime, json, sys

info, history, state = sys.argv[1:]
info = json.load(open(info))

def ms(t):
    return datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000

want = {"took": [], "p50": [], "p99": []}
for line in open(history):
    c = json.loads(line)
    if not c["completed_at"]:
        continue
    at = ms(c["completed_at"])
    want["took"].append((at, max(c["took_ms"], 0)))
    l = c["latency_ms"]
    if l and l["records"] > 0:
        want["p50"].append((at, max(l["p50"], 0)))
        want["p99"].append((at, max(l["p99"], 0)))
for w in want.values():
    w.sort()

series = {}
for s in info["series"]:
    assert s["name"] not in series, f"two series named {s['name']!r}"
    series[s["name"]] = (s["panel"], [tuple(p) for p in s["points"]])
assert sorted(series) == sorted(want), f"series {sorted(series)}, expected {sorted(want)}"
assert series["p50"][0] == series["p99"][0] != series["took"][0], \
    f"panels: took {series['took'][0]}, p50 {series['p50'][0]}, p99 {series['p99'][0]}"
for name, w in want.items():
    got = series[name][1]
    assert len(got) == len(w), f"{name}: {len(got)} points for {len(w)} checkpoints"

def linear(pairs, what, decreasing):
    # pairs: (value, coordinate); a straight line through them, within a
    # pixel, rising or falling as the axis does.
    lo, hi = min(pairs), max(pairs)
    if hi[0] == lo[0]:
        assert all(abs(c - lo[1]) <= 1 for _, c in pairs), f"{what}: one value at different places {pairs}"
        return
    slope = (hi[1] - lo[1]) / (hi[0] - lo[0])
    assert (slope < 0) == decreasing and slope != 0, f"{what}: the scale runs the wrong way {pairs}"
    for v, c in pairs:
        assert abs(lo[1] + slope * (v - lo[0]) - c) <= 1, f"{what}: value {v} drawn at {c}, off the scale {pairs}"

linear([(w[0], g[0]) for n in want for w, g in zip(want[n], series[n][1])], "time axis", False)
linear([(w[1], g[1]) for w, g in zip(want["took"], series["took"][1])], "took", True)
linear([(w[1], g[1]) for n in ("p50", "p99") for w, g in zip(want[n], series[n][1])], "latency", True)

# Each panel's value axis as its tick labels give it (format_plot_value's
# "0", "250ms", "1.5s", "2m", "3h" at their heights): a point stands at
# its value in seconds, so milliseconds drawn as seconds cannot pass.
for name, w in want.items():
    slope, intercept = info["panels"][series[name][0]]["value_of_y"]
    for (at, value), (x, y) in zip(w, series[name][1]):
        shown = slope * y + intercept
        assert abs(shown - value / 1000) <= abs(slope), \
            f"{name}: {value} ms drawn at {shown:.3f} s on its axis"

texts = info["texts"]
assert info["title"].startswith("kcheckpoint: checkpoints of ") and state in info["title"], \
    f"the title {info['title']!r} does not name {state!r}"
for t in ("checkpoint time (barrier to completion)",
          "end-to-end latency", "took", "p50", "p99"):
    assert any(t in x for x in texts), f"no text {t!r} in {texts}"
EOF

# Debian's renderer draws it without a word of complaint.
expect_exit 0 rsvg-convert -o "$WORK/out.png" "$WORK/out.svg"
assert_empty "$WORK/err"
assert_eq "$(head -c 8 "$WORK/out.png" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a "the PNG's signature"

# 3. --plot -: the same picture on standard output.
expect_exit 0 kcheckpoint history --state "$S" --plot -
assert_files_equal "$WORK/out" "$WORK/out.svg"

# 4. --plot alone, standard output a file: the chart in block characters,
# no line wider than $COLUMNS (characters, not bytes), no colours.
COLUMNS=60 expect_exit 0 kcheckpoint history --state "$S" --plot
assert_empty "$WORK/err"
python3 - "$WORK/out" <<'EOF' || fail "the text chart: $(cat "$WORK/out")"
import sys
text = open(sys.argv[1], encoding="utf-8").read()
lines = text.splitlines()
assert len(lines) >= 10, f"{len(lines)} lines"
wide = [l for l in lines if len(l) > 60]
assert not wide, f"lines wider than 60 columns: {wide}"
assert "\x1b" not in text, "colours on a file"
assert any(c in text for c in "█▓▒░"), "no block characters"
for t in ("took", "p50", "p99"):
    assert t in text, f"no {t!r}"
EOF
