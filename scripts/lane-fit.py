#!/usr/bin/env python3
"""How well a lane-sharing rule predicts the transfers a run measured.

    scripts/lane-fit.py PLATFORM.toml TRACE.json [TRACE.json ...]

For a run behind a shared uplink (`dls run --platform PLATFORM.toml
--trace TRACE.json`), every measured send and return that crossed the
uplink beside another worker's transfer on its lane is timed again: it
starts when it started, the others run when they ran (their measured
spans), and between any two instants at which the set under way changes,
it progresses at the rate a rule gives it. Its work is its products
times its per-unit cost on the platform (the slower of its link and the
uplink), its share that cost's uplink part (`Ports::transfer`). Rules:

- fair CAP: what `lp/src/lane.rs` does: shares that fit run at their
  links' rates; otherwise max-min fair parts of CAP of the lane;
- first FILL: the earlier rule: each transfer keeps the rate it started
  with, a later one gets what those started before it leave below FILL.

Printed per rule and lane: how many transfers, the predicted durations'
sum over the measured ones', and the median of predicted over measured.

Then, worker by worker, every transfer of a duplex uplink (beside others
on its lane or not) against its time under fair 0.95 at the worker's
costs alone (the platform's with its `under_load` factors divided out),
apart from and during its own worker's transfer the other way (a return
while the worker receives, a send while it returns: for half its time or
more): measured over predicted, their sums' ratio and the median. Last,
for each worker with five returns or more each way whose returns while
it receives took 1.1 times or more what its returns apart did, the
platform file's `return_receiving` that says so (with `d` its cost alone,
`under_load`'s return factor 1).

Only Python's standard library is needed (3.11 or later, for tomllib).
"""
import json
import statistics
import sys
import tomllib


def transfers(trace, platform):
    """Measured transfers per lane: (worker, start, seconds, work, share)."""
    events = trace["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    workers = {w["name"]: w for w in platform["worker"]}
    uplink = platform["uplink"]
    lanes = {"send": [], "return": []}
    for e in events:
        if e.get("ph") != "X" or processes.get(e["pid"]) != "measured":
            continue
        name = threads.get((e["pid"], e["tid"]))
        if e["name"] not in lanes or name not in workers:
            continue
        send = e["name"] == "send"
        link = workers[name]["c" if send else "d"]
        up = uplink["send" if send else "ret"]
        per = max(link, up)
        units = e["args"].get("load", 1)
        lanes[e["name"]].append((name, e["ts"] / 1e6, e["dur"] / 1e6, per * units, up / per))
    if not uplink.get("duplex", False):
        lanes = {"both": lanes["send"] + lanes["return"]}
    return lanes


def fair(cap):
    def rates(shares):
        if sum(shares) <= 1.0 + 1e-9:
            return [1.0] * len(shares)
        order = sorted(range(len(shares)), key=lambda i: shares[i])
        left, got = cap, [0.0] * len(shares)
        for k, i in enumerate(order):
            got[i] = min(shares[i], left / (len(shares) - k))
            left -= got[i]
        return [g / s if s > 0 else 1.0 for g, s in zip(got, shares)]

    return rates


def first(fill):
    def rates(shares):
        # `shares` in the order the transfers started.
        out, before = [], 0.0
        for s in shares:
            out.append(1.0 if before + s <= 1.0 + 1e-9 else max(0.0, min(fill - before, s)) / s if s > 0 else 1.0)
            before += s
        return out

    return rates


def replay(mine, others, rule):
    """Seconds `mine` takes from its measured start beside `others`."""
    _, start, _, work, share = mine
    instants = sorted({o[1] for o in others} | {o[1] + o[2] for o in others})
    t, left = start, work
    while True:
        under_way = sorted((o for o in others if o[1] <= t + 1e-12 < o[1] + o[2]), key=lambda o: o[1])
        earlier = [o for o in under_way if o[1] <= start]
        later = [o for o in under_way if o[1] > start]
        shares = [o[4] for o in earlier] + [share] + [o[4] for o in later]
        rate = rule(shares)[len(earlier)]
        upcoming = [x for x in instants if x > t + 1e-12]
        until = upcoming[0] if upcoming else float("inf")
        if rate > 0 and t + left / rate <= until:
            return t + left / rate - start
        if until == float("inf"):
            return float("inf")
        left -= rate * (until - t)
        t = until


def alone(platform):
    """The platform with each worker's costs alone (no under-load factors)."""
    out = dict(platform, worker=[dict(w) for w in platform["worker"]])
    for w in out["worker"]:
        fc, _, fd = w.get("under_load", [1.0, 1.0, 1.0])
        w["c"], w["d"] = w["c"] / fc, w["d"] / fd
    return out


def own_other_way(lanes, rule):
    """Per (worker, lane, during its other way), measured over predicted."""
    out = {}
    for lane, spans in lanes.items():
        other_lane = lanes["return" if lane == "send" else "send"]
        for k, mine in enumerate(spans):
            if mine[2] <= 0:
                continue
            others = [o for j, o in enumerate(spans) if j != k and o[0] != mine[0]]
            lo, hi = mine[1], mine[1] + mine[2]
            mine_other = (o for o in other_lane if o[0] == mine[0])
            covered = sum(max(0.0, min(hi, o[1] + o[2]) - max(lo, o[1])) for o in mine_other)
            key = (mine[0], lane, covered >= 0.5 * mine[2])
            out.setdefault(key, []).append((mine[2], replay(mine, others, rule)))
    return out


def print_own(own):
    def cell(v):
        if not v:
            return f"{'-':>21}"
        total = sum(m for m, _ in v) / sum(p for _, p in v)
        return f"{total:5.2f} {statistics.median(m / p for m, p in v):5.2f} ({len(v):3})"

    print("measured over predicted at costs alone: sum, median (transfers)")
    print(f"worker  lane    {'apart':>21}  {'during its other way':>21}")
    for name, lane in sorted({(k[0], k[1]) for k in own}):
        print(f"{name:7} {lane:7}  {cell(own.get((name, lane, False), []))}  {cell(own.get((name, lane, True), []))}")
    # A worker's returns while it receives, against its returns apart: the
    # platform file's `return_receiving` (with `d` its cost alone), where
    # five of each or more say it is 1.1 or more.
    for name in sorted({k[0] for k in own}):
        apart, during = own.get((name, "return", False), []), own.get((name, "return", True), [])
        if len(apart) < 5 or len(during) < 5:
            continue
        ratio = lambda v: sum(m for m, _ in v) / sum(p for _, p in v)
        f = ratio(during) / ratio(apart)
        if f >= 1.1:
            print(f"{name}: return_receiving = {f:.2f}  (returns while receiving {ratio(during):.2f}, apart {ratio(apart):.2f})")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    try:
        platform = tomllib.load(open(sys.argv[1], "rb"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        sys.exit(f"error: reading the platform {sys.argv[1]}: {e}")
    if "uplink" not in platform:
        sys.exit("the platform has no [uplink]: its transfers take turns, nothing to fit")
    rules = {"fair 0.95": fair(0.95), "fair 0.90": fair(0.90), "fair 1.00": fair(1.0), "first 0.85": first(0.85)}
    pairs, own = {}, {}
    lone = alone(platform)
    for path in sys.argv[2:]:
        try:
            trace = json.load(open(path))
            lanes = transfers(trace, platform)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"error: reading the trace {path}: {e!r}")
        if platform["uplink"].get("duplex", False):
            for key, got in own_other_way(transfers(trace, lone), rules["fair 0.95"]).items():
                own.setdefault(key, []).extend(got)
        for lane, spans in lanes.items():
            for k, mine in enumerate(spans):
                others = [o for j, o in enumerate(spans) if j != k and o[0] != mine[0]]
                beside = any(o[1] < mine[1] + mine[2] and o[1] + o[2] > mine[1] for o in others)
                if not beside or mine[2] <= 0:
                    continue
                for name, rule in rules.items():
                    pairs.setdefault((name, lane), []).append((replay(mine, others, rule), mine[2]))
    for (name, lane), got in sorted(pairs.items(), key=lambda x: (x[0][1], x[0][0])):
        total = sum(p for p, _ in got) / sum(m for _, m in got)
        median = statistics.median(p / m for p, m in got)
        print(f"{lane:7} {name:11} transfers {len(got):5}  predicted/measured: sum {total:.2f}, median {median:.2f}")
    if own:
        print_own(own)


if __name__ == "__main__":
    main()
