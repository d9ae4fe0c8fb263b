#!/usr/bin/env python3
# The fault tests' checker: check.py FAULTS MONITOR LOAD... reads the
# fault times the test wrote (NAME TIME lines), the monitor's record of
# the primary and its epoch, and every host's grants, releases and
# refusals (load.py), and prints one line per property:
#   NAME<TAB>0|1<TAB>DETAIL   (0: holds)
import json, sys
from collections import defaultdict

faults = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    faults[k] = float(v)
mon = [json.loads(l) for l in open(sys.argv[2])]
ev = [json.loads(l) for f in sys.argv[3:] for l in open(f)]
grants = [e for e in ev if e["ev"] == "grant"]
rel = {e["lease_id"]: e for e in ev if e["ev"] == "release"}
hosts = sorted({e["host"] for e in ev})
out = []

def check(name, ok, detail=""):
    out.append("%s\t%d\t%s" % (name, 0 if ok else 1, detail))

def grants_in(a, b, host=None):
    return [g for g in grants if a <= g["t"] <= b and (host is None or g["host"] == host)]

def refusals_in(a, b, host):
    return [e for e in ev if e["ev"] == "refuse" and e["host"] == host and a <= e["t"] <= b]

def first_change(after, key):
    """The first monitor record after `after` naming a primary other than
    the one in force at `after`."""
    before = [m for m in mon if m["t"] <= after]
    cur = before[-1][key] if before else None
    for m in mon:
        if m["t"] > after and m[key] and m[key] != cur:
            return m["t"]
    return None

per_host = {h: len([g for g in grants if g["host"] == h]) for h in hosts}
check("load", len(hosts) == 2 and min(per_host.values()) >= 30,
      "grants per host %s" % per_host)

toks = defaultdict(int)
for g in grants:
    toks[g["token"]] += 1
dup = [t for t, n in toks.items() if n > 1]
check("no token twice", not dup, "%d grants, %d tokens issued twice %s" % (len(grants), len(dup), dup[:3]))

# A holder's claim runs from the grant's reply to the release it sent; a
# lease whose release did not land lasts until it expires.
iv = defaultdict(list)
for g in grants:
    r = rel.get(g["lease_id"])
    end = r["t_send"] if r and r["ok"] else g["expires"]
    iv[g["worker"]].append((g["t"], end, g["owner"], g["token"]))
over = []
for w, l in iv.items():
    l.sort()
    for a, b in zip(l, l[1:]):
        if b[0] < a[1]:
            over.append((w, a[2], b[2], a[3], b[3]))
check("one owner at a time", not over, "%d workers; overlaps %s" % (len(iv), over[:2]))

def window(name, t0, tsw, tcont=None):
    if tsw is None:
        for what in ("no grant while no primary could be confirmed",
                     "admission closed on both hosts",
                     "admission reopened and grants resumed on both hosts"):
            check(name + ": " + what, False, "the sentinels named no new primary")
        return
    hi = tsw - 0.2 if tcont is None else min(tsw, tcont) - 0.2
    g = grants_in(t0 + 0.2, hi)
    check(name + ": no grant while no primary could be confirmed", not g,
          "window %.2fs, grants %s" % (hi - t0 - 0.2, [(x["host"], round(x["t"] - t0, 2)) for x in g[:3]]))
    closed = all(refusals_in(t0, hi + 0.2, h) for h in hosts)
    check(name + ": admission closed on both hosts", closed, "")
    # Until the next fault (a SIGCONT is the end of this one).
    nxt = min([v for k, v in faults.items() if v > tsw + 0.1 and k != "cont"] + [9e18])
    again = {h: min([x["t"] for x in grants_in(tsw, nxt, h)] + [9e18]) - t0 for h in hosts}
    check(name + ": admission reopened and grants resumed on both hosts",
          max(again.values()) < 60,
          "primary named %.2fs after the fault; first grant after it %s s" %
          (tsw - t0, {h: round(v, 2) for h, v in again.items()}))

window("kill", faults["kill"], first_change(faults["kill"], "primary"))
window("stop", faults["stop"], first_change(faults["stop"], "primary"), faults["cont"])

tp, th = faults["part"], faults["heal"]
g2 = grants_in(tp + 1.0, th, hosts[1])
check("partition: the cut-off host grants nothing", not g2,
      "%d grants on %s" % (len(g2), hosts[1]))
check("partition: the other host keeps granting", len(grants_in(tp + 1.0, th, hosts[0])) > 0, "")
check("partition: the cut-off host reopens after the heal",
      len(grants_in(th, th + 30, hosts[1])) > 0, "")

eps = {m["epoch"] for m in mon if m["epoch"]}
bad = [g["token"] for g in grants if g["token"].split(":")[0] not in eps]
check("every token is of an epoch the store held (no local allocation)", not bad,
      "%d epochs seen; foreign tokens %s" % (len(eps), bad[:3]))
check("a new epoch after each failover", len(eps) >= 3, "epochs %d" % len(eps))
print("\n".join(out))
