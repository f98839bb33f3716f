// SPDX-License-Identifier: BSD-3-Clause
/*
 * ucm.c - UCX's memory events (UCM) as the host event source.
 *
 * Purpose: a process that carries UCX has libucs's constructor patch
 * glibc's memory functions (bistro mode, the x86-64 default) before any
 * of our code runs, or patch them over ours when UCX is dlopened later.
 * Writing over UCM would take its rcache's events away; staying off would
 * leave host memory uncached.  Instead we subscribe to UCM's own events
 * through its public API, looked up at run time in the object libc's
 * munmap jumps into: no build or link dependency on UCX.
 *
 * Timing.  UCM's wrappers (ucm_munmap, ucm_mremap, ...) run, under
 * UCM's event lock held for reading: the VM_UNMAPPED handlers, then the
 * native event's handlers by priority, the system call itself being the
 * handler at priority 0.  Our hooks report after the system call and
 * count a window around it (gdrc_hooks_busy, hooks.h); here the native
 * handler at UCM_PRE opens the window and the one at UCM_POST reports and
 * closes it.  The two run in the same dispatch, so they always pair; the
 * range comes from the event's arguments, or for brk, sbrk, shmat and
 * shmdt (whose sizes UCM works out) from the VM_UNMAPPED event just
 * before, kept per thread.  VM_UNMAPPED alone is not used to open a
 * window: ucm_vm_munmap() raises it without a system call to follow
 * (Open MPI does so from its own hooks), which would never close it.
 *
 * Coverage beyond VM_UNMAPPED: madvise(MADV_DONTNEED_LOCKED and
 * MADV_GUARD_INSTALL) and the target of mremap(MREMAP_FIXED) are
 * reported from the native events' arguments.  Not seen: a failed
 * mremap(MREMAP_FIXED) that unmapped its target (UCX 1.13 and 1.14 pass
 * no target at all), and memory calls that bypass UCM (raw system calls,
 * UCM's own reloc mode misses glibc's internal calls: this source is
 * used only when UCM owns libc's code, i.e. bistro mode).
 *
 * Never, in the handlers (hook context): allocate, log, take a lock; they
 * run with UCM's event lock held, possibly inside glibc's free.
 *
 * Locks: none of ours.  gdrc_ucm_start() runs under
 * hooks.c's install serialisation; UCM's handler list changes under its
 * own lock, which also means no wrapper is half-way through while a
 * handler is added or removed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/types.h>
#include <unistd.h>

#include "gdrc_int.h"
#include "hooks_int.h"

#ifdef __x86_64__

#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

/* UCM's ABI (ucm/api/ucm.h), declared here: stable from UCX 1.9 to 1.20
 * in the fields read below (1.15 appended mremap.new_address). */
enum {
	UCM_EV_MMAP = 1 << 0,
	UCM_EV_MUNMAP = 1 << 1,
	UCM_EV_MREMAP = 1 << 2,
	UCM_EV_SHMAT = 1 << 3,
	UCM_EV_SHMDT = 1 << 4,
	UCM_EV_SBRK = 1 << 5,
	UCM_EV_MADVISE = 1 << 6,
	UCM_EV_BRK = 1 << 7,
	UCM_EV_NATIVE = 0xff,
	UCM_EV_VM_UNMAPPED = 1 << 17,
	UCM_EV_NO_INSTALL = 1 << 24, /* add a handler, install nothing */
};

union ucm_ev {
	struct {
		void *result, *address;
		size_t size;
		int prot, flags, fd;
		off_t offset;
	} mmap;
	struct {
		int result;
		void *address;
		size_t size;
	} munmap;
	struct {
		void *result, *address;
		size_t old_size, new_size;
		int flags;
	} mremap;
	struct {
		void *result;
		int shmid;
		const void *shmaddr;
		int shmflg;
	} shmat;
	struct {
		void *result;
		intptr_t increment;
	} sbrk;
	struct {
		int result;
		void *addr;
		size_t length;
		int advice;
	} madvise;
	struct {
		void *address;
		size_t size;
	} vm;
};

typedef void (*ucm_cb_t)(int type, union ucm_ev *ev, void *arg);
typedef int (*ucm_set_t)(int events, int priority, ucm_cb_t cb, void *arg);
typedef void (*ucm_unset_t)(int events, ucm_cb_t cb, void *arg);

/* Around the system call (UCM's own handler is at 0; UCX's rcache
 * subscribes VM_UNMAPPED at 1000, which runs before any native one). */
#define UCM_PRE (-100000)
#define UCM_POST 100000

/* Nested windows remembered per thread (a signal handler's unmap inside
 * another's); deeper ones report from their arguments only. */
#define UCM_FRAMES 4

struct ucm_range {
	uintptr_t start, end;
};

/* Per thread; initial-exec, as the cache's own fast-path state: no
 * allocation on first touch, which hook context could not afford. */
struct ucm_tls {
	unsigned depth;
	struct ucm_range vm;                /* last VM_UNMAPPED, unclaimed */
	struct ucm_range frame[UCM_FRAMES]; /* claimed by an open window */
};

static __thread struct ucm_tls ucm_tls
	__attribute__((tls_model("initial-exec")));

static ucm_set_t ucm_set;
static ucm_unset_t ucm_unset;
static void *ucm_lib;

/* libc's bytes at subscribe time, compared by gdrc_ucm_intact(). */
#define UCM_SNAP 16
static const char *const ucm_watch[] = { "munmap", "mmap", "mremap",
					 "madvise", "brk" };
static uint8_t *ucm_watch_addr[GDRC_ARRAY_SIZE(ucm_watch)];
static uint8_t ucm_watch_code[GDRC_ARRAY_SIZE(ucm_watch)][UCM_SNAP];

/* ------------------------------------------------------------------
 * Hook context.
 * ------------------------------------------------------------------ */


/*
 * Hook context.  Can this call lose memory?  Must give the same answer
 * before and after the system call (only .result changes between them),
 * since it decides whether a window is opened and closed.
 */
GDRC_HOOK_CONTEXT
static int ucm_loses(int type, const union ucm_ev *ev)
{
	switch (type) {
	case UCM_EV_MUNMAP:
	case UCM_EV_MREMAP:
	case UCM_EV_SHMDT:
	case UCM_EV_BRK: /* whether it shrinks is known only before */
		return 1;
	case UCM_EV_MMAP:
		return !!(ev->mmap.flags & MAP_FIXED);
	case UCM_EV_MADVISE:
		return gdrc_hooks_advice_loses(ev->madvise.advice);
	case UCM_EV_SBRK:
		return ev->sbrk.increment < 0;
	case UCM_EV_SHMAT:
		return !!(ev->shmat.shmflg & SHM_REMAP);
	}
	return 0;
}

/* Page size less one; set before we subscribe. */
static uintptr_t ucm_page_mask = 4095;

GDRC_HOOK_CONTEXT
static void ucm_report_aligned(const void *addr, size_t len)
{
	if (!((uintptr_t)addr & ucm_page_mask))
		gdrc_hooks_report_src((uintptr_t)addr, len,
				      GDRC_HOOKS_SRC_UCM);
}

/*
 * Hook context.  What an mremap lost, as our own hook reports it: moved,
 * the old range; shrunk in place, or failed, a shrink's tail; with
 * MREMAP_FIXED, the target (when it succeeded: UCX before 1.15 passes no
 * target, and a failed one is not seen).
 */
GDRC_HOOK_CONTEXT
static void ucm_post_mremap(const union ucm_ev *ev)
{
	uintptr_t old = (uintptr_t)ev->mremap.address;
	size_t old_len = ev->mremap.old_size, new_len = ev->mremap.new_size;
	void *ret = ev->mremap.result;

	if (old & ucm_page_mask)
		return; /* refused before anything was done */
	if (ret != MAP_FAILED && (uintptr_t)ret != old)
		ucm_report_aligned((void *)old, old_len);
	else if (new_len < old_len)
		ucm_report_aligned((void *)(old + new_len), old_len - new_len);
	if ((ev->mremap.flags & MREMAP_FIXED) && ret != MAP_FAILED)
		gdrc_hooks_report_src((uintptr_t)ret, new_len,
				      GDRC_HOOKS_SRC_UCM);
}

/* Hook context: VM_UNMAPPED, before the native handlers.  Only remembers
 * the range for the window about to open (see the file comment). */
GDRC_HOOK_CONTEXT
static void ucm_vm_cb(int type, union ucm_ev *ev, void *arg)
{
	(void)type;
	(void)arg;
	ucm_tls.vm.start = (uintptr_t)ev->vm.address;
	ucm_tls.vm.end = (uintptr_t)ev->vm.address + ev->vm.size;
}

/* Hook context: a native event, before its system call. */
GDRC_HOOK_CONTEXT
static void ucm_pre_cb(int type, union ucm_ev *ev, void *arg)
{
	struct ucm_tls *t = &ucm_tls;

	(void)arg;
	if (!ucm_loses(type, ev))
		return;
	gdrc_hooks_enter();
	if (t->depth < UCM_FRAMES)
		t->frame[t->depth] = t->vm;
	t->vm = (struct ucm_range){ 0, 0 };
	t->depth++;
}

/* Hook context: the same native event, after its system call. */
GDRC_HOOK_CONTEXT
static void ucm_post_cb(int type, union ucm_ev *ev, void *arg)
{
	struct ucm_tls *t = &ucm_tls;
	struct ucm_range vm = { 0, 0 };

	(void)arg;
	if (!ucm_loses(type, ev))
		return;
	/* A window opened before we subscribed cannot be: UCM adds
	 * handlers under its event lock held for writing, and every
	 * wrapper holds it for reading across both dispatches. */
	if (!t->depth)
		return;
	t->depth--;
	if (t->depth < UCM_FRAMES)
		vm = t->frame[t->depth];
	/* From the arguments where they give the range, as our own hooks
	 * report (an unaligned start is refused before anything is done);
	 * from UCM's VM_UNMAPPED range where only UCM knows it. */
	switch (type) {
	case UCM_EV_MUNMAP:
		ucm_report_aligned(ev->munmap.address, ev->munmap.size);
		break;
	case UCM_EV_MREMAP:
		ucm_post_mremap(ev);
		break;
	case UCM_EV_MMAP:
		ucm_report_aligned(ev->mmap.address, ev->mmap.size);
		break;
	case UCM_EV_MADVISE:
		ucm_report_aligned(ev->madvise.addr, ev->madvise.length);
		break;
	default: /* brk, sbrk, shmat, shmdt */
		if (vm.end > vm.start)
			gdrc_hooks_report_src(vm.start, vm.end - vm.start,
					      GDRC_HOOKS_SRC_UCM);
		break;
	}
	gdrc_hooks_leave(gdrc_hooks_stripe());
}

/* ------------------------------------------------------------------
 * Install time (hooks.c serialises it; may log, allocate).
 * ------------------------------------------------------------------ */

static void ucm_snapshot(void)
{
	for (size_t i = 0; i < GDRC_ARRAY_SIZE(ucm_watch); i++) {
		char owner[8];
		void *fn;

		ucm_watch_addr[i] = NULL;
		if (gdrc_patch_owner(ucm_watch[i], &fn, owner,
				     sizeof(owner)) < 0)
			continue;
		ucm_watch_addr[i] = fn;
		gdrc_code_read(ucm_watch_code[i], fn, UCM_SNAP);
	}
}

int gdrc_ucm_intact(void)
{
	uint8_t now[UCM_SNAP];

	if (!ucm_set)
		return 0;
	for (size_t i = 0; i < GDRC_ARRAY_SIZE(ucm_watch); i++) {
		if (!ucm_watch_addr[i])
			continue;
		gdrc_code_read(now, ucm_watch_addr[i], UCM_SNAP);
		if (memcmp(now, ucm_watch_code[i], UCM_SNAP))
			return 0;
	}
	return 1;
}

/* Remove in the reverse order of adding: a post handler with no pre
 * handler before it does nothing, a pre handler alone would leave a
 * window open. */
static void ucm_unsubscribe(void)
{
	ucm_unset(UCM_EV_NATIVE, ucm_pre_cb, NULL);
	ucm_unset(UCM_EV_VM_UNMAPPED, ucm_vm_cb, NULL);
	ucm_unset(UCM_EV_NATIVE, ucm_post_cb, NULL);
}

static int ucm_subscribe(char *why, size_t why_len)
{
	int st;

	/* Install nothing: UCM's bistro patches are in already (or the self
	 * test fails), and asking it to install more would have UCM test
	 * or add hooks (malloc ones included) on our behalf. */
	st = ucm_set(UCM_EV_NATIVE | UCM_EV_NO_INSTALL, UCM_POST, ucm_post_cb,
		     NULL);
	if (!st)
		st = ucm_set(UCM_EV_VM_UNMAPPED | UCM_EV_NO_INSTALL, UCM_POST,
			     ucm_vm_cb, NULL);
	if (!st)
		st = ucm_set(UCM_EV_NATIVE | UCM_EV_NO_INSTALL, UCM_PRE,
			     ucm_pre_cb, NULL);
	if (st) {
		ucm_unsubscribe();
		snprintf(why, why_len,
			 "ucm_set_event_handler failed (ucs status %d; UCX_MEM_EVENTS=no?)",
			 st);
		return -1;
	}
	return 0;
}

/* Does an unmap through libc's own munmap reach us, window closed? */
static int ucm_self_test(int (*libc_munmap)(void *, size_t), char *why,
			 size_t why_len)
{
	uint64_t before = gdrc_hooks_event_count();
	void *p;

	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(why, why_len, "self test mmap failed: %m");
		return -1;
	}
	if (libc_munmap(p, 4096)) {
		snprintf(why, why_len, "self test munmap failed: %m");
		return -1;
	}
	if (gdrc_hooks_event_count() == before || ucm_tls.depth) {
		snprintf(why, why_len,
			 "self test: a munmap through ucm was not reported");
		return -1;
	}
	return 0;
}

/* Is owner UCM, i.e. does it define the event API itself?  @return the
 * handle (to close), or NULL. */
static void *ucm_open(const char *owner)
{
	Dl_info info;
	void *h, *fn;

	h = dlopen(owner, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return NULL;
	fn = dlsym(h, "ucm_set_event_handler");
	if (fn && dlsym(h, "ucm_unset_event_handler") &&
	    dladdr(fn, &info) && info.dli_fname &&
	    !strcmp(info.dli_fname, owner))
		return h;
	dlclose(h);
	return NULL;
}

int gdrc_ucm_start(const char *owner, void *libc_munmap, char *why,
		   size_t why_len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *h;

	if (page > 0)
		ucm_page_mask = (uintptr_t)page - 1;
	h = ucm_open(owner);
	if (!h)
		return 1;
	ucm_set = (ucm_set_t)dlsym(h, "ucm_set_event_handler");
	ucm_unset = (ucm_unset_t)dlsym(h, "ucm_unset_event_handler");
	if (ucm_subscribe(why, why_len))
		goto fail;
	if (ucm_self_test((int (*)(void *, size_t))libc_munmap, why,
			  why_len)) {
		ucm_unsubscribe();
		goto fail;
	}
	ucm_lib = h; /* kept open: our handlers are in its list */
	ucm_snapshot();
	return 0;
fail:
	ucm_set = NULL;
	ucm_unset = NULL;
	dlclose(h);
	return -1;
}

#endif /* __x86_64__ */
