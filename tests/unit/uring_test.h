/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uring_test.h - for the tests of the io_uring backend: whether io_uring
 * works here, and a ring's buffer table as the kernel shows it
 * (/proc/self/fdinfo/<ring fd> lists
 * the table after "UserBufs:", one slot a line, "N: 0xADDR/LEN" when set
 * and "N: <none>" when not (before 6.x, "N: 0xffffffffffffffff/1")).
 */
#ifndef GDRC_TEST_URING_TEST_H
#define GDRC_TEST_URING_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <liburing.h>

/*
 * Can a ring with a sparse buffer table be had here?  @return 0; 77 (a
 * test's skip) after printing why not.
 */
static inline int uring_usable(void)
{
	struct io_uring probe;
	int ret;

	ret = io_uring_queue_init(4, &probe, 0);
	if (ret) {
		printf("skip: io_uring refused here: %s\n", strerror(-ret));
		return 77;
	}
	ret = io_uring_register_buffers_sparse(&probe, 4);
	io_uring_queue_exit(&probe);
	if (ret) {
		printf("skip: no sparse buffer tables: %s\n", strerror(-ret));
		return 77;
	}
	return 0;
}

/*
 * The table of the ring whose fd is ring_fd: the number of slots set, -1
 * when it has no table, -2 when its fdinfo cannot be read; slot idx's
 * range in *addr_p, *len_p (0, 0 when unset; NULL: not wanted).
 */
static inline int uring_table_read(int ring_fd, unsigned idx,
				   uintptr_t *addr_p, size_t *len_p)
{
	char path[64], line[256];
	int n = 0, table = 0;
	FILE *f;

	if (addr_p)
		*addr_p = 0;
	if (len_p)
		*len_p = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ring_fd);
	f = fopen(path, "r");
	if (!f)
		return -2;
	while (fgets(line, sizeof(line), f)) {
		unsigned i;
		unsigned long a;
		size_t l;

		if (!strncmp(line, "UserBufs:", 9)) {
			table = atoi(line + 9) > 0;
		} else if (table && sscanf(line, " %u: 0x%lx/%zu", &i, &a,
					   &l) == 3) {
			/* Unset, as older kernels show it (6.1, the VM
			 * lab's guest): io_uring's dummy buffer, from -1
			 * to 0, so "length" 1. */
			if (a == ~0ul && l == 1)
				continue;
			n++;
			if (i == idx && addr_p && len_p) {
				*addr_p = a;
				*len_p = l;
			}
		} else if (table && line[0] != ' ' && line[0] != '\t') {
			break;
		}
	}
	fclose(f);
	return table ? n : -1;
}

/* Slots set on ring_fd's table (as uring_table_read). */
static inline int uring_slots_set(int ring_fd)
{
	return uring_table_read(ring_fd, UINT32_MAX, NULL, NULL);
}

#endif /* GDRC_TEST_URING_TEST_H */
