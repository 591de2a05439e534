// SPDX-License-Identifier: GPL-2.0
/*
 * The BPF side of fuzz-client: a socket filter whose only state is global
 * data, which libbpf turns into BPF_F_MMAPABLE array maps (.data, .bss,
 * .rodata) that the client reads and writes through mmap. Run it with
 * BPF_PROG_TEST_RUN; it needs CONFIG_NET only.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "fuzz_client.h"

/* .rodata: set by the client from its seed before load, then frozen. */
const volatile __u64 rodata_seed;
const volatile __u64 rodata_keys[FC_SECTION_WORDS];

/* .data: non-zero marks on every page, so each lazily faulted page must
 * show what libbpf copied in at load; the client writes the inputs. */
__u64 data_words[FC_SECTION_WORDS] = {
	[FC_MARK_WORD(0, 0)] = FC_MARK_VALUE(0, 0),
	[FC_MARK_WORD(0, 1)] = FC_MARK_VALUE(0, 1),
	[FC_MARK_WORD(1, 0)] = FC_MARK_VALUE(1, 0),
	[FC_MARK_WORD(1, 1)] = FC_MARK_VALUE(1, 1),
	[FC_MARK_WORD(2, 0)] = FC_MARK_VALUE(2, 0),
	[FC_MARK_WORD(2, 1)] = FC_MARK_VALUE(2, 1),
};
/* Zero-initialised, so placed in .data explicitly (clang would pick .bss). */
__u64 run_count SEC(".data");

/* .bss: results, one slot per page per run, and their running xor. */
__u64 bss_results[FC_SECTION_WORDS];
__u64 bss_checksum;

SEC("socket")
int fuzz_client_run(struct __sk_buff *skb)
{
	__u64 run = run_count;
	__u64 slot = run & (FC_RESULT_SLOTS - 1);
	__u64 key_offset = FC_KEY_OFFSET(run);
	__u64 checksum = bss_checksum;

	for (int page = 0; page < FC_SECTION_PAGES; page++) {
		__u64 a = data_words[FC_INPUT_WORD(page, 0)];
		__u64 b = data_words[FC_INPUT_WORD(page, 1)];
		__u64 key = rodata_keys[page * FC_PAGE_WORDS + key_offset];
		__u64 result = fc_mix64(a ^ key) + b * rodata_seed + run;

		bss_results[page * FC_PAGE_WORDS + slot] = result;
		checksum ^= result;
	}
	bss_checksum = checksum;
	run_count = run + 1;
	/* The new count, so the client can tell the program really ran. */
	return (int)(run + 1);
}

char LICENSE[] SEC("license") = "GPL";
