// SPDX-License-Identifier: BSD-3-Clause
/*
 * parked_fake.c - the preload's per-thread parked registration, without
 * an RDMA device: run under LD_PRELOAD=libgdrcache-preload.so with
 * GDRC_BACKEND=none and a made-up PD (the none backend never touches it).
 * run_parked.sh reads the cache's stats at exit (GDRC_STATS=1).
 *
 *   1. reg + dereg of one buffer 100 times: 1 miss, the rest served;
 *   2. munmap + mmap(MAP_FIXED) at the same address, reg: a miss (the
 *      parked registration of the old memory must not be served);
 *   3. two buffers in turn: each parked one is let go of for the other;
 *   4. a second dereg of the same MR: EINVAL;
 *   5. a thread that exits with a registration parked.
 * Expected at exit: misses 3.  Exit 0 when every step behaved.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define LEN (64 * 1024)
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static struct ibv_pd pd;
static int fails;

#define CHECK(c, what)                                                       \
	do {                                                                 \
		if (!(c)) {                                                  \
			fails++;                                             \
			printf("FAIL: %s\n", what);                          \
		}                                                            \
	} while (0)

static int reg_dereg(void *p)
{
	struct ibv_mr *mr = ibv_reg_mr(&pd, p, LEN, ACC);

	return mr && mr->addr == p && mr->length == LEN && !ibv_dereg_mr(mr);
}

static void *worker(void *p)
{
	CHECK(reg_dereg(p), "reg+dereg in a thread");
	return NULL; /* exits with it parked */
}

int main(void)
{
	char *a = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	pthread_t t;

	if (a == MAP_FAILED || b == MAP_FAILED)
		return 1;
	for (int i = 0; i < 100; i++)
		CHECK(reg_dereg(a), "reg+dereg");
	munmap(a, LEN);
	CHECK(mmap(a, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == a,
	      "mmap fixed");
	CHECK(reg_dereg(a), "reg+dereg after remap");
	for (int i = 0; i < 10; i++)
		CHECK(reg_dereg(i & 1 ? a : b), "reg+dereg in turn");
	mr = ibv_reg_mr(&pd, a, LEN, ACC);
	CHECK(mr && !ibv_dereg_mr(mr), "reg+dereg");
	CHECK(ibv_dereg_mr(mr) == EINVAL, "second dereg refused");
	CHECK(!pthread_create(&t, NULL, worker, b) && !pthread_join(t, NULL),
	      "thread");
	printf("%s\n", fails ? "FAILED" : "steps ok");
	return fails ? 1 : 0;
}
