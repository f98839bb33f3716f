// SPDX-License-Identifier: BSD-3-Clause
/*
 * kchan.c - open /dev/gdrcache, map its generation page, subscribe and
 * unsubscribe ranges.  Called by the API layer at init and fini, and by the cache
 * through its params (never under the cache lock).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kchan.h"
#include "kmod/uapi/gdrc_ioctl.h"
#include "log/log.h"

gdrc_status_t gdrc_kchan_open(const char *path, struct gdrc_kchan **ch_p,
			      char *why, size_t why_len)
{
	/* Subscriptions are all we use: any 1.x module has them. */
	struct gdrc_version_args v = {
		.user_version = GDRC_KMOD_ABI_VERSION,
		.min_kernel_version = GDRC_KMOD_VERSION_MAKE(1, 0),
	};
	struct gdrc_kchan *ch;
	gdrc_status_t status = GDRC_ERR_KMOD;
	void *gen;
	int fd;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, why_len, "cannot open %s: %s", path,
			 strerror(errno));
		return errno == ENOENT || errno == ENXIO || errno == ENODEV ?
			       GDRC_ERR_NO_DEVICE : GDRC_ERR_KMOD;
	}
	if (ioctl(fd, GDRC_IOCTL_VERSION, &v)) {
		snprintf(why, why_len,
			 "%s: version handshake failed: %s (module ABI %u.%u, "
			 "needs user ABI %u.%u, we are %u.%u)",
			 path, strerror(errno),
			 GDRC_KMOD_VERSION_MAJOR(v.kernel_version),
			 GDRC_KMOD_VERSION_MINOR(v.kernel_version),
			 GDRC_KMOD_VERSION_MAJOR(v.min_user_version),
			 GDRC_KMOD_VERSION_MINOR(v.min_user_version),
			 GDRC_KMOD_VERSION_MAJOR(GDRC_KMOD_ABI_VERSION),
			 GDRC_KMOD_VERSION_MINOR(GDRC_KMOD_ABI_VERSION));
		goto err_close;
	}
	gen = mmap(NULL, GDRC_GEN_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (gen == MAP_FAILED) {
		snprintf(why, why_len, "%s: cannot map the generation page: "
			 "%s", path, strerror(errno));
		goto err_close;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		status = GDRC_ERR_NO_MEMORY;
		goto err_unmap;
	}
	ch->fd = fd;
	ch->gen = gen;
	ch->gen_len = GDRC_GEN_PAGE_SIZE;
	*ch_p = ch;
	return GDRC_OK;

err_unmap:
	munmap(gen, GDRC_GEN_PAGE_SIZE);
err_close:
	close(fd);
	return status;
}

void gdrc_kchan_close(struct gdrc_kchan *ch)
{
	if (!ch)
		return;
	munmap((void *)ch->gen, ch->gen_len);
	close(ch->fd); /* releases every subscription */
	free(ch);
}

int gdrc_kchan_subscribe(struct gdrc_kchan *ch, uintptr_t start, size_t len,
			 int *slot_p, uint64_t *handle_p)
{
	struct gdrc_subscribe_args a = { .start = start, .length = len };

	if (ioctl(ch->fd, GDRC_IOCTL_SUBSCRIBE, &a))
		return -errno;
	*slot_p = (int)a.slot;
	*handle_p = a.handle;
	return 0;
}

int gdrc_kchan_pin(struct gdrc_kchan *ch, uintptr_t va, size_t len,
		   int *slot_p, uint64_t *handle_p)
{
	struct gdrc_pin_args a = { .va = va, .length = len };

	if (ioctl(ch->fd, GDRC_IOCTL_PIN, &a))
		return -errno;
	*slot_p = (int)a.slot;
	*handle_p = a.handle;
	return 0;
}

void gdrc_kchan_unpin(struct gdrc_kchan *ch, uint64_t handle)
{
	struct gdrc_unpin_args a = { .handle = handle };

	if (ioctl(ch->fd, GDRC_IOCTL_UNPIN, &a))
		gdrc_warn("gdrcache.ko unpin of handle %llu failed: %m",
			  (unsigned long long)handle);
}

void gdrc_kchan_unsubscribe(struct gdrc_kchan *ch, uint64_t handle)
{
	struct gdrc_unsubscribe_args a = { .handle = handle };

	if (ioctl(ch->fd, GDRC_IOCTL_UNSUBSCRIBE, &a))
		gdrc_warn("gdrcache.ko unsubscribe of handle %llu failed: %m",
			  (unsigned long long)handle);
}
