// SPDX-License-Identifier: BSD-3-Clause
/*
 * cell.c - hazard cells: how an index hit holds a plain host region
 * without writing to it.
 *
 * From about 40,000 registrations on, the lines a get touches no longer
 * stay in the last-level cache, and a hit that reads the index's bucket
 * and then takes a reference in the region's word waits for two lines
 * in turn.  A hit on a plain host region (one granule, no tag check, no
 * kernel word: the index's entry says all a hit checks, index.c) waits
 * for the bucket only: it names the region in one of its thread's cells
 * (struct gdrc_cell, types.h) and hands the cell out as its mr.
 *
 * Why that holds the region (the hit: gdrc_cache_get_cell, lookup.c;
 * the removal: gdrc_region_take_out, region.c):
 *   the hit    reads its bucket's sequence (even), the entry, stores the
 *              region in a free cell (sequentially consistent), and reads
 *              the cache's page hash and the sequence again: a table
 *              replaced since (a removal changes only the current one),
 *              or the sequence changed, it gives the cell back and
 *              takes the ordinary path;
 *   a removal  changes the bucket (under cache->lock for writing), then
 *              after a sequentially consistent fence looks at every cell
 *              (gdrc_cells_convert): a cell naming the region gets a
 *              direct reference in the region's word, and is marked
 *              GDRC_CELL_CONVERTED by a compare-and-swap (undone if the
 *              cell was emptied first).
 * Either the hit's second read sees the removal's change, or the
 * removal's look sees the hit's cell (the two stores and two loads are
 * ordered by the sequentially consistent store and fence: the Dekker
 * pattern).  So a region a cell names is cached, or holds a reference
 * for the cell, until the cell's put: gdrc_cache_put_cell empties the
 * cell by an exchange, and puts the direct reference if it finds the
 * mark.
 *
 * Blocks of cells are never freed (a removal may be looking at one while
 * its thread exits): a thread takes one on its first cell and gives it
 * back at exit (gdrc_cells_release, from the exit hook), for the next
 * thread; a cell another thread still holds stays held until its put.  A
 * thread without the exit hook takes none.
 *
 * A cache that goes (gdrc_cells_forget) empties the cells still naming
 * its regions: gets never put, whose puts its dead context refuses.
 *
 * Locks: cells_lock, a leaf, guards the free list and the list's head.
 * Nothing here blocks a hit.  Callers: lookup.c (take, drop), the API
 * layer through cache.h (put), region.c (convert), lru.c and cache.c
 * (whether a cell holds a region), shard.c (release at thread exit).
 */
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"

static pthread_mutex_t cells_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gdrc_cells *cells_free;          /* under cells_lock */
static struct gdrc_cells *_Atomic cells_all;   /* every block */

/* This thread's block, taken now if it has none.  NULL: no memory. */
static struct gdrc_cells *cells_mine(void)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_cells *b;

	if (t->cells)
		return t->cells;
	pthread_mutex_lock(&cells_lock);
	b = cells_free;
	if (b) {
		cells_free = b->free_next;
	} else {
		void *p;

		/* Line-aligned: a cell is 32 bytes, never across two. */
		b = posix_memalign(&p, GDRC_CACHELINE, sizeof(*b)) ? NULL : p;
		if (b) {
			memset(b, 0, sizeof(*b));
			for (int k = 0; k < GDRC_CELLS; k++)
				b->c[k].pub.magic = GDRC_MR_CELL_MAGIC;
			b->next = atomic_load_explicit(&cells_all,
						       memory_order_relaxed);
			/* Release: a removal that finds b sees its magic
			 * and its link. */
			atomic_store_explicit(&cells_all, b,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&cells_lock);
	t->cells = b;
	return b;
}

static struct gdrc_region *cell_load(const struct gdrc_cell *cell)
{
	return __atomic_load_n(&cell->pub.r, __ATOMIC_ACQUIRE);
}

/* Every cell of every block, in cell (struct gdrc_cell *), with b and k
 * its block and place: blocks are never unlinked, so no lock. */
#define cells_for_each(b, k, cell)                                           \
	for (b = atomic_load_explicit(&cells_all, memory_order_acquire); b;  \
	     b = b->next)                                                    \
		for (k = 0; k < GDRC_CELLS && ((cell) = &b->c[k]); k++)

struct gdrc_cell *gdrc_cell_take(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_cells *b = gdrc_tls_cur.cells;
	unsigned k;

	if (gdrc_unlikely(!b) &&
	    (gdrc_tls_cur.no_handles || !(b = cells_mine())))
		return NULL;
	/* In turn from the one after the last taken, so that a cell just
	 * put is the last to be taken again: a stale second put of it
	 * finds it empty (a misuse, refused) for as long as possible. */
	k = b->last;
	for (unsigned i = 0; i < GDRC_CELLS; i++) {
		struct gdrc_cell *cell;

		k = (k + 1) % GDRC_CELLS;
		cell = &b->c[k];

		/* Only this thread fills its cells: one seen empty stays
		 * empty until this store. */
		if (__atomic_load_n(&cell->pub.r, __ATOMIC_RELAXED))
			continue;
		b->last = k;
		cell->cache = c;
		__atomic_store_n(&cell->pub.r, r, __ATOMIC_SEQ_CST);
		return cell;
	}
	return NULL;
}

/* Empty cell and put what it held; @return 0, or -1: it was empty. */
static int cell_empty(struct gdrc_cache *c, struct gdrc_cell *cell)
{
	uintptr_t old = (uintptr_t)__atomic_exchange_n(&cell->pub.r, NULL,
						       __ATOMIC_ACQ_REL);

	if (!old)
		return -1;
	if (old & GDRC_CELL_CONVERTED)
		gdrc_region_unref(c, gdrc_cell_region(old));
	return 0;
}

void gdrc_cell_drop(struct gdrc_cache *c, struct gdrc_cell *cell)
{
	cell_empty(c, cell);
}

int gdrc_cache_put_cell(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	struct gdrc_cell *cell = gdrc_container_of(mr, struct gdrc_cell, pub);
	int shard;

	if (!__atomic_load_n(&mr->r, __ATOMIC_ACQUIRE))
		return GDRC_PUT_TOO_MANY;
	if (cell->cache != c)
		return GDRC_PUT_OTHER_CTX;
	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_PUT_OK; /* the parent's are never released */
	if (cell_empty(c, cell))
		return GDRC_PUT_TOO_MANY; /* another put emptied it first */
	shard = gdrc_tls_shard();
	gdrc_shard_inc(&c->shards[shard].puts, shard);
	return GDRC_PUT_OK;
}

void gdrc_cells_convert(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_cells *b;
	struct gdrc_cell *cell;
	int k;

	gdrc_assert_wrlocked(c);
	if (!atomic_load_explicit(&cells_all, memory_order_relaxed))
		return; /* no thread ever took a cell */
	/* After r's bucket changed: a hit that did not see the change
	 * stored its cell before this fence (cell.c's opening comment). */
	atomic_thread_fence(memory_order_seq_cst);
	cells_for_each(b, k, cell) {
		struct gdrc_region *want = r;

		if (cell_load(cell) != r)
			continue;
		/* The reference first: the cell's put may come as soon as
		 * the mark lands.  r keeps the index's pin until the caller
		 * drops it, so the undo never releases it. */
		atomic_fetch_add_explicit(&r->word, 1, memory_order_relaxed);
		if (!__atomic_compare_exchange_n(
			    &cell->pub.r, &want,
			    (struct gdrc_region *)((uintptr_t)r |
						   GDRC_CELL_CONVERTED),
			    0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			atomic_fetch_sub_explicit(&r->word, 1,
						  memory_order_relaxed);
	}
}

int gdrc_cells_hold(const struct gdrc_region *r)
{
	struct gdrc_cells *b;
	struct gdrc_cell *cell;
	int k;

	cells_for_each(b, k, cell)
		if (cell_load(cell) == r)
			return 1;
	return 0;
}

void gdrc_cells_forget(struct gdrc_cache *c)
{
	struct gdrc_cells *b;
	struct gdrc_cell *cell;
	int k;

	cells_for_each(b, k, cell)
		if (cell->cache == c && cell_load(cell))
			__atomic_store_n(&cell->pub.r, NULL, __ATOMIC_RELEASE);
}

void gdrc_cells_release(void)
{
	struct gdrc_cells *b = gdrc_tls_cur.cells;

	if (!b)
		return;
	gdrc_tls_cur.cells = NULL;
	pthread_mutex_lock(&cells_lock);
	b->free_next = cells_free;
	cells_free = b;
	pthread_mutex_unlock(&cells_lock);
}

void gdrc_cells_fork_child(void)
{
	pthread_mutex_init(&cells_lock, NULL);
}
