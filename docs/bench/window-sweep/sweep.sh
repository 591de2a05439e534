#!/bin/sh
# Runs in the guest of `cargo xtask run` (see ../window-sweep.md): the
# benchmark's table and sparse rows once per window setting. SPECS lists
# WINDOW:MAP_PAGES pairs, e.g. "1:N 16:N 16:Y"; on a kernel without the
# experiment's parameters (base) it runs the benchmark once.
set -e
bench=target/guest/x86_64-unknown-linux-gnu/release/bench
params=/sys/module/arraymap/parameters
rows() {
	grep -E '"kind":"(scenario|sparse|sparse_rss)"' |
		sed -E 's/.*"scenario":"([a-z_0-9]*)".*"median_ns":([0-9]*).*/\1 median_ns=\2/;
			s/.*"scenario":"([a-z_0-9]*)".*"rss_kb":([0-9]*).*/\1 rss_kb=\2/'
}
if [ ! -d $params ]; then
	echo "== base"
	$bench --kernel base --results /dev/null --quick --iterations 30 | rows
	exit 0
fi
for spec in ${SPECS:-1:N 8:N 16:N 32:N 64:N 512:N 1:Y 16:Y 32:Y}; do
	echo "${spec%:*}" > $params/fault_window
	echo "${spec#*:}" > /sys/module/syscall/parameters/lazy_map_pages
	echo "== window ${spec%:*} map_pages ${spec#*:}"
	$bench --kernel patched --results /dev/null --quick --iterations 30 | rows
done
