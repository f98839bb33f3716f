// SPDX-License-Identifier: BSD-3-Clause
/*
 * hooks.c - subscribers, dispatch, and the one-time install of the host
 * memory event source.
 *
 * Purpose: fan each "these pages lost their contents" event out to up to
 * GDRC_HOOKS_MAX_SUBSCRIBERS callbacks, and install the patches that
 * produce the events (patch_x86_64.c) once per process, checking with a
 * self test that they work.
 *
 * Never, in hook context (gdrc_hooks_report and what it calls): allocate,
 * log, call CUDA, take or wait on a lock, or call anything that may
 * re-enter the hooks.  The caller may be inside malloc with glibc's arena
 * lock held, or in a signal handler.
 *
 * Invariants:
 *   - a slot's callback runs only while that slot's users count is held,
 *     so an unsubscriber that saw users == 0 after clearing fn knows the
 *     callback is not running and will not start again;
 *   - fn is published after arg, and read before it, so a dispatcher
 *     that sees the new fn also sees its arg;
 *   - a slot's bit in hooks_live is set while its fn may be set; dispatch
 *     visits only those slots, so an idle table costs one load per event;
 *   - hooks_events counts every reported range, subscribers or not.
 *   - a replacement that may lose memory holds its stripe's count and
 *     gdrc_hooks_busy from before its system call until its dispatch
 *     returned, so a get that saw both at zero after its own mmap cannot
 *     find a registration of the old contents un-posted.
 *
 * Locks: hooks_sub_lock serializes subscribe and unsubscribe, and is held
 * across unsubscribe's wait (callbacks never take it); a fork child
 * starts it afresh (hooks_atfork_child).  Install runs under
 * pthread_once.  Dispatch takes no lock.
 *
 * Callers: the API layer (api_sources.c) installs and subscribes on the cache's behalf; the
 * replacement functions in patch_x86_64.c call gdrc_hooks_report().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdrc_int.h"
#include "hooks_int.h"
#include "log/log.h"

struct hooks_slot {
	_Atomic(gdrc_hooks_event_fn) fn; /* NULL: free or closing */
	void *_Atomic arg;
	atomic_uint users;               /* dispatchers inside this slot */
	int taken;                       /* under hooks_sub_lock */
} GDRC_ALIGNED_CL;

#define HOOKS_WORD_BITS 64
#define HOOKS_WORDS                                                          \
	((GDRC_HOOKS_MAX_SUBSCRIBERS + HOOKS_WORD_BITS - 1) / HOOKS_WORD_BITS)

static struct hooks_slot hooks_slots[GDRC_HOOKS_MAX_SUBSCRIBERS];
static _Atomic uint64_t hooks_live[HOOKS_WORDS]; /* bit set: slot taken */
static pthread_mutex_t hooks_sub_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic uint64_t hooks_events;
static _Atomic uint64_t hooks_cuda_events;
/* Set before the patches go in; read in hook context. */
static _Atomic uintptr_t hooks_page_mask = 4095;

/* Until installed the probe reads a word that equals its value (0), so
 * that the fast path's check needs no test for NULL. */
const uint64_t gdrc_probe_none;
const uint64_t *_Atomic gdrc_hooks_probe_addr = &gdrc_probe_none;
_Atomic uint64_t gdrc_hooks_probe_val;

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static gdrc_status_t hooks_status = GDRC_ERR_UNSUPPORTED; /* after once */
static atomic_int hooks_on;
static atomic_int hooks_done;   /* hooks_why is final */
static char hooks_why[256];     /* written once, under hooks_once */
/* The host source (hooks.h) and its description: set under hooks_once,
 * changed by a retake under hooks_retake_lock.  A description is written
 * into the next of a few buffers before hooks_src_name points at it, so a
 * reader holding the last one keeps a whole string. */
static _Atomic int hooks_src = GDRC_HOOKS_HOST_NONE;
static char hooks_names[4][600];
static unsigned hooks_names_next;
static const char *_Atomic hooks_src_name;
static pthread_mutex_t hooks_retake_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------
 * Hook context.
 * ------------------------------------------------------------------ */

/* Replacements in their window (hooks.h): the total, read by every fast
 * get, and per-thread stripes, which the slow path waits on one by one. */
#define HOOKS_STRIPES 16

struct hooks_stripe {
	_Atomic unsigned n;
} GDRC_ALIGNED_CL;

_Atomic unsigned gdrc_hooks_busy;
static struct hooks_stripe hooks_stripes[HOOKS_STRIPES];

/* Hook context: pthread_self reads the thread pointer, no TLS lookup. */
GDRC_HOOK_CONTEXT
unsigned gdrc_hooks_stripe(void)
{
	uintptr_t t = (uintptr_t)pthread_self();

	return (unsigned)((t >> 12) ^ (t >> 20)) % HOOKS_STRIPES;
}

GDRC_HOOK_CONTEXT
unsigned gdrc_hooks_enter(void)
{
	unsigned s = gdrc_hooks_stripe();

	atomic_fetch_add(&hooks_stripes[s].n, 1);
	atomic_fetch_add(&gdrc_hooks_busy, 1);
	return s;
}

/*
 * Hook context.  A count that never goes below zero: a fork child starts
 * with every count at zero (hooks_atfork_child), and a window or a
 * dispatch the forking thread itself had open (fork from a signal
 * handler) ends there without a matching start.  Elsewhere every end has
 * its start counted, so the floor is never reached.
 */
GDRC_HOOK_CONTEXT
static void hooks_count_down(atomic_uint *n)
{
	unsigned v = atomic_load(n);

	while (v && !atomic_compare_exchange_weak(n, &v, v - 1))
		;
}

/* Hook context: after the event went out. */
GDRC_HOOK_CONTEXT
void gdrc_hooks_leave(unsigned s)
{
	hooks_count_down(&gdrc_hooks_busy);
	hooks_count_down(&hooks_stripes[s].n);
}

/* Hook context: one slot, held by its users count while fn runs. */
GDRC_HOOK_CONTEXT
static void hooks_call(struct hooks_slot *slot, uintptr_t start,
		       uintptr_t end, int source)
{
	gdrc_hooks_event_fn fn;

	/* A free slot costs one load, not two atomic writes. */
	if (!atomic_load_explicit(&slot->fn, memory_order_relaxed))
		return;
	atomic_fetch_add(&slot->users, 1);
	fn = atomic_load(&slot->fn);
	if (fn)
		fn(start, end, source, atomic_load(&slot->arg));
	hooks_count_down(&slot->users);
}

/* Hook context: hand [start, end) to every live subscriber. */
GDRC_HOOK_CONTEXT
static void hooks_dispatch(uintptr_t start, uintptr_t end, int source)
{
	/* A subscriber may clobber errno; munmap's caller must not see it. */
	int saved_errno = errno;

	for (int w = 0; w < HOOKS_WORDS; w++) {
		uint64_t live = atomic_load(&hooks_live[w]);

		while (live) {
			int bit = __builtin_ctzll(live);

			live &= live - 1;
			hooks_call(&hooks_slots[w * HOOKS_WORD_BITS + bit],
				   start, end, source);
		}
	}
	errno = saved_errno;
}

/* Hook context, from the replacements in patch_x86_64.c. */
GDRC_HOOK_CONTEXT
void gdrc_hooks_report(uintptr_t addr, size_t len)
{
	gdrc_hooks_report_src(addr, len, GDRC_HOOKS_SRC_HOST);
}

/* Hook context: from patch_x86_64.c (HOST) or ucm.c (UCM). */
GDRC_HOOK_CONTEXT
void gdrc_hooks_report_src(uintptr_t addr, size_t len, int src)
{
	uintptr_t mask = atomic_load_explicit(&hooks_page_mask,
					      memory_order_relaxed);
	uintptr_t start, end, last;

	if (!len || len - 1 > UINTPTR_MAX - addr)
		return;
	last = addr + (len - 1);
	/* The top page of the address space is never user memory. */
	if ((last | mask) == UINTPTR_MAX)
		return;
	start = addr & ~mask;
	end = (last | mask) + 1;

	atomic_fetch_add_explicit(&hooks_events, 1, memory_order_relaxed);
	hooks_dispatch(start, end, src);
}

/* Hook context, from the replacements in cuhooks.c. */
/* The CUDA free path's second step (gdrc_hooks_set_cuda_sync), or NULL. */
static _Atomic(gdrc_hooks_sync_fn) hooks_cuda_sync;

GDRC_HOOK_CONTEXT
void gdrc_hooks_report_cuda(uintptr_t start, uintptr_t end)
{
	gdrc_hooks_sync_fn sync;

	atomic_fetch_add_explicit(&hooks_cuda_events, 1,
				  memory_order_relaxed);
	hooks_dispatch(start, end, GDRC_HOOKS_SRC_CUDA);
	sync = atomic_load_explicit(&hooks_cuda_sync, memory_order_acquire);
	if (sync)
		sync(start, end);
}

void gdrc_hooks_set_cuda_sync(gdrc_hooks_sync_fn fn)
{
	atomic_store_explicit(&hooks_cuda_sync, fn, memory_order_release);
}

/* Any context, hook context included: reads a counter. */
uint64_t gdrc_hooks_event_count(void)
{
	return atomic_load_explicit(&hooks_events, memory_order_relaxed);
}

uint64_t gdrc_hooks_cuda_event_count(void)
{
	return atomic_load_explicit(&hooks_cuda_events, memory_order_relaxed);
}

/* Any context, hook context included. */
int gdrc_hooks_active(void)
{
	return atomic_load_explicit(&hooks_on, memory_order_acquire);
}

/* ------------------------------------------------------------------
 * Ordinary context (may log, lock, allocate).
 * ------------------------------------------------------------------ */

/*
 * Ordinary context.  A stripe seen at zero once has no replacement left
 * that was in its window before we looked; a window lasts one system call
 * and a dispatch, so the wait is short.
 */
void gdrc_hooks_wait_idle(void)
{
	if (gdrc_hooks_idle())
		return;
	for (int i = 0; i < HOOKS_STRIPES; i++)
		while (atomic_load_explicit(&hooks_stripes[i].n,
					    memory_order_acquire))
			sched_yield();
}

/*
 * Fork child: only the forking thread is left.  Windows and dispatches
 * other threads had open never end here, and one of them may have held
 * hooks_sub_lock: without this the child's gets would wait for them
 * forever, and its next subscribe would deadlock.  (A slot another
 * thread was subscribing or unsubscribing stays taken in the child.)
 */
static void hooks_atfork_child(void)
{
	atomic_store(&gdrc_hooks_busy, 0);
	for (int i = 0; i < HOOKS_STRIPES; i++)
		atomic_store(&hooks_stripes[i].n, 0);
	for (int i = 0; i < GDRC_HOOKS_MAX_SUBSCRIBERS; i++)
		atomic_store(&hooks_slots[i].users, 0);
	pthread_mutex_init(&hooks_sub_lock, NULL);
}

static pthread_once_t hooks_atfork_once = PTHREAD_ONCE_INIT;

static void hooks_atfork_install(void)
{
	if (pthread_atfork(NULL, NULL, hooks_atfork_child))
		gdrc_warn("pthread_atfork failed: a fork child may wait on "
			  "unmaps its parent's threads had under way");
}

/* Ordinary context: takes hooks_sub_lock. */
int gdrc_hooks_subscribe(gdrc_hooks_event_fn fn, void *arg)
{
	int i;

	if (!fn)
		return GDRC_ERR_INVALID_PARAM;
	pthread_once(&hooks_atfork_once, hooks_atfork_install);
	pthread_mutex_lock(&hooks_sub_lock);
	for (i = 0; i < GDRC_HOOKS_MAX_SUBSCRIBERS; i++) {
		struct hooks_slot *slot = &hooks_slots[i];

		if (slot->taken)
			continue;
		slot->taken = 1;
		atomic_store(&slot->arg, arg);
		atomic_store(&slot->fn, fn);
		atomic_fetch_or(&hooks_live[i / HOOKS_WORD_BITS],
				(uint64_t)1 << (i % HOOKS_WORD_BITS));
		pthread_mutex_unlock(&hooks_sub_lock);
		return i;
	}
	pthread_mutex_unlock(&hooks_sub_lock);
	return GDRC_ERR_LIMIT;
}

/*
 * Ordinary context only: called from a slot's own callback, the wait
 * below would never end.
 */
void gdrc_hooks_unsubscribe(int slot_nr)
{
	struct hooks_slot *slot;

	if (slot_nr < 0 || slot_nr >= GDRC_HOOKS_MAX_SUBSCRIBERS) {
		gdrc_warn("hooks unsubscribe of bad slot %d", slot_nr);
		return;
	}
	slot = &hooks_slots[slot_nr];
	pthread_mutex_lock(&hooks_sub_lock);
	if (!slot->taken) {
		pthread_mutex_unlock(&hooks_sub_lock);
		gdrc_warn("hooks unsubscribe of free slot %d", slot_nr);
		return;
	}
	/*
	 * Pairs with hooks_call(): either it raised users before our load
	 * and we wait for it, or its load of fn comes after our store and
	 * sees NULL (both are seq_cst).
	 */
	atomic_store(&slot->fn, NULL);
	while (atomic_load(&slot->users))
		sched_yield();
	atomic_fetch_and(&hooks_live[slot_nr / HOOKS_WORD_BITS],
			 ~((uint64_t)1 << (slot_nr % HOOKS_WORD_BITS)));
	atomic_store(&slot->arg, NULL);
	slot->taken = 0;
	pthread_mutex_unlock(&hooks_sub_lock);
}

#if defined(__x86_64__)
/* Did the patched munmap report a page we mapped with libc's mmap? */
static int hooks_self_test(const struct gdrc_patch_libc *libc, char *why,
			   size_t why_len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t before = gdrc_hooks_event_count();
	void *p;

	p = libc->mmap(NULL, page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(why, why_len, "self test mmap failed: %m");
		return -1;
	}
	if (libc->munmap(p, page)) {
		snprintf(why, why_len, "self test munmap failed: %m");
		return -1;
	}
	if (gdrc_hooks_event_count() == before) {
		snprintf(why, why_len,
			 "self test: munmap through %s was not reported",
			 libc->path);
		return -1;
	}
	return 0;
}
#endif

#if defined(__x86_64__)
/* Install time or retake: the next description of the source. */
__attribute__((format(printf, 1, 2)))
static void hooks_name_set(const char *fmt, ...)
{
	char *buf = hooks_names[hooks_names_next++ % 4];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(hooks_names[0]), fmt, ap);
	va_end(ap);
	atomic_store(&hooks_src_name, buf);
}

/* Point the probe (hooks.h) at munmap's bytes as they are now. */
static void hooks_probe_set(const void *munmap_fn)
{
	uint64_t v;

	gdrc_code_read((uint8_t *)&v, munmap_fn, sizeof(v));
	atomic_store(&gdrc_hooks_probe_val, v);
	atomic_store(&gdrc_hooks_probe_addr, (const uint64_t *)munmap_fn);
}

/*
 * Install time, or a retake.  libc's munmap already jumps elsewhere: if
 * into UCX's UCM, receive its events (ucm.c).  @return 0 subscribed
 * (*munmap_p and the name set); 1 UCM does not own munmap (why
 * untouched); -1 it does, but its events do not reach us (why set).
 */
static int hooks_try_ucm(void **munmap_p, char *why, size_t why_len)
{
	char owner[512], ucm_why[200];
	void *fn;
	int ret;

	if (gdrc_patch_owner("munmap", &fn, owner, sizeof(owner)) != 1 ||
	    !owner[0])
		return 1; /* not redirected, or to no object */
	ret = gdrc_ucm_start(owner, fn, ucm_why, sizeof(ucm_why));
	if (ret > 0)
		return 1; /* not UCM */
	if (ret < 0) {
		/* Both bounded: the reason buffer is 256 bytes. */
		snprintf(why, why_len,
			 "libc's munmap already jumps into %.80s (ucx's ucm), whose events do not reach us: %.60s",
			 owner, ucm_why);
		return -1;
	}
	hooks_name_set("ucx ucm events (%s)", owner);
	gdrc_debug("host memory events from ucx's ucm in %s", owner);
	*munmap_p = fn;
	return 0;
}

/*
 * Chained to libfabric's patch while UCX's libucm is loaded: UCM's patch,
 * if it made one, was written over, and a UCX registration cache that
 * relies on UCM's events no longer hears of unmaps (it served old memory
 * with gdrcache's own hooks off too: docs/hooks.md).  Not ours to mend;
 * said once, since the process's owner is the one who can.
 */
static void hooks_warn_ucm_lost(const char *chained_to)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	void *ucm;

	if (!strstr(chained_to, "libfabric"))
		return;
	ucm = dlopen("libucm.so.0", RTLD_NOLOAD | RTLD_LAZY);
	if (!ucm)
		return;
	dlclose(ucm);
	if (!atomic_flag_test_and_set(&said))
		gdrc_warn("glibc's memory functions go to libfabric's hooks "
			  "(%s) although ucx's libucm is loaded: a ucx "
			  "registration cache that relies on ucm's events "
			  "does not hear of unmaps (gdrcache does, chained); "
			  "FI_MR_CACHE_MONITOR=userfaultfd leaves glibc to ucm",
			  chained_to);
}

/*
 * Install time, or a retake.  Patch glibc (chained to Open MPI's or
 * libfabric's hooks where those went first) and self-test.
 * @return 0 with *munmap_p and the name set; -1 with why.
 */
static int hooks_try_patch(void **munmap_p, char *why, size_t why_len)
{
	struct gdrc_patch_libc libc;

	if (gdrc_patch_apply(&libc, why, why_len))
		return -1;
	if (hooks_self_test(&libc, why, why_len)) {
		gdrc_patch_revert();
		return -1;
	}
	if (libc.chained_to) {
		hooks_name_set("glibc patched (%s), chained to the hooks of %s",
			       libc.path, libc.chained_to);
		gdrc_debug("memory hooks installed in %s over those of %s",
			   libc.path, libc.chained_to);
		hooks_warn_ucm_lost(libc.chained_to);
	} else {
		hooks_name_set("glibc patched (%s)", libc.path);
		gdrc_debug("memory hooks installed in %s: munmap mremap madvise brk mmap shmat",
			   libc.path);
	}
	*munmap_p = (void *)libc.munmap;
	return 0;
}
#endif

/* Install time.  @return 0, or -1 with the reason in why. */
static int hooks_try(char *why, size_t why_len)
{
#if defined(__x86_64__)
	long page = sysconf(_SC_PAGESIZE);
	void *fn;
	int ret;

	if (page <= 0 || (page & (page - 1))) {
		snprintf(why, why_len, "odd page size %ld", page);
		return -1;
	}
	atomic_store(&hooks_page_mask, (uintptr_t)page - 1);
	/* UCM's events where UCM owns glibc's code, else our patch (which
	 * fails over any other owner but Open MPI and libfabric). */
	ret = hooks_try_ucm(&fn, why, why_len);
	if (ret < 0)
		return -1;
	if (!ret) {
		atomic_store(&hooks_src, GDRC_HOOKS_HOST_UCM);
	} else {
		if (hooks_try_patch(&fn, why, why_len))
			return -1;
		atomic_store(&hooks_src, GDRC_HOOKS_HOST_PATCH);
	}
	/* Read once, now that the source is in place (see hooks.h). */
	hooks_probe_set(fn);
	return 0;
#else
	snprintf(why, why_len,
		 "no memory hooks for this architecture (x86-64 only)");
	return -1;
#endif
}

static void hooks_install_once(void)
{
	if (hooks_try(hooks_why, sizeof(hooks_why))) {
		hooks_status = GDRC_ERR_UNSUPPORTED;
		atomic_store(&hooks_done, 1);
		gdrc_debug("memory hooks unavailable: %s", hooks_why);
		return;
	}
	hooks_status = GDRC_OK;
	hooks_why[0] = '\0';
	atomic_store(&hooks_on, 1);
	atomic_store(&hooks_done, 1);
}

/* Ordinary context; the first call patches libc, later ones wait for it. */
gdrc_status_t gdrc_hooks_install(void)
{
	pthread_once(&hooks_atfork_once, hooks_atfork_install);
	pthread_once(&hooks_once, hooks_install_once);
	return hooks_status;
}

/* Any context but hook context (callers may log the string). */
const char *gdrc_hooks_reason(void)
{
	if (!atomic_load(&hooks_done))
		return "memory hooks not installed yet";
	return atomic_load(&hooks_on) ? NULL : hooks_why;
}

/* Any context: reads memory only. */
int gdrc_hooks_intact(void)
{
#ifdef __x86_64__
	if (!gdrc_hooks_active())
		return 0;
	switch (atomic_load(&hooks_src)) {
	case GDRC_HOOKS_HOST_PATCH:
		return gdrc_patch_intact();
	case GDRC_HOOKS_HOST_UCM:
		return gdrc_ucm_intact();
	}
#endif
	return 0;
}

int gdrc_hooks_host_source(const char **name_p)
{
	int src = gdrc_hooks_active() ? atomic_load(&hooks_src) :
					GDRC_HOOKS_HOST_NONE;

	if (name_p)
		*name_p = src == GDRC_HOOKS_HOST_NONE ?
				  NULL :
				  atomic_load(&hooks_src_name);
	return src;
}

/*
 * Ordinary context; takes hooks_retake_lock.  Our patch was overwritten:
 * by UCX's UCM (a libucs dlopened after us), its events replace it.
 */
gdrc_status_t gdrc_hooks_retake(void (*flush)(void))
{
	gdrc_status_t st = GDRC_ERR_UNSUPPORTED;
#ifdef __x86_64__
	char why[sizeof(hooks_why)];
	void *fn;

	pthread_mutex_lock(&hooks_retake_lock);
	if (gdrc_hooks_intact()) {
		st = GDRC_OK; /* another thread did it */
	} else if (gdrc_hooks_active()) {
		/* UCM wrote over our patch: its events.  Anything else that
		 * is now there: our patch again, chained to Open MPI's or
		 * libfabric's, or plain where glibc's code was put back. */
		int src = GDRC_HOOKS_HOST_UCM;
		int ret = atomic_load(&hooks_src) == GDRC_HOOKS_HOST_PATCH ?
				  hooks_try_ucm(&fn, why, sizeof(why)) :
				  1;

		if (ret > 0) {
			src = GDRC_HOOKS_HOST_PATCH;
			ret = hooks_try_patch(&fn, why, sizeof(why));
		}
		if (!ret) {
			/* The probe keeps failing until the flush is
			 * queued: a fast hit in between would trust a
			 * registration whose unmap went unseen. */
			flush();
			atomic_store(&hooks_src, src);
			hooks_probe_set(fn);
			st = GDRC_OK;
		} else {
			gdrc_debug("memory hooks overwritten: %s", why);
		}
	}
	pthread_mutex_unlock(&hooks_retake_lock);
#else
	(void)flush;
#endif
	return st;
}
