// SPDX-License-Identifier: BSD-3-Clause
/*
 * invq.c - bounded, merging queue of unmapped ranges.
 *
 * gdrc_invq_post runs in hook context (inside malloc, in signal
 * handlers, in any thread): it never allocates, never logs, and only
 * spins a bounded number of times on the queue's own lock, which is held
 * for a few dozen instructions by post and take alike.  Both take it;
 * nothing else does.
 */
#include <sched.h>
#include <string.h>

#include "gdrc_int.h"
#include "invq.h"

/* Spins before giving up on the lock and marking "everything". */
#define INVQ_SPIN_LIMIT 100000

void gdrc_invq_init(struct gdrc_invq *q)
{
	memset(q, 0, sizeof(*q));
	atomic_flag_clear(&q->lock);
}

GDRC_HOOK_CONTEXT
static int invq_lock(struct gdrc_invq *q)
{
	for (int i = 0; i < INVQ_SPIN_LIMIT; i++) {
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

GDRC_HOOK_CONTEXT
void gdrc_invq_post(struct gdrc_invq *q, uintptr_t start, uintptr_t end,
		    int cls)
{
	struct gdrc_invq_range *best = NULL;
	uintptr_t best_gap = UINTPTR_MAX;

	atomic_fetch_add_explicit(&q->events[cls], 1, memory_order_relaxed);
	if (invq_lock(q)) {
		/* all first: a take that loaded pending before this bump
		 * either exchanges all after the store, or its done fails. */
		atomic_store(&q->all, 1);
		atomic_fetch_add(&q->pending, 1);
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
}

unsigned gdrc_invq_take(struct gdrc_invq *q, struct gdrc_invq_range *out,
			int *all_p, uint64_t *seen_p)
{
	unsigned n;

	/* The drain is not hook context: it may wait for the lock. */
	while (invq_lock(q))
		sched_yield();
	/* Before all: see the lockless post in gdrc_invq_post. */
	*seen_p = atomic_load(&q->pending);
	n = q->count;
	memcpy(out, q->r, n * sizeof(*out));
	q->count = 0;
	*all_p = atomic_exchange(&q->all, 0);
	invq_unlock(q);
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
