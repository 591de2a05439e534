# Tests the lean kernels (ours onto allnoconfig, `--kernel-config lean`)
# cannot pass, on base and on every variant alike, because the lean
# configuration leaves an option out on purpose; on `--kernel-config bpf-ci`
# they run. One test per line, then `#` and the error line measured here.
# test_verifier results are named by their description and count for
# both the unprivileged (/u) and privileged (/p) run of the test.
#
# No CONFIG_CPU_MITIGATIONS: cpu_mitigations_off() makes the verifier skip
# Spectre v1 sanitizing for unprivileged loads, so what these expect it to
# reject loads ("Unexpected success to load!").
test_verifier:dead code: start                  # no CPU_MITIGATIONS: unprivileged load not rejected, "Unexpected success to load!"
test_verifier:jset32: min/max deduction         # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jeq32: min/max deduction          # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jne32: min/max deduction          # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jge32: min/max deduction          # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jgt32: min/max deduction          # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jle32: min/max deduction          # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jlt32: min/max deduction          # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jsge32: min/max deduction         # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jsgt32: min/max deduction         # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jsle32: min/max deduction         # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jslt32: min/max deduction         # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jset: known const compare         # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jset: half-known const compare    # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:jset: range                       # no CPU_MITIGATIONS: "Unexpected success to load!" (/u)
test_verifier:sleepable lsm accept              # no BPF_LSM: "Failed to find BTF ID for 'bpf'!" (/p)
# IPv4 without IPv6 (kconfig/net.config): sk_lookup's remote_ip6/local_ip6
# become a MOV32_IMM 0 (net/core/filter.c) that sets no target size, and a
# narrow load of them fails in convert_ctx_accesses().
test_verifier:valid 1,2,4,8-byte reads from bpf_sk_lookup  # no IPV6: "bpf verifier is misconfigured" (/p)
#
# test_progs on the lean kernels. (On bpf-ci it passes: 12 of 12 in 65 s.)
uprobe_multi_test  # lean only: test_progs prints nothing after uprobe_multi_test starts until the 600 s stall limit ends the boot (base, thread=single TCG)
