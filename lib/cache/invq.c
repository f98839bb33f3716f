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
		atomic_store_explicit(&q->all, 1, memory_order_relaxed);
		atomic_store_explicit(&q->pending, 1, memory_order_release);
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
	atomic_store_explicit(&q->pending, 1, memory_order_release);
	invq_unlock(q);
}

unsigned gdrc_invq_take(struct gdrc_invq *q, struct gdrc_invq_range *out,
			int *all_p)
{
	unsigned n;

	/* The drain is not hook context: it may wait for the lock. */
	while (invq_lock(q))
		sched_yield();
	n = q->count;
	memcpy(out, q->r, n * sizeof(*out));
	q->count = 0;
	*all_p = atomic_exchange_explicit(&q->all, 0, memory_order_relaxed);
	invq_unlock(q);
	return n;
}

void gdrc_invq_done(struct gdrc_invq *q)
{
	while (invq_lock(q))
		sched_yield();
	if (!q->count && !atomic_load_explicit(&q->all, memory_order_relaxed))
		atomic_store_explicit(&q->pending, 0, memory_order_release);
	invq_unlock(q);
}
