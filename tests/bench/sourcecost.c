// SPDX-License-Identifier: BSD-3-Clause
/*
 * sourcecost.c - gdrc-sourcecost: what each host event source of the
 * library costs the program, through the public API.  For each
 * GDRC_MEM_HOOKS setting (auto: glibc patched; uffd: userfaultfd), run
 * in a child of its own, the mean of N rounds of:
 *
 *   map      mmap of one page and a write to it
 *   miss     gdrc_mr_get + gdrc_mr_put of that page (a miss: the range
 *            is watched, with uffd, by a system call)
 *   hit      gdrc_mr_get + gdrc_mr_put again (a hit: the second get of
 *            a registration, which makes this thread's handle, so dearer
 *            than a hit that repeats)
 *   unmap    munmap of that cached page (with uffd: waits until the
 *            library's reader has read the event)
 *   plain    munmap of a page never cached (with uffd: not watched)
 *
 * Usage: gdrc-sourcecost [N] (default 2000).  Prints one row per setting
 * and checks that every unmap of a cached page reached the cache
 * (mem_events): exit 1 if not, 0 otherwise.  A program that prints
 * figures, not a timed test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gdrcache.h>

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static char *page_map(void)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	p[0] = 1;
	return p;
}

static void get_put(struct gdrc_ctx *ctx, char *p)
{
	struct gdrc_mr *mr;

	if (gdrc_mr_get(ctx, p, 4096, 0, 0, &mr)) {
		fprintf(stderr, "gdrc_mr_get failed\n");
		exit(1);
	}
	gdrc_mr_put(ctx, mr);
}

/* One setting, in this process.  @return 0, or 1 if events went
 * missing. */
static int run(const char *setting, int n)
{
	double t[5] = { 0 };
	uint64_t events = 0;
	const char *why = "?";
	struct gdrc_ctx *ctx;

	if (gdrc_init(NULL, &ctx))
		return 1;
	if (gdrc_hooks_status(ctx, &why)) {
		printf("%-5s  skipped: %s\n", setting, why);
		fflush(stdout);
		gdrc_fini(ctx);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		double a = now_ns(), b, c, d, e;
		char *p = page_map(), *q;

		b = now_ns();
		get_put(ctx, p);
		c = now_ns();
		get_put(ctx, p);
		d = now_ns();
		munmap(p, 4096);
		e = now_ns();
		t[0] += b - a;
		t[1] += c - b;
		t[2] += d - c;
		t[3] += e - d;
		q = page_map();
		e = now_ns();
		munmap(q, 4096);
		t[4] += now_ns() - e;
	}
	gdrc_stat_get(ctx, GDRC_STAT_MEM_EVENTS, &events);
	printf("%-5s  %8.0f %8.0f %8.1f %8.0f %8.0f   %s\n", setting, t[0] / n,
	       t[1] / n, t[2] / n, t[3] / n, t[4] / n, why);
	gdrc_fini(ctx);
	if (events < (uint64_t)n) {
		printf("%s: %llu unmaps of cached pages reached the cache, "
		       "of %d\n", setting, (unsigned long long)events, n);
		fflush(stdout);
		return 1;
	}
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const settings[] = { "auto", "uffd" };
	int n = argc > 1 ? atoi(argv[1]) : 2000, rc = 0;

	if (n < 1) {
		fprintf(stderr, "usage: gdrc-sourcecost [N]\n");
		return 1;
	}
	printf("gdrc-sourcecost: mean ns over %d rounds, one page\n", n);
	printf("%-5s  %8s %8s %8s %8s %8s   %s\n", "hooks", "map", "miss",
	       "hit", "unmap", "plain", "source");
	fflush(stdout);
	for (unsigned i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			setenv("GDRC_MEM_HOOKS", settings[i], 1);
			_exit(run(settings[i], n));
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			rc = 1;
	}
	return rc;
}
