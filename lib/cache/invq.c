// SPDX-License-Identifier: BSD-3-Clause
/*
 * invq.c - bounded, merging queue of unmapped ranges.
 *
 * gdrc_invq_post runs in hook context (inside malloc, in signal
 * handlers, in any thread): it never allocates, never logs, and only
 * spins a bounded number of times on the queue's own lock, invq.lock,
 * which is held for a few dozen instructions by post and take alike.
 * Both take it; nothing else does.
 *
 * Who never waits for invq.lock.  Its holder can be stopped on the very
 * thread that wants it, or on the thread it is waiting for:
 * - A signal handler that unmaps memory, interrupting its own thread
 *   while that thread is in a post or a take, posts on the thread that
 *   holds the lock: the holder runs again only once the handler
 *   returns.  Each thread marks, in invq_tls, the queues whose lock it
 *   is trying, holding or just releasing; a post to one of them takes
 *   the lockless way at once (invq_post_lockless).
 * - The userfaultfd reader (gdrc_invq_nowait_thread): the unmapping
 *   thread waits in the kernel until the reader has read its event, and
 *   may be doing so from a signal handler that interrupted it inside a
 *   post or a take.  The reader tries the lock INVQ_NOWAIT_TRIES times,
 *   then takes the lockless way.
 * Every other post spins up to INVQ_SPIN_LIMIT times (a holder on
 * another CPU, or preempted); the drain, not hook context, yields until
 * it has the lock.  The lockless way marks "everything", which is
 * always correct, and costs a full invalidation on the next drain.
 */
#include <sched.h>
#include <string.h>

#include "gdrc_int.h"
#include "invq.h"

/* Spins before giving up on the lock and marking "everything". */
#define INVQ_SPIN_LIMIT 100000
/* The same for a thread that must never wait (gdrc_invq_nowait_thread):
 * a few microseconds, longer than a running holder keeps the lock, far
 * shorter than a signal handler's timer period. */
#define INVQ_NOWAIT_TRIES 256
/* Queues a thread can be marked in at once: a post or take, a handler
 * interrupting it that posts, and handlers nested in that one. */
#define INVQ_NEST 4

/*
 * This thread's marks: depth counts the posts and takes running on it
 * (nested ones: signal handlers), held[i] is the queue of the i-th, for
 * the first INVQ_NEST.  A mark covers the whole call, from before the
 * first try of the lock to after its release.  So a handler whose queue
 * is not marked knows that its own thread does not hold that queue's
 * lock: whoever holds it is running on, and its spin is bounded by that
 * holder, never by itself.  A marked queue's lock may be free (the mark
 * is wider than the hold): the lockless way is then only pessimistic.
 * Initial-exec: no allocation on first touch, which hook context could
 * not afford.
 */
struct invq_tls {
	unsigned depth;
	const struct gdrc_invq *held[INVQ_NEST];
	int nowait; /* gdrc_invq_nowait_thread */
};

static __thread struct invq_tls invq_tls
	__attribute__((tls_model("initial-exec")));

/*
 * Mark q before trying its lock.  depth goes up before the slot is
 * written: a handler that interrupts in between puts its own mark above
 * this one (and takes it off again), and reads a stale slot at worst,
 * which sends it the lockless way, or not, while this thread has not
 * touched q's lock yet.  The signal fences keep the compiler from
 * moving these stores across each other or across the lock's.
 * @return the depth to give back to invq_unmark.
 */
GDRC_HOOK_CONTEXT
static unsigned invq_mark(const struct gdrc_invq *q)
{
	unsigned d = invq_tls.depth;

	invq_tls.depth = d + 1;
	atomic_signal_fence(memory_order_seq_cst);
	if (d < INVQ_NEST)
		invq_tls.held[d] = q;
	atomic_signal_fence(memory_order_seq_cst);
	return d;
}

/* After q's lock was released, or never had. */
GDRC_HOOK_CONTEXT
static void invq_unmark(unsigned d)
{
	atomic_signal_fence(memory_order_seq_cst);
	invq_tls.depth = d;
}

/* Is a post or take of q running on this thread, under us?  Marks past
 * INVQ_NEST are not recorded: then yes, to be safe. */
GDRC_HOOK_CONTEXT
static int invq_marked(const struct gdrc_invq *q)
{
	unsigned d = invq_tls.depth;

	if (d > INVQ_NEST)
		return 1;
	for (unsigned i = 0; i < d; i++)
		if (invq_tls.held[i] == q)
			return 1;
	return 0;
}

void gdrc_invq_nowait_thread(void)
{
	invq_tls.nowait = 1;
}

void gdrc_invq_init(struct gdrc_invq *q)
{
	memset(q, 0, sizeof(*q));
	atomic_flag_clear(&q->lock);
}

/* Up to tries attempts.  @return 0 with invq.lock held, or -1. */
GDRC_HOOK_CONTEXT
static int invq_lock(struct gdrc_invq *q, int tries)
{
	for (int i = 0; i < tries; i++) {
		if (!atomic_flag_test_and_set_explicit(&q->lock,
						       memory_order_acquire))
			return 0;
		gdrc_cpu_relax();
	}
	return -1;
}

GDRC_HOOK_CONTEXT
static void invq_unlock(struct gdrc_invq *q)
{
	atomic_flag_clear_explicit(&q->lock, memory_order_release);
}

/* Gap between two ranges; 0 if they overlap or touch. */
GDRC_HOOK_CONTEXT
static uintptr_t invq_gap(const struct gdrc_invq_range *a, uintptr_t start,
			  uintptr_t end)
{
	if (end < a->start)
		return a->start - end;
	if (start > a->end)
		return start - a->end;
	return 0;
}

/*
 * A post without invq.lock: never touches count or r[], which the
 * lock's holder may be changing on this very thread (a handler that
 * interrupted it), only the two atomics.  all first, then pending: a
 * take that loaded pending (its seen) before this bump either exchanges
 * all after the store, and applies everything, or its done's
 * compare-and-swap fails on the bump and the next drain finds all set.
 * A fast-path reader that sees pending clear saw a done that succeeded,
 * so it also sees everything applied.
 */
GDRC_HOOK_CONTEXT
static void invq_post_lockless(struct gdrc_invq *q)
{
	atomic_store(&q->all, 1);
	atomic_fetch_add(&q->pending, 1);
}

GDRC_HOOK_CONTEXT
void gdrc_invq_post(struct gdrc_invq *q, uintptr_t start, uintptr_t end,
		    int cls)
{
	struct gdrc_invq_range *best = NULL;
	uintptr_t best_gap = UINTPTR_MAX;
	unsigned d;

	atomic_fetch_add_explicit(&q->events[cls], 1, memory_order_relaxed);
	/* This thread is inside a post or take of q (we interrupted it):
	 * it may hold invq.lock and cannot release it before we return. */
	if (invq_marked(q)) {
		invq_post_lockless(q);
		return;
	}
	d = invq_mark(q);
	if (invq_lock(q, invq_tls.nowait ? INVQ_NOWAIT_TRIES :
					   INVQ_SPIN_LIMIT)) {
		invq_unmark(d);
		invq_post_lockless(q);
		return;
	}
	for (unsigned i = 0; i < q->count; i++) {
		uintptr_t gap = invq_gap(&q->r[i], start, end);

		if (q->r[i].cls != cls)
			continue;
		if (gap < best_gap) {
			best_gap = gap;
			best = &q->r[i];
		}
	}
	if (!best && q->count == GDRC_INVQ_SLOTS) {
		/* Full of the other class: nothing to widen safely. */
		atomic_store_explicit(&q->all, 1, memory_order_relaxed);
	} else if (best && (best_gap == 0 || q->count == GDRC_INVQ_SLOTS)) {
		if (best_gap)
			atomic_fetch_add_explicit(&q->merges, 1,
						  memory_order_relaxed);
		if (start < best->start)
			best->start = start;
		if (end > best->end)
			best->end = end;
	} else {
		q->r[q->count].start = start;
		q->r[q->count].end = end;
		q->r[q->count].cls = cls;
		q->count++;
	}
	atomic_fetch_add_explicit(&q->pending, 1, memory_order_release);
	invq_unlock(q);
	invq_unmark(d);
}

unsigned gdrc_invq_take(struct gdrc_invq *q, struct gdrc_invq_range *out,
			int *all_p, uint64_t *seen_p)
{
	unsigned n, d;

	/* The drain is not hook context: it may wait for the lock.  Marked
	 * from the first try to after the release, so that a handler's post
	 * on this thread goes lockless, never spins on us. */
	d = invq_mark(q);
	while (invq_lock(q, INVQ_SPIN_LIMIT))
		sched_yield();
	/* Before all: see invq_post_lockless. */
	*seen_p = atomic_load(&q->pending);
	n = q->count;
	memcpy(out, q->r, n * sizeof(*out));
	q->count = 0;
	*all_p = atomic_exchange(&q->all, 0);
	invq_unlock(q);
	invq_unmark(d);
	return n;
}

/* Any post since take bumped pending: then it stays set for the next
 * drain.  No lock: the compare-and-swap is the whole decision. */
void gdrc_invq_done(struct gdrc_invq *q, uint64_t seen)
{
	atomic_compare_exchange_strong_explicit(&q->pending, &seen, 0,
						memory_order_acq_rel,
						memory_order_relaxed);
}

void gdrc_invq_poke(struct gdrc_invq *q)
{
	atomic_fetch_add_explicit(&q->pending, 1, memory_order_release);
}
