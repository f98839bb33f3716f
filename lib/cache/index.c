// SPDX-License-Identifier: BSD-3-Clause
/*
 * index.c - which cached regions cover or overlap a range.
 *
 * Today an interval tree (itree/: AVL keyed by start, each node holding
 * its subtree's largest end), which keeps every guarantee the rest of
 * the cache relies on: regions may overlap (a GPU key rounded to 64 KiB
 * reaches into a neighbour's page; rights differ), a cover query
 * returns the first region covering the range that the caller's filter
 * accepts, and an overlap walk visits every region whose key overlaps
 * the range, in ascending start order.  The rest of the cache sees only
 * the functions below, so the structure can change behind them.
 *
 * Locks: cache->lock.  Changes need it for writing (asserted), queries
 * either mode (asserted); a walk's callback must not change the index.
 * Callers: region.c (insert, remove), lookup.c (cover), miss.c and
 * inval.c (overlap), cache.c (init, check).
 */
#include "cache_int.h"

struct visit {
	gdrc_region_fn fn;
	void *arg;
};

static struct gdrc_region *node_region(struct gdrc_itree_node *node)
{
	return gdrc_container_of(node, struct gdrc_region, node);
}

static int visit_fn(struct gdrc_itree_node *node, void *arg)
{
	const struct visit *v = arg;

	return v->fn(node_region(node), v->arg);
}

void gdrc_index_init(struct gdrc_cache *c)
{
	gdrc_itree_init(&c->tree);
}

void gdrc_index_insert(struct gdrc_cache *c, struct gdrc_region *r)
{
	gdrc_assert_wrlocked(c);
	r->node.start = r->start;
	r->node.end = r->end;
	gdrc_itree_insert(&c->tree, &r->node);
}

void gdrc_index_remove(struct gdrc_cache *c, struct gdrc_region *r)
{
	gdrc_assert_wrlocked(c);
	gdrc_itree_remove(&c->tree, &r->node);
}

int gdrc_index_overlap(const struct gdrc_cache *c, uintptr_t start,
		       uintptr_t end, gdrc_region_fn fn, void *arg)
{
	struct visit v = { .fn = fn, .arg = arg };

	gdrc_assert_locked(c);
	return gdrc_itree_overlap(&c->tree, start, end, visit_fn, &v);
}

struct gdrc_region *gdrc_index_find_cover(const struct gdrc_cache *c,
					  uintptr_t start, uintptr_t end,
					  gdrc_region_fn fn, void *arg)
{
	struct visit v = { .fn = fn, .arg = arg };
	struct gdrc_itree_node *node;

	gdrc_assert_locked(c);
	node = gdrc_itree_find_cover(&c->tree, start, end, fn ? visit_fn : NULL,
				     &v);
	return node ? node_region(node) : NULL;
}

/* Codes: -1 the tree unsound, -2 its count differs from nregions. */
int gdrc_index_check(const struct gdrc_cache *c)
{
	if (gdrc_itree_check(&c->tree))
		return -1;
	if (c->tree.count != c->nregions)
		return -2;
	return 0;
}
