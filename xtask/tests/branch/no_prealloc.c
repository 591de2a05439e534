// The run-able test of the branch in tests/branch.rs: an array map with
// BPF_F_NO_PREALLOC, made with the bpf() syscall; exit 0 when the kernel
// takes it.
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	attr.map_flags = BPF_F_NO_PREALLOC;
	fd = syscall(__NR_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
	if (fd < 0) {
		perror("array map with BPF_F_NO_PREALLOC");
		return 1;
	}
	printf("array map with BPF_F_NO_PREALLOC: fd %d\n", fd);
	return 0;
}
