#!/usr/bin/env python3
"""Seeded random stars behind a shared uplink, and what `dls plan` predicts
on each: the planner's second oracle beside the committed platform files
(`scripts/predictions.sh`).

    scripts/random-stars.py [--count N] [--loads "40 3000"] DLS [OTHER_DLS]

Star `seed` (0 to N-1, default 300) has 2-8 workers whose links take
c0·(1 + spread·u) seconds a unit (c0 in 10-50 ms, spread one of 0.05, 0.3,
1 or 4), computing 0.2-4 times and returning 0.2-1 times that, costs
measured under load on even seeds, behind a full-duplex uplink carrying
1.3, 1.8, 2.5 or 4 times the fastest link. Prints one line per star and
load: the star, the load, the makespan `dls plan` predicts (strategy
`best`, the default) and whether the plan is paced. With OTHER_DLS, prints
only the lines where the two disagree, then how many did.
Writes the platform files under a temporary directory, removed at the end.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def star(seed):
    r = random.Random(seed)
    p = r.randint(2, 8)
    c0 = r.uniform(0.01, 0.05)
    spread = r.choice([0.05, 0.3, 1.0, 4.0])
    lines = ['shape = [256, 256, 256]', 'dtype = "float64"']
    cs = []
    for i in range(p):
        c = c0 * (1 + spread * r.random())
        cs.append(c)
        lines += ['[[worker]]', f'name = "w{i}"', f'c = {c}', f'w = {r.uniform(0.2, 4.0) * c}',
                  f'd = {r.uniform(0.2, 1.0) * c}']
        if seed % 2 == 0:
            lines.append(f'under_load = [{1 + 0.2 * r.random()}, 1.0, 1.0]')
    carry = r.choice([1.3, 1.8, 2.5, 4.0])
    lines += ['[uplink]', f'send = {min(cs) / carry}', f'ret = {min(cs) / (2 * carry)}', 'duplex = true']
    return '\n'.join(lines) + '\n'


def predict(dls, path, load):
    out = subprocess.run([dls, 'plan', '--platform', path, '--load', str(load), '--json'],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return 'error: ' + (out.stderr.strip().splitlines() or ['?'])[-1]
    d = json.loads(out.stdout)
    paced = any(n.startswith('paced') for n in d.get('notes', []))
    return f"{d['makespan']!r} {'paced' if paced else 'plain'}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--count', type=int, default=300)
    ap.add_argument('--loads', default='40 3000')
    ap.add_argument('dls')
    ap.add_argument('other', nargs='?')
    a = ap.parse_args()
    loads = [int(x) for x in a.loads.split()]
    differ = total = 0
    with tempfile.TemporaryDirectory() as d:
        for seed in range(a.count):
            path = os.path.join(d, f's{seed:03d}.toml')
            with open(path, 'w') as f:
                f.write(star(seed))
            for load in loads:
                one = predict(a.dls, path, load)
                total += 1
                if a.other is None:
                    print(f's{seed:03d} {load} | {one}')
                    continue
                two = predict(a.other, path, load)
                if one != two:
                    differ += 1
                    print(f's{seed:03d} {load} | {one} | {two}')
    if a.other is not None:
        print(f'{differ} of {total} predictions differ')
    return 0


if __name__ == '__main__':
    sys.exit(main())
