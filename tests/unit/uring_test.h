/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uring_test.h - for the tests of the io_uring backend: whether io_uring
 * works here; a file of known words to read through a slot, the read,
 * and the check that the bytes landed; and a ring's buffer table as the
 * kernel shows it
 * (/proc/self/fdinfo/<ring fd> lists
 * the table after "UserBufs:", one slot a line, "N: 0xADDR/LEN" when set
 * and "N: <none>" when not (before 6.x, "N: 0xffffffffffffffff/1")).
 */
#ifndef GDRC_TEST_URING_TEST_H
#define GDRC_TEST_URING_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* The word the test file holds at offset off (a multiple of 8): each
 * offset its own, so that bytes from elsewhere in the file show. */
static inline uint64_t uring_word(uint64_t off)
{
	return off * 0x9e3779b97f4a7c15ull ^ 0x57a1e0f5107c0de5ull;
}

/*
 * A file of size bytes of uring_word on /dev/shm, named after tag and the
 * pid (in path: the caller unlinks it), opened for reading with O_DIRECT;
 * buffered where tmpfs refuses it (before Linux 6.6: the VM lab's guest),
 * since a buffered read lands in the fixed buffer's pages all the same.
 * Its words are staged in mapped pages, not malloc's: a free of a large
 * block would move glibc's mmap threshold, which some tests rely on.
 * @return the fd, or -1 with errno.
 */
static inline int uring_test_file(const char *tag, size_t size, char *path,
				  size_t path_len)
{
	uint64_t *w = mmap(NULL, size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ssize_t n;
	int fd;

	snprintf(path, path_len, "/dev/shm/gdrc-%s-%d", tag, (int)getpid());
	if (w == MAP_FAILED)
		return -1;
	for (size_t i = 0; i < size / 8; i++)
		w[i] = uring_word(i * 8);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	n = fd < 0 ? -1 : pwrite(fd, w, size, 0);
	munmap(w, size);
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)size)
		return -1;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 && errno == EINVAL) {
		printf("note: O_DIRECT refused on /dev/shm: buffered reads\n");
		fd = open(path, O_RDONLY);
	}
	return fd;
}

/* READ_FIXED of len bytes of file fd at off into buf through slot idx of
 * ring r, one in flight: the completion's result (-EIO: no submission). */
static inline int uring_read_fixed(struct io_uring *r, int fd, void *buf,
				   size_t len, off_t off, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);
	struct io_uring_cqe *cqe;
	int res;

	if (!sqe)
		return -EIO;
	io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)len, off, idx);
	if (io_uring_submit(r) != 1 || io_uring_wait_cqe(r, &cqe))
		return -EIO;
	res = cqe->res;
	io_uring_cqe_seen(r, cqe);
	return res;
}

/* Does buf hold the test file's words from off? */
static inline int uring_holds_file(const void *buf, size_t len, off_t off)
{
	const uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != uring_word((uint64_t)off + i * 8))
			return 0;
	return 1;
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
