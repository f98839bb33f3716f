// SPDX-License-Identifier: BSD-3-Clause
/*
 * verbs_errors.c - the error paths of an ordinary verbs program, for
 * running plain and under LD_PRELOAD=libgdrcache-preload.so and
 * comparing what it prints (run_preload_errors_vm.sh): one line per
 * case, the call's result and errno, or the signal that ended the forked
 * child a case runs in.  Nothing in a line depends on addresses or
 * timing, so two runs that behave alike print the same.
 *
 * Cases: ibv_reg_mr of an unmapped range, of a read-only mapping with
 * LOCAL_WRITE (and without it), with REMOTE_WRITE or REMOTE_ATOMIC but
 * no LOCAL_WRITE, with unknown access bits, of length 0; ibv_dereg_mr
 * twice on one MR; ibv_dealloc_pd with an MR registered, then after it
 * and many more were deregistered; ibv_rereg_mr on an MR; a fork after
 * registering: the child writes the registered buffer, registers
 * another, and the parent's buffer and MR are unaffected.
 * Modes: all (the default): every case but these two, each of which
 * runs in a process of its own (the runner prints how it ended):
 * dereg-twice (plain libibverbs uses the freed MR), fork-init:
 * ibv_fork_init() first, as it must be, then the fork cases, and
 * fork-safe: the fork cases alone (run with RDMAV_FORK_SAFE=1, which
 * makes libibverbs call ibv_fork_init itself).
 *
 * Usage: verbs_errors [-d DEV] [all|dereg-twice|fork-init|fork-safe]
 * Exit 0 when it could run its cases (whatever their results).
 */
#define _GNU_SOURCE /* strerrorname_np, sigabbrev_np */
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096
#define LW IBV_ACCESS_LOCAL_WRITE

static struct ibv_context *dev;
static struct ibv_pd *pd;

#define DIE(...)                                                             \
	do {                                                                 \
		fprintf(stderr, "verbs_errors: " __VA_ARGS__);               \
		fputc('\n', stderr);                                         \
		exit(2);                                                     \
	} while (0)

static void open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (!list)
		DIE("ibv_get_device_list failed");
	for (int i = 0; list[i] && !dev; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name))
			dev = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!dev)
		DIE("no device %s", name ? name : "at all");
	pd = ibv_alloc_pd(dev);
	if (!pd)
		DIE("ibv_alloc_pd failed");
}

static char *map(int prot)
{
	char *p = mmap(NULL, 4 * PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);

	if (p == MAP_FAILED)
		DIE("mmap failed");
	return p;
}

/* "name: mr" or "name: NULL errno E"; the MR is deregistered. */
static void reg_case(const char *name, void *addr, size_t len, int access)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	if (mr) {
		printf("%s: mr, dereg %d\n", name, ibv_dereg_mr(mr));
	} else {
		printf("%s: NULL errno %s\n", name, strerrorname_np(errno) ?
			       strerrorname_np(errno) : "0");
	}
	fflush(stdout);
}

/* Run fn in a child; print "name: signal N" if it dies of one. */
static void in_child(const char *name, void (*fn)(void))
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		DIE("fork failed");
	if (pid == 0) {
		fn();
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		DIE("waitpid failed");
	if (WIFSIGNALED(status))
		printf("%s: signal %s\n", name, sigabbrev_np(WTERMSIG(status)));
	else if (WEXITSTATUS(status))
		printf("%s: exit %d\n", name, WEXITSTATUS(status));
	fflush(stdout);
}

static const char *err_name(int e)
{
	const char *s = strerrorname_np(e);

	return e == 0 ? "0" : s ? s : "?";
}

/* Its own process: plain libibverbs may crash on the second. */
static void dereg_twice(void)
{
	char *buf = map(PROT_READ | PROT_WRITE);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, PAGE, LW);
	int ret;

	if (!mr)
		DIE("dereg_twice: reg failed");
	printf("dereg-twice: first %d\n", ibv_dereg_mr(mr));
	errno = 0;
	ret = ibv_dereg_mr(mr);
	printf("dereg-twice: second %s errno %s\n", err_name(ret),
	       err_name(errno));
}

/* dealloc with an MR held: EBUSY; after it and others (registered and
 * deregistered 20 times: a cache keeps them) were deregistered: 0. */
static void dealloc_pd_cases(void)
{
	struct ibv_pd *p2 = ibv_alloc_pd(dev);
	char *buf = map(PROT_READ | PROT_WRITE);
	struct ibv_mr *mr;
	int ret;

	if (!p2)
		DIE("ibv_alloc_pd failed");
	mr = ibv_reg_mr(p2, buf, PAGE, LW);
	if (!mr)
		DIE("dealloc: reg failed");
	errno = 0;
	ret = ibv_dealloc_pd(p2);
	printf("dealloc-pd-busy: %s errno %s\n", err_name(ret),
	       err_name(errno));
	ibv_dereg_mr(mr);
	for (int i = 0; i < 20; i++) {
		mr = ibv_reg_mr(p2, buf + (i % 4) * PAGE, PAGE, LW);
		if (!mr)
			DIE("dealloc: reg %d failed", i);
		ibv_dereg_mr(mr);
	}
	errno = 0;
	ret = ibv_dealloc_pd(p2);
	printf("dealloc-pd-after-dereg: %s errno %s\n", err_name(ret),
	       err_name(errno));
	munmap(buf, 4 * PAGE);
}

static void rereg(void)
{
	char *buf = map(PROT_READ | PROT_WRITE);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, PAGE, LW);
	int ret;

	if (!mr)
		DIE("rereg: reg failed");
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   LW | IBV_ACCESS_REMOTE_READ);
	printf("rereg-access: %d errno %s\n", ret, err_name(errno));
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			   buf + PAGE, PAGE, 0);
	printf("rereg-translation: %d errno %s\n", ret, err_name(errno));
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL,
			   PAGE, 0);
	printf("rereg-translation-no-addr: %d errno %s\n", ret,
	       err_name(errno));
	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, LW);
	printf("rereg-access-without-flag: %d errno %s\n", ret,
	       err_name(errno));
	errno = 0;
	ret = ibv_rereg_mr(mr, 1 << 7, NULL, NULL, 0, 0);
	printf("rereg-unknown-flag: %d errno %s\n", ret, err_name(errno));
	printf("rereg: dereg %d\n", ibv_dereg_mr(mr));
	munmap(buf, 4 * PAGE);
}

static char *fork_buf;
static struct ibv_mr *fork_mr;
/* The child writes the buffer the parent holds registered: only without
 * ibv_fork_init, where its result does not depend on libibverbs' range
 * tracking (whose MADV_DONTFORK was seen applied in one run and not in
 * the next, in ASan builds). */
static int fork_write_held = 1;

static void fork_child(void)
{
	char *other = map(PROT_READ | PROT_WRITE);
	struct ibv_mr *mr;

	if (fork_write_held) {
		memset(fork_buf, 0xcc, PAGE); /* the registered buffer */
		printf("fork-child: wrote the registered buffer\n");
	}
	errno = 0;
	mr = ibv_reg_mr(pd, other, PAGE, LW);
	printf("fork-child: reg %s errno %s\n", mr ? "mr" : "NULL",
	       err_name(mr ? 0 : errno));
	if (mr)
		printf("fork-child: dereg %d\n", ibv_dereg_mr(mr));
}

static void fork_dereg_child(void)
{
	memset(fork_buf, 0xdd, PAGE);
	printf("fork-dereg-child: wrote the buffer\n");
}

/* Register and deregister (a cache keeps it, nothing is held); fork;
 * the child writes the buffer: with ibv_fork_init in effect, only a
 * registration still there makes the page vanish from the child. */
static void fork_dereg_case(void)
{
	struct ibv_mr *mr;

	fork_buf = map(PROT_READ | PROT_WRITE);
	mr = ibv_reg_mr(pd, fork_buf, PAGE, LW);
	if (!mr)
		DIE("fork-dereg: reg failed");
	printf("fork-dereg: dereg %d\n", ibv_dereg_mr(mr));
	in_child("fork-dereg-child", fork_dereg_child);
}

/* Register, deregister (a cache keeps it), register again and hold;
 * fork; the child writes and registers; the parent's data and MR stay. */
static void fork_case(void)
{
	struct ibv_mr *mr;

	fork_buf = map(PROT_READ | PROT_WRITE);
	memset(fork_buf, 0x11, PAGE);
	mr = ibv_reg_mr(pd, fork_buf, PAGE, LW);
	if (!mr)
		DIE("fork: reg failed");
	ibv_dereg_mr(mr);
	fork_mr = ibv_reg_mr(pd, fork_buf, PAGE, LW);
	if (!fork_mr)
		DIE("fork: reg failed");
	in_child("fork-child", fork_child);
	printf("fork-parent: buffer %s\n",
	       fork_buf[0] == 0x11 && fork_buf[PAGE - 1] == 0x11 ? "kept" :
								   "changed");
	printf("fork-parent: dereg %d\n", ibv_dereg_mr(fork_mr));
	mr = ibv_reg_mr(pd, fork_buf, PAGE, LW);
	printf("fork-parent: reg again %s\n", mr ? "mr" : "NULL");
	if (mr)
		ibv_dereg_mr(mr);
}

int main(int argc, char **argv)
{
	const char *name = NULL, *mode = "all";
	char *rw, *ro, *gone, *part;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-d") && i + 1 < argc)
			name = argv[++i];
		else if (argv[i][0] != '-')
			mode = argv[i];
		else
			DIE("usage: verbs_errors [-d DEV] "
			    "[all|dereg-twice|fork-init|fork-safe]");
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "fork-init")) {
		static const char *const st[] = { "disabled", "enabled",
						  "unneeded" };
		int ret = ibv_fork_init();

		printf("ibv_fork_init: %s, fork support %s\n", err_name(ret),
		       st[ibv_is_fork_initialized() % 3]);
	}
	open_dev(name);
	if (!strcmp(mode, "fork-init") || !strcmp(mode, "fork-safe")) {
		fork_write_held = 0;
		fork_case();
		fork_dereg_case();
		return 0;
	}
	if (!strcmp(mode, "dereg-twice")) {
		dereg_twice();
		return 0;
	}
	if (strcmp(mode, "all"))
		DIE("unknown mode %s", mode);
	rw = map(PROT_READ | PROT_WRITE);
	ro = map(PROT_READ);
	gone = map(PROT_READ | PROT_WRITE);
	munmap(gone, 4 * PAGE);

	reg_case("reg-rw", rw, PAGE, LW);
	reg_case("reg-unmapped", gone, PAGE, LW);
	reg_case("reg-unmapped-noaccess", gone, PAGE, 0);
	part = map(PROT_READ | PROT_WRITE);
	munmap(part + 2 * PAGE, 2 * PAGE);
	reg_case("reg-partly-unmapped", part + PAGE, 2 * PAGE, LW);
	reg_case("reg-readonly-localwrite", ro, PAGE, LW);
	reg_case("reg-readonly-noaccess", ro, PAGE, 0);
	reg_case("reg-readonly-remoteread", ro, PAGE, IBV_ACCESS_REMOTE_READ);
	reg_case("reg-remotewrite-no-localwrite", rw, PAGE,
		 IBV_ACCESS_REMOTE_WRITE);
	reg_case("reg-remoteatomic-no-localwrite", rw, PAGE,
		 IBV_ACCESS_REMOTE_ATOMIC);
	reg_case("reg-unknown-access-bit", rw, PAGE, 1 << 15);
	reg_case("reg-unknown-optional-bit", rw, PAGE, 1 << 29);
	reg_case("reg-length-0", rw, 0, LW);
	reg_case("reg-null-addr", NULL, PAGE, LW);
	/* The same again now that the cache may hold rw's registration. */
	reg_case("reg-rw-again", rw, PAGE, LW);
	reg_case("reg-remotewrite-no-localwrite-again", rw, PAGE,
		 IBV_ACCESS_REMOTE_WRITE);
	dealloc_pd_cases();
	rereg();
	fork_case();
	fork_dereg_case();
	return 0;
}
