// SPDX-License-Identifier: BSD-3-Clause
/*
 * itree.c - intrusive interval tree of half-open ranges [start, end).
 *
 * An AVL tree keyed by (start, node address); the address tie-break makes
 * every key distinct, so equal ranges coexist and a node is found again by
 * its own key.  Invariants, all verified by gdrc_itree_check():
 *   - in-order traversal is strictly ascending by (start, address);
 *   - height = 1 + max(child heights), an absent child counting 0;
 *   - the child heights of every node differ by at most 1;
 *   - max_end = max(end, left->max_end, right->max_end);
 *   - tree->count is the number of reachable nodes;
 *   - start < end in every node.
 *
 * There are no parent pointers: insert and remove recurse down from the
 * root and rebalance on the way back up.  Recursion depth is the tree
 * height, at most ~1.44 * log2(n) (about 30 at a million nodes).
 *
 * Never allocates and takes no lock; the caller owns the nodes and
 * serialises access.  Used by lib/cache to find registrations by range.
 */
#include <stdbool.h>

#include "itree.h"

/*
 * gdrc_itree_check() return codes.  Nodes are checked in pre-order for
 * range and order (so a cycle is reported before it can recurse forever)
 * and in post-order for height, balance and max_end; count comes last.
 */
enum {
	ITREE_BAD_RANGE = -1,	/* a node has start >= end */
	ITREE_BAD_ORDER = -2,	/* (start, address) out of order */
	ITREE_BAD_HEIGHT = -3,	/* height != 1 + max(child heights) */
	ITREE_BAD_BALANCE = -4,	/* child heights differ by more than 1 */
	ITREE_BAD_MAX_END = -5,	/* max_end != max(end, child max_ends) */
	ITREE_BAD_COUNT = -6,	/* tree->count != reachable node count */
};

static inline int itree_height(const struct gdrc_itree_node *n)
{
	return n ? n->height : 0;
}

static inline int itree_max_int(int a, int b)
{
	return a > b ? a : b;
}

static inline uintptr_t itree_max_uptr(uintptr_t a, uintptr_t b)
{
	return a > b ? a : b;
}

/* Strict (start, address) order; the cast makes comparing unrelated
 * objects well defined. */
static inline bool itree_less(const struct gdrc_itree_node *a,
			      const struct gdrc_itree_node *b)
{
	if (a->start != b->start)
		return a->start < b->start;
	return (uintptr_t)a < (uintptr_t)b;
}

static uintptr_t itree_calc_max_end(const struct gdrc_itree_node *n)
{
	uintptr_t m = n->end;

	if (n->left)
		m = itree_max_uptr(m, n->left->max_end);
	if (n->right)
		m = itree_max_uptr(m, n->right->max_end);
	return m;
}

static void itree_update(struct gdrc_itree_node *n)
{
	n->height = 1 + itree_max_int(itree_height(n->left),
				      itree_height(n->right));
	n->max_end = itree_calc_max_end(n);
}

static struct gdrc_itree_node *itree_rotate_left(struct gdrc_itree_node *n)
{
	struct gdrc_itree_node *r = n->right;

	n->right = r->left;
	r->left = n;
	itree_update(n);
	itree_update(r);
	return r;
}

static struct gdrc_itree_node *itree_rotate_right(struct gdrc_itree_node *n)
{
	struct gdrc_itree_node *l = n->left;

	n->left = l->right;
	l->right = n;
	itree_update(n);
	itree_update(l);
	return l;
}

/*
 * Restore balance at n, whose subtrees are sound AVL trees differing in
 * height by at most 2, and refresh its height and max_end.
 */
static struct gdrc_itree_node *itree_rebalance(struct gdrc_itree_node *n)
{
	int bf = itree_height(n->left) - itree_height(n->right);

	if (bf > 1) {
		if (itree_height(n->left->left) < itree_height(n->left->right))
			n->left = itree_rotate_left(n->left);
		return itree_rotate_right(n);
	}
	if (bf < -1) {
		if (itree_height(n->right->right) <
		    itree_height(n->right->left))
			n->right = itree_rotate_right(n->right);
		return itree_rotate_left(n);
	}
	itree_update(n);
	return n;
}

static struct gdrc_itree_node *itree_insert_at(struct gdrc_itree_node *sub,
					       struct gdrc_itree_node *node)
{
	if (!sub)
		return node;
	if (itree_less(node, sub))
		sub->left = itree_insert_at(sub->left, node);
	else
		sub->right = itree_insert_at(sub->right, node);
	return itree_rebalance(sub);
}

/* Unlink the leftmost node of a non-empty subtree into *min. */
static struct gdrc_itree_node *
itree_remove_min(struct gdrc_itree_node *sub, struct gdrc_itree_node **min)
{
	if (!sub->left) {
		*min = sub;
		return sub->right;
	}
	sub->left = itree_remove_min(sub->left, min);
	return itree_rebalance(sub);
}

static struct gdrc_itree_node *itree_remove_at(struct gdrc_itree_node *sub,
					       struct gdrc_itree_node *node,
					       bool *found)
{
	struct gdrc_itree_node *succ, *right;

	if (!sub)
		return NULL;
	if (sub == node) {
		*found = true;
		/* A lone child is a leaf (AVL), already sound. */
		if (!node->left)
			return node->right;
		if (!node->right)
			return node->left;
		/* The nodes are the caller's: move the successor, not keys. */
		right = itree_remove_min(node->right, &succ);
		succ->left = node->left;
		succ->right = right;
		return itree_rebalance(succ);
	}
	if (itree_less(node, sub))
		sub->left = itree_remove_at(sub->left, node, found);
	else
		sub->right = itree_remove_at(sub->right, node, found);
	return itree_rebalance(sub);
}

void gdrc_itree_init(struct gdrc_itree *tree)
{
	tree->root = NULL;
	tree->count = 0;
}

void gdrc_itree_insert(struct gdrc_itree *tree, struct gdrc_itree_node *node)
{
	node->left = NULL;
	node->right = NULL;
	node->height = 1;
	node->max_end = node->end;
	tree->root = itree_insert_at(tree->root, node);
	tree->count++;
}

void gdrc_itree_remove(struct gdrc_itree *tree, struct gdrc_itree_node *node)
{
	bool found = false;

	tree->root = itree_remove_at(tree->root, node, &found);
	/* A node not in the tree leaves it untouched, count included. */
	if (!found)
		return;
	tree->count--;
	node->left = NULL;
	node->right = NULL;
}

static int itree_overlap_sub(struct gdrc_itree_node *n, uintptr_t start,
			     uintptr_t end, gdrc_itree_visit_fn fn, void *arg)
{
	int ret;

	while (n && n->max_end > start) {
		ret = itree_overlap_sub(n->left, start, end, fn, arg);
		if (ret)
			return ret;
		/* n and everything right of it start at or after end. */
		if (n->start >= end)
			return 0;
		if (n->end > start) {
			ret = fn(n, arg);
			if (ret)
				return ret;
		}
		n = n->right;
	}
	return 0;
}

int gdrc_itree_overlap(const struct gdrc_itree *tree, uintptr_t start,
		       uintptr_t end, gdrc_itree_visit_fn fn, void *arg)
{
	return itree_overlap_sub(tree->root, start, end, fn, arg);
}

/*
 * Covers are visited in ascending (start, address) order.  A subtree
 * whose starts are all <= start and whose max_end >= end holds a cover,
 * so with fn NULL this finds the first cover without backtracking.
 */
static struct gdrc_itree_node *itree_cover_sub(struct gdrc_itree_node *n,
					       uintptr_t start, uintptr_t end,
					       gdrc_itree_visit_fn fn,
					       void *arg)
{
	struct gdrc_itree_node *found;

	while (n && n->max_end >= end) {
		if (n->start > start) {
			n = n->left;
			continue;
		}
		found = itree_cover_sub(n->left, start, end, fn, arg);
		if (found)
			return found;
		if (n->end >= end && (!fn || fn(n, arg)))
			return n;
		n = n->right;
	}
	return NULL;
}

struct gdrc_itree_node *gdrc_itree_find_cover(const struct gdrc_itree *tree,
					      uintptr_t start, uintptr_t end,
					      gdrc_itree_visit_fn fn,
					      void *arg)
{
	return itree_cover_sub(tree->root, start, end, fn, arg);
}

static int itree_walk_sub(struct gdrc_itree_node *n, gdrc_itree_visit_fn fn,
			  void *arg)
{
	int ret;

	while (n) {
		ret = itree_walk_sub(n->left, fn, arg);
		if (ret)
			return ret;
		ret = fn(n, arg);
		if (ret)
			return ret;
		n = n->right;
	}
	return 0;
}

int gdrc_itree_walk(const struct gdrc_itree *tree, gdrc_itree_visit_fn fn,
		    void *arg)
{
	return itree_walk_sub(tree->root, fn, arg);
}

/*
 * lo and hi are the nearest ancestors n must sort after and before (NULL:
 * unbounded).  Checking them before descending also catches cycles and
 * shared subtrees, since a node can never sort strictly after itself.
 */
static int itree_check_sub(const struct gdrc_itree_node *n,
			   const struct gdrc_itree_node *lo,
			   const struct gdrc_itree_node *hi, size_t *count)
{
	int ret, hl, hr;

	if (!n)
		return 0;
	if (n->start >= n->end)
		return ITREE_BAD_RANGE;
	if ((lo && !itree_less(lo, n)) || (hi && !itree_less(n, hi)))
		return ITREE_BAD_ORDER;
	(*count)++;

	ret = itree_check_sub(n->left, lo, n, count);
	if (ret)
		return ret;
	ret = itree_check_sub(n->right, n, hi, count);
	if (ret)
		return ret;

	hl = itree_height(n->left);
	hr = itree_height(n->right);
	if (n->height != 1 + itree_max_int(hl, hr))
		return ITREE_BAD_HEIGHT;
	if (hl - hr > 1 || hr - hl > 1)
		return ITREE_BAD_BALANCE;
	if (n->max_end != itree_calc_max_end(n))
		return ITREE_BAD_MAX_END;
	return 0;
}

int gdrc_itree_check(const struct gdrc_itree *tree)
{
	size_t count = 0;
	int ret;

	ret = itree_check_sub(tree->root, NULL, NULL, &count);
	if (ret)
		return ret;
	if (count != tree->count)
		return ITREE_BAD_COUNT;
	return 0;
}
