set -e
O=${OUT:?set OUT to a directory}
target/release/dls calibrate --cluster "$DLS_TESTBED_CLUSTER" --size 384 -o $O/het.platform.toml > $O/het.cal.txt 2>&1
for d in heterogeneous homogeneous; do
  target/release/dls run --cluster "$DLS_TESTBED_CLUSTER" --product --size 3072 --platform $O/het.platform.toml --distribution $d --json > $O/het-$d.json 2> $O/het-$d.err
done
