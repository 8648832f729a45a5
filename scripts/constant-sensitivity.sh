#!/usr/bin/env bash
# Which tuned constants matter: each one halved in turn (an integer: halved,
# at least 1), `dls` rebuilt, and the predictions of every committed
# platform file (scripts/predictions.sh) compared with the unchanged build's.
#
#   scripts/constant-sensitivity.sh [LOADS] FILE:NAME...
#
# NAME is a constant of FILE, or a field of the tuning value FILE gives
# (lp/src/tuning.rs:fill halves TUNING.fill).
# LOADS as scripts/predictions.sh takes them (default "40 3000"). Works in
# a worktree of HEAD under $TMPDIR (its own target directory: the first
# build takes minutes, each constant about a minute more), so the tree
# here is never modified. Prints one line per constant: file, name, value,
# how many predictions moved and the largest move, as a Markdown table.
# A constant whose halving moves nothing is one no committed star shows a
# reason for. With SENSITIVITY_TESTS set to packages ("dls-lp dls-core"),
# their tests run too (release profile) with each constant halved, and a
# last column names the tests that then fail: a test may show what no
# committed star does.
set -euo pipefail
cd "$(dirname "$0")/.."
loads="40 3000"
if [[ $# -gt 0 && "$1" != *:* ]]; then
  loads=$1
  shift
fi
[[ $# -gt 0 ]] || { echo "usage: $0 [LOADS] FILE:NAME..." >&2; exit 2; }
root=$(pwd)
work=$(mktemp -d)
tree="$work/tree"
git worktree add -q --detach "$tree" HEAD
trap 'git -C "$root" worktree remove --force "$tree"; rm -rf "$work"' EXIT
export CARGO_TARGET_DIR="${SENSITIVITY_TARGET:-$root/target/sensitivity}"
build() { (cd "$tree" && cargo build --release -q -p dls-master); }
predict() { bash "$root/scripts/predictions.sh" "$CARGO_TARGET_DIR/release/dls" "$loads" 2>/dev/null; }
build
predict >"$work/base.txt"
tests=${SENSITIVITY_TESTS:-}
failing() {
  local args=() p
  for p in $tests; do args+=(-p "$p"); done
  (cd "$tree" && cargo test --release "${args[@]}" --no-fail-fast 2>&1 || true) |
    sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' | sort -u
}
if [[ -n "$tests" ]]; then
  failing >"$work/base-failing.txt"
  echo "| file | constant | value | halved | predictions moved | largest move | tests failing ($tests) |"
  echo "|---|---|---|---|---|---|---|"
else
  echo "| file | constant | value | halved | predictions moved | largest move |"
  echo "|---|---|---|---|---|---|"
fi
for spec in "$@"; do
  file=${spec%%:*}
  name=${spec#*:}
  # The constant's line, halved: a float times 0.5, an integer / 2 (at least 1).
  if ! value=$(python3 - "$tree/$file" "$name" <<'EOF'
import re, sys
path, name = sys.argv[1:]
src = open(path).read()
# A constant (`const NAME: T = v;`), or a field of a tuning value
# (`pub name: T,` declared, `name: v,` given, as in lp/src/tuning.rs).
pat = re.compile(r"(const " + re.escape(name) + r": *([A-Za-z0-9_]+) *= *)([^;]+)(;)")
m = pat.search(src)
ty = m.group(2) if m else None
if not m:
    decl = re.search(r"pub " + re.escape(name) + r": *([A-Za-z0-9_]+),", src)
    m = re.search(r"(\n\s*" + re.escape(name) + r": *)()([^,\n]+)(,)", src)
    if not (decl and m):
        sys.exit(1)
    ty = decl.group(1)
value = m.group(3).strip()
if ty in ("f64", "f32"):
    halved = f"({value}) * 0.5"
else:
    halved = f"if ({value}) / 2 > 0 {{ ({value}) / 2 }} else {{ 1 }}"
open(path, "w").write(src[:m.start()] + m.group(1) + halved + m.group(4) + src[m.end():])
print(value)
EOF
  ); then
    echo "| $file | $name | not found | | | |"
    continue
  fi
  if build 2>"$work/err"; then
    predict >"$work/halved.txt"
    moved=$(bash "$root/scripts/predictions.sh" --compare "$work/base.txt" "$work/halved.txt" | tail -1)
    count=$(echo "$moved" | awk '{print $1 " of " $3}')
    largest=$(echo "$moved" | sed -n 's/.*largest \([^ ]*\).*/\1/p')
    if [[ -n "$tests" ]]; then
      failed=$(failing | comm -13 "$work/base-failing.txt" -)
      names=$(echo "$failed" | grep -v '^$' | head -3 | paste -sd, - || true)
      echo "| $file | $name | $value | yes | $count | $largest | $(echo "$failed" | grep -vc '^$' || true)${names:+: $names} |"
    else
      echo "| $file | $name | $value | yes | $count | $largest |"
    fi
  else
    echo "| $file | $name | $value | does not build halved: $(grep -m1 error "$work/err" | cut -c1-60) | | |"
  fi
  git -C "$tree" checkout -q -- "$file"
done
