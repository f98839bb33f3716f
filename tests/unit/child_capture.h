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

/*
 * fn(arg) in a child whose stderr goes into out (len bytes, NUL ended);
 * fn should end the process itself (its return exits with 99).  At most
 * deadline_s seconds: then the child is killed and the test fails.
 * @return the child's wait status.
 */
static inline void child_deadline(pid_t pid, time_t t0, int deadline_s,
				  const char *out)
{
	int status;

	if (time(NULL) - t0 <= deadline_s)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fail_msg("child still running after %d s: %s", deadline_s, out);
}

static inline int child_run(void (*fn)(int), int arg, char *out, size_t len,
			    int deadline_s)
{
	time_t t0 = time(NULL);
	int fd[2], status = 0;
	size_t got = 0;
	ssize_t n = 1;
	pid_t pid, w;

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

		child_deadline(pid, t0, deadline_s, out);
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
	close(fd[0]);
	while ((w = waitpid(pid, &status, WNOHANG)) == 0) {
		child_deadline(pid, t0, deadline_s, out);
		usleep(10000);
	}
	assert_int_equal(w, pid);
	return status;
}

#endif /* GDRC_TEST_CHILD_CAPTURE_H */
