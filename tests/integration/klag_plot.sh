#!/usr/bin/env bash
# klag --plot (issue 38): a history sampled from a real broker drawn as SVG
# and as a chart in block characters. The SVG is parsed as XML, has a
# series per group with a point per sample at the height of the lag klag
# reported then, the verdict changes klag status judged after each sample,
# titles and axes; Debian's rsvg-convert renders it; the text chart fits
# the terminal it is drawn in, in a tmux pane of 80 columns.
source "$(dirname "$0")/lib.sh"
requires_broker kbroker "the picture is drawn from the history; sampling on both brokers is klag.sh's"
start_broker ev:4
T=$(topic ev)
A=$(group slow)
B=$(group fast)
H=$WORK/lag.db
svg_info() { python3 "$KPIPE_SOURCE_DIR/tests/integration/bin/svg_info" "$@"; }

# Rounds of: 40 records produced; the slow group reads 12 of them, the fast
# one all; a sample of both. Then rounds with nothing produced or read: the
# slow group stalls. After each sample, the verdict klag status gives the
# history so far (the picture's marks must be where it changed).
: >"$WORK/samples.ndjson"
: >"$WORK/verdicts"
round() {
  local produce=$1 slow=$2
  # All to partition 0: the slow group's verdict is that partition's; the
  # others stay empty (lag 0, OK).
  if ((produce > 0)); then
    seq "$produce" | jq -c --arg t "$T" '{topic: $t, partition: 0, value: {n: .}}' |
      kproduce -b "$BROKERS" -t "$T" --envelope --keep-partition
  fi
  # The two groups read at once: each joins its group, which takes kbroker
  # seconds.
  local pids=()
  if ((slow > 0)); then
    kconsume -b "$BROKERS" -t "$T" -g "$A" -c "$slow" >/dev/null &
    pids+=($!)
  fi
  kconsume -b "$BROKERS" -t "$T" -g "$B" -e >/dev/null &
  pids+=($!)
  local pid
  for pid in "${pids[@]}"; do wait "$pid" || fail "a kconsume failed"; done
  klag -q -b "$BROKERS" -g "$A" -g "$B" -t "$T" --history "$H" --format ndjson |
    jq -c 'select(.at)' >>"$WORK/samples.ndjson"
  klag status -g "$A" --history "$H" --window 3 --format ndjson | jq -r 'select(.at) | .status' >>"$WORK/verdicts"
}
for _ in 1 2 3 4 5; do round 40 12; done
for _ in 1 2 3 4; do round 0 0; done
round 40 100
samples=$(jq -s 'map(select(.group == "'"$A"'")) | length' "$WORK/samples.ndjson")
assert_eq "$samples" 10 "samples of the slow group"
# The story must hold verdicts to draw: WARN while it falls behind, STALL
# once it stops reading.
grep -qx WARN "$WORK/verdicts" || fail "the slow group was never WARN: $(tr '\n' ' ' <"$WORK/verdicts")"
grep -qx STALL "$WORK/verdicts" || fail "the slow group never stalled: $(tr '\n' ' ' <"$WORK/verdicts")"

# 1. The SVG, parsed.
expect_exit 0 klag status -g "$A" -g "$B" --history "$H" --window 3 --plot "$WORK/lag.svg"
assert_empty "$WORK/out"
assert_empty "$WORK/err"
svg_info "$WORK/lag.svg" >"$WORK/info.json" || fail "lag.svg is not well-formed SVG"
# What it should show: per group, the lag of each sample, by time.
jq -s -c 'group_by(.group) | map({key: .[0].group, value: (sort_by(.at) | map(.lag))}) | from_entries' \
  "$WORK/samples.ndjson" >"$WORK/want_lags.json"
python3 - "$WORK/info.json" "$WORK/want_lags.json" "$A" "$B" <<'PY' || fail "lag.svg does not show the samples"
import json, sys
info = json.load(open(sys.argv[1])); want = json.load(open(sys.argv[2])); a, b = sys.argv[3], sys.argv[4]
def fail(m): print(m, file=sys.stderr); sys.exit(1)
texts = " ".join(info["texts"])
for needed in ("lag (records)", "time (UTC)", a, b):
    if needed not in texts: fail(f"no text '{needed}' in the picture")
if "lag" not in info["title"]: fail(f"the title does not say what is drawn: {info['title']!r}")
records = [s for s in info["series"] if s["panel"] == 0]
names = sorted(s["name"] for s in records)
if names != sorted([a, b]): fail(f"series of panel 0: {names}, expected one per group")
value_of = info["panels"][0]["value_of_y"]  # [slope, intercept]: value = slope * y + intercept
frame = info["panels"][0]["frame"]          # [x0, y0, x1, y1]
for s in records:
    pts = s["points"]
    lags = want[s["name"]]
    if len(pts) != len(lags): fail(f"{s['name']}: {len(pts)} points for {len(lags)} samples")
    xs = [p[0] for p in pts]
    if xs != sorted(xs) or len(set(xs)) != len(xs): fail(f"{s['name']}: points not in time order: {xs}")
    for (x, y), lag in zip(pts, lags):
        if not (frame[0] - 0.5 <= x <= frame[2] + 0.5 and frame[1] - 0.5 <= y <= frame[3] + 0.5):
            fail(f"{s['name']}: point {x},{y} outside the plot {frame}")
        got = value_of[0] * y + value_of[1]
        # Half a pixel of rounding, in the axis's units.
        if abs(got - lag) > abs(value_of[0]) * 0.6 + 1e-9:
            fail(f"{s['name']}: a point at y={y} reads {got:.1f}, the sample's lag was {lag}")
print("ok")
PY
# Marks: where klag status's verdict of the slow group changed, at that
# sample's point.
python3 - "$WORK/info.json" "$WORK/verdicts" "$A" <<'PY' || fail "lag.svg's verdict marks are wrong"
import json, sys
info = json.load(open(sys.argv[1])); verdicts = open(sys.argv[2]).read().split(); a = sys.argv[3]
def fail(m): print(m, file=sys.stderr); sys.exit(1)
pts = next(s for s in info["series"] if s["panel"] == 0 and s["name"] == a)["points"]
want = [(pts[i][0], f"{a}: {v}") for i, v in enumerate(verdicts)
        if (i == 0 and v != "OK") or (i > 0 and v != verdicts[i - 1])]
got = [(m["x"], m["label"]) for m in info["marks"] if m["label"].startswith(a)]
if info["marks"] and info["marks"][0]["shown"] != info["marks"][0]["label"]:
    fail(f"the first mark's label is not drawn: {info['marks'][0]}")
if [l for _, l in got] != [l for _, l in want]: fail(f"marks {got}, expected {want}")
for (gx, _), (wx, _) in zip(got, want):
    if abs(gx - wx) > 1: fail(f"a mark at x={gx}, its sample at x={wx}")
print("ok")
PY
# A second panel of lag in seconds: kbroker's records have timestamps.
assert_eq "$(jq '[.series[] | select(.panel == 1)] | length' "$WORK/info.json")" 2 "series of lag in seconds"
jq -r '.texts[]' "$WORK/info.json" | grep -qx "lag (seconds)" || fail "no panel titled 'lag (seconds)'"

# 2. It renders: Debian's rsvg-convert (librsvg) makes a PNG of it.
rsvg-convert -o "$WORK/lag.png" "$WORK/lag.svg" || fail "rsvg-convert could not render lag.svg"
assert_eq "$(head -c 8 "$WORK/lag.png" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a "PNG signature"

# 3. --plot - writes the same picture to standard output.
expect_exit 0 klag status -g "$A" -g "$B" --history "$H" --window 3 --plot -
assert_files_equal "$WORK/out" "$WORK/lag.svg"

# 4. A series per partition with --granularity partition; the sampling
# form appends its sample, then draws.
expect_exit 0 klag -b "$BROKERS" -g "$A" -t "$T" --history "$H" --granularity partition --plot "$WORK/parts.svg"
assert_empty "$WORK/out"
svg_info "$WORK/parts.svg" >"$WORK/parts.json" || fail "parts.svg is not well-formed SVG"
assert_eq "$(jq -c '[.series[] | select(.panel == 0) | .name] | sort' "$WORK/parts.json")" \
  "$(jq -nc --arg t "$T" '[range(4) | "\($t)[\(.)]"]')" "a series per partition"
assert_eq "$(jq '[.series[] | select(.panel == 0) | .points | length] | unique' -c "$WORK/parts.json")" "[11]" \
  "points per partition: ten samples, and the one just taken"

# 5. Fewer than two samples: one line, exit 1, no picture.
klag -q -b "$BROKERS" -g "$B" -t "$T" --history "$WORK/one.db" --format ndjson >/dev/null
expect_exit 1 klag status -g "$B" --history "$WORK/one.db" --plot "$WORK/none.svg"
assert_eq "$(wc -l <"$WORK/err")" 1 "lines on stderr"
assert_contains "$WORK/err" "klag: error: history '$WORK/one.db' holds 1 sample of group '$B'"
[[ ! -e "$WORK/none.svg" ]] || fail "a picture of one sample was written"

# 6. Usage errors.
expect_exit 2 klag status -g "$A" --plot "$WORK/x.svg"
expect_exit 2 klag -b "$BROKERS" -g "$A" --history "$H" --watch 1s --plot "$WORK/x.svg"

# 7. Without a file name and not on a terminal: the text chart in $COLUMNS.
COLUMNS=60 expect_exit 0 klag status -g "$A" -g "$B" --history "$H" --window 3 --plot
assert_contains "$WORK/out" "lag (records)"
widest=$(python3 -c 'import sys; print(max(len(l) for l in open(sys.argv[1], encoding="utf-8").read().splitlines()))' "$WORK/out")
((widest <= 60)) || fail "the text chart is $widest columns wide in COLUMNS=60"
grep -q $'\033' "$WORK/out" && fail "colours in a chart that is not on a terminal"

# 8. On a terminal of 80 columns (a tmux pane, whatever $COLUMNS says): the
# chart fits, no line wrapped.
sock=$WORK/tmux.sock
# The server goes with the test, whatever its end (cleanup reads the
# test's status from $?).
trap 'status=$?; tmux -S "$sock" kill-server 2>/dev/null || true; (exit $status); cleanup' EXIT
tmux -S "$sock" -f /dev/null new-session -d -x 80 -y 60 \
  "COLUMNS=200 klag status -g $A -g $B --history $H --window 3 --plot 2>$WORK/tmux.err; echo \"exit \$?\"; tmux -S $sock wait-for -S drawn; exec cat"
timeout 30 tmux -S "$sock" wait-for drawn || fail "the chart was not drawn in tmux within 30s"
tmux -S "$sock" capture-pane -p -t 0 >"$WORK/pane"
tmux -S "$sock" capture-pane -p -J -t 0 >"$WORK/pane.joined"
assert_contains "$WORK/pane" "exit 0"
assert_empty "$WORK/tmux.err"
assert_contains "$WORK/pane" "lag (records)"
assert_contains "$WORK/pane" "$A"
assert_files_equal "$WORK/pane" "$WORK/pane.joined"
widest=$(python3 -c 'import sys; print(max(len(l.rstrip()) for l in open(sys.argv[1], encoding="utf-8").read().splitlines()))' "$WORK/pane")
((widest <= 80)) || fail "a line of the chart is $widest columns wide in an 80-column pane"
echo "PASS"
