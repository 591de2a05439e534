# Tests the lean kernels (ours onto allnoconfig, `--kernel-config lean`)
# cannot pass, on eager and on every variant alike, because the lean
# configuration leaves an option out on purpose; on `--kernel-config bpf-ci`
# they run. One test per line, then `#` and the error line measured here.
# test_verifier results are named by their description and count for
# both the unprivileged (/u) and privileged (/p) run of the test.
#
# No CONFIG_CPU_MITIGATIONS: 7.3's test_verifier then runs none of its
# unprivileged (/u) tests (it finds no CONFIG_CPU_MITIGATIONS=y in
# /proc/config.gz: "Can't determine if mitigations are enabled, disabling
# unpriv tests"), 264 skipped on every kernel; 6.12's ran them, and 15
# failed here. The privileged half runs whole.
test_verifier:sleepable lsm accept              # no BPF_LSM: "Failed to find BTF ID for 'bpf'!" (/p)
#
# test_progs on the lean kernels. (On 6.12's bpf-ci kernels it passed: 12 of 12 in 65 s.)
uprobe_multi_test  # lean only, no UPROBES: every attach fails "unexpected error: -95", and filter_fork runs until test_progs's watchdog kills it at 120 s (eager, 7.3)
