/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * invq.h - the queue between the memory hooks and the cache.
 *
 * Hooks post unmapped ranges here (hook context: no allocation, no cache
 * lock); the cache drains them under its write lock on the next call
 * that needs the index.  The queue is bounded and merging: overlapping or
 * adjacent ranges merge, and when all GDRC_INVQ_SLOTS are taken the new
 * range widens its nearest neighbour (of the same class when there is
 * one: a widened CUDA range still only matches allocations, a widened
 * host range still only pages), so any number of events costs a
 * fixed amount of memory and never loses one (only precision).  A post
 * that must not wait for the queue's small spinlock marks "everything"
 * instead, which the drain turns into invalidating every registration:
 * at once when its own thread is inside a post or take of this queue
 * (a signal handler that interrupted the lock's holder, which cannot
 * go on before the handler returns), after a few tries on a thread
 * marked by gdrc_invq_nowait_thread, and after a bounded spin anywhere
 * else.
 *
 * "pending" is bumped by every post and cleared only by the drain that
 * applied every post it counted (a compare-and-swap from the value take
 * saw), so a fast-path reader that sees it clear also sees the
 * invalidations applied, and a post that lands between take and done,
 * even one from a signal handler that interrupted done itself, keeps it
 * set.
 */
#ifndef GDRC_INVQ_H
#define GDRC_INVQ_H

#include <stdatomic.h>
#include <stdint.h>

#define GDRC_INVQ_SLOTS 64

/* Classes of events; only ranges of one class merge with each other. */
enum gdrc_invq_class {
	GDRC_INVQ_HOST,   /* pages unmapped: match registrations' ranges */
	GDRC_INVQ_CUDA,   /* CUDA allocations freed: match their allocation */
	GDRC_INVQ_CLASSES
};

struct gdrc_invq_range {
	uintptr_t start;
	uintptr_t end;
	int cls;          /* enum gdrc_invq_class */
};

struct gdrc_invq {
	_Atomic uint64_t pending;   /* 0: every post applied; else bumped
				     * by each post since */
	_Atomic int all;            /* invalidate everything (lock lost) */
	atomic_flag lock;           /* protects count and r[] */
	unsigned count;             /* ranges in r[] */
	_Atomic uint64_t events[GDRC_INVQ_CLASSES]; /* posts, ever */
	_Atomic uint64_t merges;    /* posts that widened another range */
	struct gdrc_invq_range r[GDRC_INVQ_SLOTS];
};

void gdrc_invq_init(struct gdrc_invq *q);

/* Hook-safe: queue [start, end), start < end, of class cls.  Never
 * waits for a lock that its own thread holds. */
void gdrc_invq_post(struct gdrc_invq *q, uintptr_t start, uintptr_t end,
		    int cls);

/*
 * Move the queued ranges to out[GDRC_INVQ_SLOTS]; pending stays set.
 * *all_p is set if everything must be invalidated; *seen_p is for done.
 * @return how many.
 */
unsigned gdrc_invq_take(struct gdrc_invq *q, struct gdrc_invq_range *out,
			int *all_p, uint64_t *seen_p);

/* After applying what take() returned: clear pending unless anything
 * was posted since (seen: take's *seen_p).  Each take and its done run
 * as a pair, one pair at a time (the cache's write lock): between them
 * pending only grows. */
void gdrc_invq_done(struct gdrc_invq *q, uint64_t seen);

/*
 * The calling thread never waits for a queue's lock, from now until it
 * ends: its posts try the lock a few times, then mark "everything".  For
 * a thread that a lock holder may be waiting for: the userfaultfd
 * reader, which an unmapping thread waits for in the kernel, perhaps
 * from a signal handler that interrupted it inside a post or take.
 */
void gdrc_invq_nowait_thread(void);

/* Not hook context: mark the queue pending with nothing in it (a fork
 * child: every call goes to the slow path). */
void gdrc_invq_poke(struct gdrc_invq *q);

#endif /* GDRC_INVQ_H */
