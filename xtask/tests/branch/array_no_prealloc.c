// SPDX-License-Identifier: GPL-2.0
#include <test_progs.h>

void test_array_no_prealloc(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	int fd;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "no_prealloc", 4, 4, 1, &opts);
	if (!ASSERT_OK_FD(fd, "bpf_map_create"))
		return;
	close(fd);
}
