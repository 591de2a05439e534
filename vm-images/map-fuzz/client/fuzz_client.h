/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The layout shared by fuzz_client.bpf.c and client.c: where the inputs,
 * marks and results live in the global-data sections, and the mixing
 * function both sides use. How a run combines them is written out
 * separately in each file, so client.c's model is an independent check.
 *
 * Every section spans several pages so that pages past the first, which
 * the kernel under test populates lazily on fault, are read and written.
 */
#ifndef FUZZ_CLIENT_H
#define FUZZ_CLIENT_H

#include <linux/types.h>

#define FC_PAGE_WORDS 512 /* __u64 words in a 4 KiB page */
#define FC_SECTION_PAGES 3
#define FC_SECTION_WORDS (FC_PAGE_WORDS * FC_SECTION_PAGES)

/* Run n writes its result for each page into slot n % FC_RESULT_SLOTS. */
#define FC_RESULT_SLOTS 64

/* .data: two non-zero marks per page, at its first and last words... */
#define FC_MARK_WORD(page, which) \
	((page) * FC_PAGE_WORDS + ((which) ? FC_PAGE_WORDS - 1 : 0))
#define FC_MARK_VALUE(page, which) \
	(0xda7a000000000000ULL | ((__u64)(page) << 8) | (which))

/* ...and two input words per page, written by the client before a run. */
#define FC_INPUT_WORD(page, which) ((page) * FC_PAGE_WORDS + 256 + (which))

/* The .rodata key a run reads on each page: spread over the page. */
#define FC_KEY_OFFSET(run) (((run) * 37 + 11) & (FC_PAGE_WORDS - 1))

/* splitmix64's finalizer: cheap, and every input bit reaches every output bit. */
static inline __u64 fc_mix64(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

#endif /* FUZZ_CLIENT_H */
