/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * itree.h - intrusive interval tree of half-open ranges [start, end).
 *
 * An AVL tree ordered by (start, node address), each node augmented with
 * the largest end in its subtree, so that "which nodes overlap [a, b)"
 * and "which node covers [a, b)" cost O(log n + k).  Ranges may overlap
 * and may be equal; nodes are told apart by address.
 *
 * The tree never allocates: the caller embeds struct gdrc_itree_node in
 * its own object and owns its memory.  It takes no lock: the caller
 * serialises writers and keeps readers out while a writer runs.
 *
 * Depends on nothing above it (see lib/README.md).
 */
#ifndef GDRC_ITREE_H
#define GDRC_ITREE_H

#include <stddef.h>
#include <stdint.h>

/* start and end come first, so that a user may lay its own copy of the
 * key over them (cache.h: struct gdrc_region); the tree never writes
 * them. */
struct gdrc_itree_node {
	uintptr_t start;               /* first byte; set before insert */
	uintptr_t end;                 /* one past the last; end > start */
	struct gdrc_itree_node *left;  /* lower (start, address) */
	struct gdrc_itree_node *right; /* higher (start, address) */
	uintptr_t max_end;             /* largest end in this subtree */
	int height;                    /* AVL height; leaf = 1 */
};

struct gdrc_itree {
	struct gdrc_itree_node *root;
	size_t count; /* nodes in the tree */
};

/*
 * Called for each node found.  Return 0 to go on, nonzero to stop the
 * walk; that value is then returned by the walk.  The callback must not
 * change the tree.
 */
typedef int (*gdrc_itree_visit_fn)(struct gdrc_itree_node *node, void *arg);

void gdrc_itree_init(struct gdrc_itree *tree);

/* Insert a node whose start < end are set.  O(log n).  Never fails. */
void gdrc_itree_insert(struct gdrc_itree *tree, struct gdrc_itree_node *node);

/* Remove a node that is in the tree.  O(log n). */
void gdrc_itree_remove(struct gdrc_itree *tree, struct gdrc_itree_node *node);

/*
 * Visit every node overlapping [start, end) (node->start < end and
 * node->end > start), in ascending start order.
 * @return 0 if the walk finished, else the callback's nonzero value.
 */
int gdrc_itree_overlap(const struct gdrc_itree *tree, uintptr_t start,
		       uintptr_t end, gdrc_itree_visit_fn fn, void *arg);

/*
 * Visit the nodes covering [start, end) (node->start <= start and
 * node->end >= end) until fn returns nonzero.
 * @return the first covering node for which fn returned nonzero (fn may
 *         be NULL: the first covering node), or NULL.
 */
struct gdrc_itree_node *gdrc_itree_find_cover(const struct gdrc_itree *tree,
					      uintptr_t start, uintptr_t end,
					      gdrc_itree_visit_fn fn,
					      void *arg);

/* Visit every node in ascending order (same return rule as overlap). */
int gdrc_itree_walk(const struct gdrc_itree *tree, gdrc_itree_visit_fn fn,
		    void *arg);

/*
 * Check every invariant: order, AVL balance and heights, max_end, count,
 * start < end.  For tests and GDRC_CHECK=1.
 * @return 0 if the tree is sound, else a negative code naming the first
 *         broken invariant (see itree.c).
 */
int gdrc_itree_check(const struct gdrc_itree *tree);

#endif /* GDRC_ITREE_H */
