/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * child_capture.h - for cmocka tests of how a process ends: run a
 * function in a forked child, its stderr captured, under a deadline (a
 * deadlock or a spin fails the test instead of hanging it).
 */
#ifndef GDRC_TEST_CHILD_CAPTURE_H
#define GDRC_TEST_CHILD_CAPTURE_H

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double child_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Past the deadline: the child killed and reaped.  @return 1 if so. */
static inline int child_missed(pid_t pid, double t0, double deadline_s)
{
	int status;

	if (child_now_s() - t0 <= deadline_s)
		return 0;
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 1;
}

/*
 * fn(arg) in a child whose stderr goes into out (len bytes, NUL ended);
 * fn should end the process itself (its return exits with 99).  At most
 * deadline_s seconds: then the child is killed.  *took_s (may be NULL):
 * how long it ran.
 * @return the child's wait status, or -1 when it missed the deadline.
 */
static inline int child_run_timed(void (*fn)(int), int arg, char *out,
				  size_t len, double deadline_s,
				  double *took_s)
{
	double t0 = child_now_s();
	int fd[2], status = -1;
	size_t got = 0;
	ssize_t n = 1;
	pid_t pid, w = 0;

	assert_int_equal(pipe(fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], 2);
		fn(arg);
		_exit(99);
	}
	close(fd[1]);
	out[0] = 0;
	/* Until the child's end closes the pipe; past len, read and drop. */
	while (n > 0) {
		struct pollfd p = { .fd = fd[0], .events = POLLIN };
		char drop[256];

		if (child_missed(pid, t0, deadline_s))
			goto out;
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (got < len - 1) {
			n = read(fd[0], out + got, len - 1 - got);
			got += n > 0 ? (size_t)n : 0;
			out[got] = 0;
		} else {
			n = read(fd[0], drop, sizeof(drop));
		}
	}
	while ((w = waitpid(pid, &status, WNOHANG)) == 0) {
		if (child_missed(pid, t0, deadline_s))
			goto out;
		usleep(10000);
	}
	assert_int_equal(w, pid);
out:
	close(fd[0]);
	if (took_s)
		*took_s = child_now_s() - t0;
	return w == pid ? status : -1;
}

/* The same, and a child still running at the deadline fails the test.
 * @return the child's wait status. */
static inline int child_run(void (*fn)(int), int arg, char *out, size_t len,
			    int deadline_s)
{
	int status = child_run_timed(fn, arg, out, len, deadline_s, NULL);

	if (status == -1)
		fail_msg("child still running after %d s: %s", deadline_s,
			 out);
	return status;
}

#endif /* GDRC_TEST_CHILD_CAPTURE_H */
