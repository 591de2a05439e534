// SPDX-License-Identifier: GPL-2.0
#include <test_progs.h>

/* Probes the feature and skips without it, as many tests do: on a
 * kernel that lacks it this tests nothing, and --new-on must say so.
 */
void test_no_prealloc_probe(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	int fd;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "probe", 4, 4, 1, &opts);
	if (fd < 0 && errno == EINVAL) {
		test__skip();
		return;
	}
	if (!ASSERT_OK_FD(fd, "bpf_map_create"))
		return;
	close(fd);
}
