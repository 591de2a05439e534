// SPDX-License-Identifier: GPL-2.0
/*
 * fuzz-client: libbpf's skeleton path for global data, checked word by word.
 *
 * libbpf turns fuzz_client.bpf.c's .data, .bss and .rodata into
 * BPF_F_MMAPABLE array maps and mmaps them, .rodata frozen and read-only
 * after load. Each section spans several pages, so the kernel's (lazy)
 * population of every page is exercised: the initial contents, user-space
 * writes seen by the program, program writes seen by user space, the same
 * memory through bpf_map_lookup_elem and through a second mapping, and
 * the refusal of every way of writing .rodata.
 *
 * Usage: fuzz-client SEED   (a u64, decimal or 0x-hex)
 * Exit:  0, silently, when every check holds;
 *        1 when one fails, with a line per failure on stderr:
 *          fuzz-client: <what>: got X want Y
 *        2 on bad usage, or when libbpf cannot open or load the object.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "fuzz_client.h"
#include "fuzz_client.skel.h"

#define RUNS 5
/* Past this many differing words in one array, the rest are counted. */
#define MAX_WORD_REPORTS 8

static unsigned int failures;

static void fail(const char *fmt, ...)
{
	va_list args;

	fputs("fuzz-client: ", stderr);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fputc('\n', stderr);
	failures++;
}

static void check_u64(const char *stage, const char *what, __u64 got, __u64 want)
{
	if (got != want)
		fail("%s: %s: got 0x%016llx want 0x%016llx", stage, what,
		     (unsigned long long)got, (unsigned long long)want);
}

/*
 * Compares n words, reporting each difference up to MAX_WORD_REPORTS.
 * `got` is volatile: it is mapped memory the kernel and the program change.
 */
static void check_words(const char *stage, const char *what,
			const volatile __u64 *got, const __u64 *want, size_t n)
{
	size_t differing = 0;

	for (size_t i = 0; i < n; i++) {
		__u64 value = got[i];

		if (value == want[i])
			continue;
		if (++differing <= MAX_WORD_REPORTS)
			fail("%s: %s[%zu] (page %zu): got 0x%016llx want 0x%016llx",
			     stage, what, i, i / FC_PAGE_WORDS,
			     (unsigned long long)value,
			     (unsigned long long)want[i]);
	}
	if (differing > MAX_WORD_REPORTS)
		fail("%s: %s: got %zu more differing words want 0", stage, what,
		     differing - MAX_WORD_REPORTS);
}

/* The values the client derives from the seed: .rodata keys and inputs. */
static __u64 rodata_key(__u64 seed, size_t index)
{
	return fc_mix64(seed + index);
}

static __u64 input_word(__u64 seed, int run, int page, int which)
{
	return fc_mix64(seed ^ 0x1badc0de00000000ULL ^
			((__u64)run << 16 | (__u64)page << 1 | (__u64)which));
}

/*
 * The model of one run of fuzz_client_run, written independently of the
 * BPF source: the expected .data and .bss after it.
 */
static void model_run(const struct fuzz_client__rodata *rodata,
		      struct fuzz_client__data *data,
		      struct fuzz_client__bss *bss)
{
	__u64 run = data->run_count;
	size_t slot = run % FC_RESULT_SLOTS;

	for (int page = 0; page < FC_SECTION_PAGES; page++) {
		__u64 a = data->data_words[FC_INPUT_WORD(page, 0)];
		__u64 b = data->data_words[FC_INPUT_WORD(page, 1)];
		__u64 key = rodata->rodata_keys[page * FC_PAGE_WORDS +
						FC_KEY_OFFSET(run)];
		__u64 result = fc_mix64(a ^ key) + b * rodata->rodata_seed + run;

		bss->bss_results[page * FC_PAGE_WORDS + slot] = result;
		bss->bss_checksum ^= result;
	}
	data->run_count = run + 1;
}

/* Every field of the three mapped sections against the model. */
static void check_sections(const char *stage, const struct fuzz_client *skel,
			   const struct fuzz_client__rodata *rodata,
			   const struct fuzz_client__data *data,
			   const struct fuzz_client__bss *bss)
{
	check_u64(stage, ".rodata rodata_seed", skel->rodata->rodata_seed,
		  rodata->rodata_seed);
	check_words(stage, ".rodata rodata_keys", skel->rodata->rodata_keys,
		    rodata->rodata_keys, FC_SECTION_WORDS);
	check_words(stage, ".data data_words", skel->data->data_words,
		    data->data_words, FC_SECTION_WORDS);
	check_u64(stage, ".data run_count", skel->data->run_count,
		  data->run_count);
	check_words(stage, ".bss bss_results", skel->bss->bss_results,
		    bss->bss_results, FC_SECTION_WORDS);
	check_u64(stage, ".bss bss_checksum", skel->bss->bss_checksum,
		  bss->bss_checksum);
}

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static size_t mapping_size(const struct bpf_map *map)
{
	size_t page = page_size();

	return (bpf_map__value_size(map) + page - 1) / page * page;
}

/*
 * The mmapped section against the kernel's other two views of the same
 * memory: the syscall (bpf_map_lookup_elem) and a second, read-only
 * mapping (a new VMA, so its pages are faulted in afresh).
 */
static void check_other_views(const char *stage, const char *section,
			      const struct bpf_map *map, const void *mapped)
{
	size_t size = bpf_map__value_size(map);
	size_t words = size / sizeof(__u64);
	int fd = bpf_map__fd(map);
	__u32 key = 0;
	char what[64];
	__u64 *copy;
	void *second;

	if (size % sizeof(__u64)) {
		fail("%s: %s value size: got %zu want a multiple of 8", stage,
		     section, size);
		return;
	}
	copy = calloc(words, sizeof(__u64));
	if (!copy) {
		fail("%s: %s: calloc: got %s want memory", stage, section,
		     strerror(errno));
		return;
	}
	if (bpf_map_lookup_elem(fd, &key, copy)) {
		fail("%s: %s bpf_map_lookup_elem: got %s want success", stage,
		     section, strerror(errno));
	} else {
		snprintf(what, sizeof(what), "%s mmap vs lookup word", section);
		check_words(stage, what, mapped, copy, words);
	}

	second = mmap(NULL, mapping_size(map), PROT_READ, MAP_SHARED, fd, 0);
	if (second == MAP_FAILED) {
		fail("%s: %s second read-only mmap: got %s want success", stage,
		     section, strerror(errno));
	} else {
		snprintf(what, sizeof(what), "%s second mmap vs lookup word",
			 section);
		check_words(stage, what, second, copy, words);
		munmap(second, mapping_size(map));
	}
	free(copy);
}

static void check_all_views(const char *stage, const struct fuzz_client *skel)
{
	check_other_views(stage, ".rodata", skel->maps.rodata, skel->rodata);
	check_other_views(stage, ".data", skel->maps.data, skel->data);
	check_other_views(stage, ".bss", skel->maps.bss, skel->bss);
}

/* A child that writes one word of .rodata's mapping must die of SIGSEGV. */
static void check_rodata_store_faults(const char *stage,
				      const struct fuzz_client *skel,
				      size_t offset)
{
	int status;
	pid_t child = fork();

	if (child < 0) {
		fail("%s: fork: got %s want success", stage, strerror(errno));
		return;
	}
	if (child == 0) {
		/* The expected crash should leave no core file behind. */
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		*(volatile __u64 *)((char *)skel->rodata + offset) = ~0ULL;
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child) {
		fail("%s: waitpid: got %s want the child", stage, strerror(errno));
		return;
	}
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		return;
	if (WIFSIGNALED(status))
		fail("%s: store to .rodata offset %zu: got signal %d want SIGSEGV",
		     stage, offset, WTERMSIG(status));
	else
		fail("%s: store to .rodata offset %zu: got exit %d want SIGSEGV",
		     stage, offset, WEXITSTATUS(status));
}

/*
 * Every way of writing the frozen .rodata is refused: a store through the
 * mapping (on each page), mprotect to writable, a new writable mapping,
 * and a map update.
 */
static void check_rodata_is_read_only(const char *stage,
				      const struct fuzz_client *skel)
{
	const struct bpf_map *map = skel->maps.rodata;
	size_t size = mapping_size(map);
	int fd = bpf_map__fd(map);
	__u32 key = 0;
	void *writable;
	void *value;
	int err;

	for (size_t offset = 0; offset < bpf_map__value_size(map);
	     offset += page_size())
		check_rodata_store_faults(stage, skel, offset);

	if (mprotect(skel->rodata, size, PROT_READ | PROT_WRITE) == 0) {
		fail("%s: mprotect .rodata writable: got success want EACCES",
		     stage);
		mprotect(skel->rodata, size, PROT_READ);
	} else if (errno != EACCES) {
		fail("%s: mprotect .rodata writable: got %s want EACCES", stage,
		     strerror(errno));
	}

	writable = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (writable != MAP_FAILED) {
		fail("%s: writable mmap of .rodata: got success want EPERM",
		     stage);
		munmap(writable, size);
	} else if (errno != EPERM) {
		fail("%s: writable mmap of .rodata: got %s want EPERM", stage,
		     strerror(errno));
	}

	value = calloc(1, bpf_map__value_size(map));
	if (!value) {
		fail("%s: calloc: got %s want memory", stage, strerror(errno));
		return;
	}
	err = bpf_map_update_elem(fd, &key, value, BPF_ANY);
	if (err == 0)
		fail("%s: update of frozen .rodata: got success want EPERM",
		     stage);
	else if (err != -EPERM)
		fail("%s: update of frozen .rodata: got %s want EPERM", stage,
		     strerror(-err));
	free(value);
}

/* Forwards libbpf's warnings only, so that success prints nothing. */
static int print_libbpf_warnings(enum libbpf_print_level level,
				 const char *format, va_list args)
{
	if (level != LIBBPF_WARN)
		return 0;
	return vfprintf(stderr, format, args);
}

static int parse_seed(const char *text, __u64 *seed)
{
	char *end;

	errno = 0;
	*seed = strtoull(text, &end, 0);
	return errno || end == text || *end || *text == '-' ? -1 : 0;
}

int main(int argc, char **argv)
{
	/* The expected images; static because each is 12 KiB or more. */
	static struct fuzz_client__rodata want_rodata;
	static struct fuzz_client__data want_data;
	static struct fuzz_client__bss want_bss;
	__u8 packet[64];
	struct fuzz_client *skel;
	char stage[32];
	char error[128];
	__u64 seed;
	int err;

	if (argc != 2 || parse_seed(argv[1], &seed)) {
		fprintf(stderr, "usage: fuzz-client SEED (a u64)\n");
		return 2;
	}
	libbpf_set_print(print_libbpf_warnings);

	skel = fuzz_client__open();
	if (!skel) {
		libbpf_strerror(-errno, error, sizeof(error));
		fprintf(stderr, "fuzz-client: fuzz_client__open: %s\n", error);
		return 2;
	}

	/* .rodata is writable until load, which freezes it. */
	want_rodata.rodata_seed = seed;
	for (size_t i = 0; i < FC_SECTION_WORDS; i++)
		want_rodata.rodata_keys[i] = rodata_key(seed, i);
	memcpy(skel->rodata, &want_rodata, sizeof(want_rodata));

	err = fuzz_client__load(skel);
	if (err) {
		libbpf_strerror(err, error, sizeof(error));
		fprintf(stderr, "fuzz-client: fuzz_client__load: %s\n", error);
		fuzz_client__destroy(skel);
		return 2;
	}

	/* Before anything reads it, so its pages are not yet faulted in. */
	check_rodata_is_read_only("fresh", skel);

	/* .data as compiled (non-zero marks on each page), .bss all zero. */
	for (int page = 0; page < FC_SECTION_PAGES; page++)
		for (int which = 0; which < 2; which++)
			want_data.data_words[FC_MARK_WORD(page, which)] =
				FC_MARK_VALUE(page, which);
	check_sections("after load", skel, &want_rodata, &want_data, &want_bss);
	check_all_views("after load", skel);

	for (size_t i = 0; i < sizeof(packet); i++)
		packet[i] = (__u8)i;

	for (int run = 0; run < RUNS; run++) {
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = packet,
			    .data_size_in = sizeof(packet), .repeat = 1);

		/* New inputs on every page of .data, through the mapping. */
		for (int page = 0; page < FC_SECTION_PAGES; page++)
			for (int which = 0; which < 2; which++) {
				size_t word = FC_INPUT_WORD(page, which);
				__u64 input = input_word(seed, run, page, which);

				skel->data->data_words[word] = input;
				want_data.data_words[word] = input;
			}
		snprintf(stage, sizeof(stage), "before run %d", run);
		check_other_views(stage, ".data", skel->maps.data, skel->data);

		err = bpf_prog_test_run_opts(
			bpf_program__fd(skel->progs.fuzz_client_run), &opts);
		snprintf(stage, sizeof(stage), "run %d", run);
		if (err) {
			fail("%s: bpf_prog_test_run_opts: got %s want success",
			     stage, strerror(-err));
			continue;
		}
		model_run(&want_rodata, &want_data, &want_bss);
		check_u64(stage, "retval", opts.retval,
			  (__u32)want_data.run_count);
		check_sections(stage, skel, &want_rodata, &want_data, &want_bss);
		check_all_views(stage, skel);
	}

	/* Again, now that every page of .rodata has been read. */
	check_rodata_is_read_only("at end", skel);
	check_sections("at end", skel, &want_rodata, &want_data, &want_bss);

	fuzz_client__destroy(skel);
	return failures ? 1 : 0;
}
