// SPDX-License-Identifier: BSD-3-Clause
/*
 * mpi_pingpong.c - an MPI ping-pong between ranks 0 and 1 that checks
 * every byte, for running unmodified MPI stacks under
 * LD_PRELOAD=libgdrcache-preload.so.  It knows nothing of libgdrcache.
 *
 * Each round trip: rank 0 fills its send buffer with a pattern of the
 * round and sends it; rank 1 receives, checks every byte, fills its own
 * send buffer with the next pattern and sends it back; rank 0 checks.
 * With messages above the MPI library's rendezvous threshold and its
 * registration cache off (UCX_IB_REG_METHODS=direct, or ob1's
 * mpi_leave_pinned=0), the library registers both buffers on every
 * message: the preload serves the repeats from its cache.
 *
 * Every FRESH rounds (-f), both ranks unmap their buffers and map new
 * pages at the same addresses (munmap, then mmap with
 * MAP_FIXED_NOREPLACE), whatever allocator the MPI library put in
 * front of malloc.  A cache that served the old registration would
 * have the NIC read or write the old pages, and the check of that
 * round would fail.
 *
 * Usage: mpi_pingpong [-s SIZE] [-n ROUNDS] [-f FRESH] [-w WARMUP]
 * Prints, from rank 0: "pingpong: ROUNDS rounds of SIZE bytes, every
 * byte checked, US us per round trip (fresh buffers: N, M at the
 * same address)".  Exit 0 when every
 * check passed; 1 on a mismatch (the first one is printed) or bad
 * arguments.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The byte at i of round r's message from rank: never the same for two
 * neighbouring rounds, ranks or buffers. */
static inline unsigned char pattern(long r, int rank, size_t i)
{
	return (unsigned char)((size_t)r * 131 + (size_t)rank * 71 + i * 7 +
			       (i >> 12));
}

static void fill(unsigned char *buf, size_t len, long r, int rank)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(r, rank, i);
}

/* The first byte of buf that is not round r's message from rank, or
 * len. */
static size_t check(const unsigned char *buf, size_t len, long r, int rank)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(r, rank, i))
			return i;
	return len;
}

/* New pages for both buffers, at the addresses they had (anywhere the
 * first time, or if something else took them). */
static void map_pair(unsigned char **s, unsigned char **d, size_t len)
{
	unsigned char **b[2] = { s, d };

	for (int i = 0; i < 2; i++) {
		void *at = *b[i], *p = MAP_FAILED;

		if (at) {
			munmap(at, len);
			p = mmap(at, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS |
					 MAP_FIXED_NOREPLACE,
				 -1, 0);
		}
		if (p == MAP_FAILED)
			p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("pingpong: mmap");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		*b[i] = p;
	}
}

int main(int argc, char **argv)
{
	size_t len = 65536;
	long rounds = 200, fresh = 50, warmup = 10, fresh_done = 0,
	     fresh_same = 0;
	unsigned char *sbuf = NULL, *dbuf = NULL;
	int rank, size, opt, bad = 0;
	double t0 = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((opt = getopt(argc, argv, "s:n:f:w:")) != -1) {
		switch (opt) {
		case 's': len = strtoul(optarg, NULL, 0); break;
		case 'n': rounds = strtol(optarg, NULL, 0); break;
		case 'f': fresh = strtol(optarg, NULL, 0); break;
		case 'w': warmup = strtol(optarg, NULL, 0); break;
		default: bad = 1;
		}
	}
	if (bad || size != 2 || !len || rounds < 1 || fresh < 0 ||
	    warmup < 0) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 mpi_pingpong "
					"[-s SIZE] [-n ROUNDS] [-f FRESH] "
					"[-w WARMUP]\n");
		MPI_Finalize();
		return 1;
	}
	map_pair(&sbuf, &dbuf, len);
	for (long r = -warmup; r < rounds && !bad; r++) {
		int peer = !rank;
		size_t at;

		if (r == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (fresh && r > 0 && r % fresh == 0) {
			unsigned char *was_s = sbuf, *was_d = dbuf;

			map_pair(&sbuf, &dbuf, len);
			fresh_same += sbuf == was_s && dbuf == was_d;
			fresh_done++;
		}
		if (rank == 0) {
			fill(sbuf, len, r, 0);
			MPI_Send(sbuf, (int)len, MPI_BYTE, peer, 0,
				 MPI_COMM_WORLD);
			MPI_Recv(dbuf, (int)len, MPI_BYTE, peer, 0,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			at = check(dbuf, len, r, 1);
		} else {
			MPI_Recv(dbuf, (int)len, MPI_BYTE, peer, 0,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			at = check(dbuf, len, r, 0);
			fill(sbuf, len, r, 1);
			MPI_Send(sbuf, (int)len, MPI_BYTE, peer, 0,
				 MPI_COMM_WORLD);
		}
		if (at != len) {
			fprintf(stderr,
				"pingpong: rank %d round %ld: byte %zu is %#x, "
				"expected %#x\n",
				rank, r, at, dbuf[at],
				pattern(r, peer, at));
			bad = 1;
		}
	}
	if (!bad && rank == 0)
		printf("pingpong: %ld rounds of %zu bytes, every byte "
		       "checked, %.1f us per round trip (fresh buffers: "
		       "%ld, %ld at the same address)\n",
		       rounds, len, (MPI_Wtime() - t0) * 1e6 / (double)rounds,
		       fresh_done, fresh_same);
	munmap(sbuf, len);
	munmap(dbuf, len);
	if (bad)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Finalize();
	return 0;
}
