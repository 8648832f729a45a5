set -e
O=${OUT:?set OUT to a directory}
target/release/dls calibrate --cluster "$DLS_TESTBED_CLUSTER" --size 384 -o $O/eq.platform.toml > $O/eq.cal.txt 2>&1
target/release/dls run --cluster "$DLS_TESTBED_CLUSTER" --product --size 3072 --platform $O/eq.platform.toml --distribution homogeneous --json > $O/eq-homogeneous.json 2> $O/eq-homogeneous.err
