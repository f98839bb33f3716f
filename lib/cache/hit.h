/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hit.h - the hit path: the code a get or a put runs when this thread
 * already holds a handle on a cached region that covers the request.
 * All of it is inline in the API layer's gdrc_mr_get, gdrc_mr_reget and
 * gdrc_mr_put (api_get.c): no lock, no system call, no atomic
 * read-modify-write, no write to a line another thread writes.
 *
 * Read it from the top down:
 *
 *   gdrc_tls_find           which of this thread's four entries covers a
 *                           get (the one that served the last get first,
 *                           then the ones after it).
 *   gdrc_cache_get_host     a hit through an entry on a plain host region
 *                           (no BUFFER_ID, no kernel word): the checks
 *                           and the count, calling nothing, so that
 *                           gdrc_mr_get needs no frame.
 *   gdrc_cache_get_fast     the same for any region, every check.
 *   gdrc_cache_get_parked   a get the four did not serve: look in this
 *                           thread's parked table (its review and its
 *                           second hit in a row are out of line,
 *                           handle.c); gdrc_cache_parked_host, the same
 *                           for a plain host region, calling nothing.
 *   gdrc_cache_reget        a get served by an mr the caller holds.
 *   gdrc_cache_put_fast     a put of a handle this thread remembers
 *                           (gdrc_cache_put_from: of the last one got or
 *                           parked only; gdrc_cache_put_mru: of the last
 *                           one got, gdrc_mr_put's hit path).
 *   gdrc_cache_put          a put, fast or not.
 *
 * then what they call: the checks a hit makes on its region
 * (gdrc_cache_hit_ok: the hooks, a queued event, INVALID, the kernel's
 * word, the BUFFER_ID), how an entry is matched (gdrc_tls_covers,
 * gdrc_tls_holding), and how a hit is counted (gdrc_entry_hit,
 * gdrc_cache_hit_count).
 * Why it is safe to do without a lock is cache.h's opening comment
 * ("fast path", "Handles"); the types are in types.h.
 *
 * Included by cache.h, at its end (this code reads struct gdrc_cache).
 */
#ifndef GDRC_CACHE_HIT_H
#define GDRC_CACHE_HIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "cache/cache.h"
#include "cache/types.h"
#include "gdrc_int.h"

/* What the calls below use, defined further down. */
static inline __attribute__((always_inline)) int
gdrc_tls_covers(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
		uintptr_t start, uintptr_t end, uint32_t access);
static inline __attribute__((always_inline)) struct gdrc_tls_entry *
gdrc_tls_holding(struct gdrc_tls *t, const struct gdrc_cache *c,
		 const struct gdrc_mr *mr, int four);
static inline __attribute__((always_inline)) int
gdrc_tls_holds(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
	       const struct gdrc_mr *mr);
static inline __attribute__((always_inline)) int
gdrc_entry_put(struct gdrc_tls_entry *e);
static inline __attribute__((always_inline)) int
gdrc_cache_put_from(struct gdrc_cache *c, struct gdrc_mr *mr, int four);
static inline __attribute__((always_inline)) _Atomic uint64_t *
gdrc_cache_hit_ok(struct gdrc_cache *c, struct gdrc_region *r,
		  const struct gdrc_tls *t, uintptr_t start, uintptr_t end,
		  int (*host_ok)(void));
static inline __attribute__((always_inline)) int
gdrc_region_live(const struct gdrc_cache *c, const struct gdrc_region *r);
static inline __attribute__((always_inline)) int
gdrc_tls_live(const struct gdrc_cache *c, const struct gdrc_tls *t,
	      const struct gdrc_region *r);

static inline __attribute__((always_inline)) void
gdrc_entry_hit(struct gdrc_tls_entry *e);
static inline __attribute__((always_inline)) void
gdrc_cache_hit_count(struct gdrc_cache *c, struct gdrc_region *r,
		     const struct gdrc_tls *t, _Atomic uint64_t *count);
static inline __attribute__((always_inline)) void
gdrc_shard_inc(_Atomic uint64_t *v, int shard);
static inline __attribute__((always_inline)) void
gdrc_owned_add(_Atomic uint64_t *v, uint64_t n);

/* ====================================================================
 * The calls
 * ==================================================================== */

/*
 * This thread's entry of c that serves a get of [start, end) with
 * access, among the entries k = from .. to places after the one that
 * served the last get (k = 0 is that one); or NULL.  The one found
 * becomes the first tried.  Walking on from the last one, buffers taken
 * in turn are found at the first entry tried after it.
 * gdrc_mr_get tries k = 0 (inline), then 1 (mr_get_next; k < 2:
 * GDRC_TLS_FIRST), then the parked table, then the other two (a thread
 * whose gets the four do not serve pays for two compares less before
 * its parked lookup).  A fork child never gets here with its parent's
 * entries: they were forgotten.
 */
#define GDRC_TLS_FIRST 2

static inline __attribute__((always_inline)) struct gdrc_tls_entry *
gdrc_tls_find(struct gdrc_tls *t, const struct gdrc_cache *c,
	      uintptr_t start, uintptr_t end, uint32_t access, int from,
	      int to)
{
	struct gdrc_tls_entry *e;
	unsigned off = t->mru;

	if (from == 0) {
		e = gdrc_tls_mru(t);
		if (gdrc_likely(gdrc_tls_covers(e, c, start, end, access)))
			return e;
	}
	for (int k = 1; k <= to; k++) {
		off += sizeof(t->e[0]);
		if (off == sizeof(t->e))
			off = 0;
		if (k < from)
			continue;
		e = (struct gdrc_tls_entry *)((char *)t->e + off);
		if (gdrc_tls_covers(e, c, start, end, access)) {
			t->mru = off;
			return e;
		}
	}
	return NULL;
}

/*
 * gdrc_mr_get's first try: the entry that served the last get, if it
 * serves a get of [start, end) with access (gdrc_tls_covers), else NULL.
 * Each compare is an exit of its own: with one unlikely test over the
 * four, gcc placed the exit right behind the first compare and every
 * hit jumped over it (0.3 ns of the 7.1 ns a hit and put took on the
 * CPU machine).
 */
static inline __attribute__((always_inline)) struct gdrc_tls_entry *
gdrc_tls_find_mru(struct gdrc_tls *t, const struct gdrc_cache *c,
		  uintptr_t start, uintptr_t end, uint32_t access)
{
	struct gdrc_tls_entry *e = gdrc_tls_mru(t);

	if (gdrc_unlikely(e->uid != c->uid))
		return NULL;
	if (gdrc_unlikely(start < e->start))
		return NULL;
	if (gdrc_unlikely(end > e->end))
		return NULL;
	if (gdrc_unlikely(access & ~e->access))
		return NULL;
	return e;
}

/*
 * A hit on a plain host region through entry e (found by gdrc_tls_find):
 * served if e's region needs neither a BUFFER_ID check nor the kernel's
 * word (those are gdrc_cache_get_fast's) and passes the checks every hit
 * makes (gdrc_tls_live, after host_ok: gdrc_cache_hit_ok says why in
 * that order).  host_ok asks whether the C library's frees are seen
 * right now (the hooks intact, none in its window); cuda_ok whether
 * CUDA's are (its hooks intact), asked only for memory CUDA gave or
 * knows (GDRC_TLS_CUDA: pinned host memory, device memory validated by
 * the hooks).  Memory CUDA did not know when it was registered goes
 * back through the C library only (a cuMemHostRegister and unregister
 * since leave it mapped), so its hit skips cuda_ok's loads: 0.25 ns of
 * a 6.5 ns hit and put on the CPU machine.  Both tests of e's flags are
 * one, out of the hit's way.  Nothing here calls a function but host_ok
 * and cuda_ok, inline, so that gdrc_mr_get's hit needs no frame.
 * @return 1: served, the handle in *mr_p, its get counted; 0: not (the
 *         caller goes on to gdrc_cache_get_fast's checks, or slow).
 */
static inline __attribute__((always_inline)) int
gdrc_cache_get_host(struct gdrc_cache *c, struct gdrc_tls_entry *e,
		    int (*host_ok)(void), int (*cuda_ok)(void),
		    struct gdrc_mr **mr_p)
{
	const struct gdrc_tls *t = &gdrc_tls_cur;

	if (gdrc_unlikely(e->access & (GDRC_TLS_CHECKED | GDRC_TLS_CUDA)) &&
	    ((e->access & GDRC_TLS_CHECKED) || !cuda_ok()))
		return 0;
	if (!host_ok() || !gdrc_tls_live(c, t, e->r))
		return 0;
	gdrc_entry_hit(e);
	*mr_p = &e->h->pub;
	return 1;
}

/*
 * A get of [start, end) with access: served if one of this thread's four
 * entries covers it (gdrc_tls_find) and its region passes
 * gdrc_cache_hit_ok, whatever the region (BUFFER_ID checks and the
 * kernel's word included).
 * @return the handle, its get counted; or NULL (go slow).
 */
static inline __attribute__((always_inline)) struct gdrc_mr *
gdrc_cache_get_fast(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		    uint32_t access, int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e = gdrc_tls_find(t, c, start, end, access, 0,
						 GDRC_TLS_ENTRIES - 1);
	_Atomic uint64_t *count;

	if (!e)
		return NULL;
	count = gdrc_cache_hit_ok(c, e->r, t, start, end, host_ok);
	if (!count)
		return NULL;
	gdrc_owned_add(&e->h->held, 1);
	gdrc_cache_hit_count(c, e->r, t, count);
	return &e->h->pub;
}

/* The parked table's rare steps, out of line (handle.c): its review,
 * every GDRC_PARKED_REVIEW lookups (parked_review's comment says what it
 * decides), and the second hit in a row on one entry, which moves it back
 * among the four.  @return the handle served (the get counted). */
void gdrc_cache_parked_review(struct gdrc_cache *c);
struct gdrc_mr *gdrc_cache_parked_again(struct gdrc_cache *c,
					struct gdrc_tls_entry *p);

/*
 * A get that gdrc_cache_get_fast did not serve: look for it in this
 * thread's parked table, in the slot of the request's first page
 * (gdrc_tls_parked_slot).  A thread without a table, and one whose table
 * is switched off for its next parked_off gets (its gets seldom hit
 * there), return at once.  A hit is checked and counted as a fast hit
 * is; its entry stays parked, and the put that follows finds it as
 * t->parked_last.  Inline in the API layer's out-of-line slow path, so
 * that host_ok is a direct call and nothing spills for it; every lookup
 * counts towards the table's review.  @return as gdrc_cache_get_fast.
 */
static inline __attribute__((always_inline)) struct gdrc_mr *
gdrc_cache_get_parked(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		      uint32_t access, int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_parked *tab = t->parked;
	struct gdrc_tls_entry *p;
	_Atomic uint64_t *count;

	if (!tab)
		return NULL;
	t->parked_clock++;
	if (t->parked_off) {
		t->parked_off--;
		return NULL;
	}
	if (gdrc_unlikely(++t->parked_looks == GDRC_PARKED_REVIEW)) {
		gdrc_cache_parked_review(c);
		tab = t->parked; /* it may have grown */
	}
	p = &tab->e[gdrc_tls_parked_slot(start, tab->size)];
	if (!gdrc_tls_covers(p, c, start, end, access))
		return NULL;
	count = gdrc_cache_hit_ok(c, p->r, t, start, end, host_ok);
	if (!count)
		return NULL;
	t->parked_hits++;
	gdrc_cache_hit_count(c, p->r, t, count);
	if (gdrc_unlikely(t->parked_last == p))
		return gdrc_cache_parked_again(c, p);
	p->last = t->parked_clock;
	t->parked_last = p;
	gdrc_owned_add(&p->h->held, 1);
	return &p->h->pub;
}

/* Is this thread's parked table switched off for now, or not made?
 * (Then its gets the four entries do not serve go to the index.) */
static inline __attribute__((always_inline)) int
gdrc_tls_parked_resting(const struct gdrc_tls *t)
{
	return !t->parked || t->parked_off;
}

/*
 * gdrc_cache_get_parked for gdrc_mr_get's frameless path, inline: the
 * same lookup, for a plain host region (gdrc_cache_get_host's checks),
 * calling nothing.  What needs a call (the review that is due, a region
 * with more checks, the second hit in a row on one entry) is left to
 * gdrc_cache_get_parked, before anything here changed: -1.
 * @return 1: served (as gdrc_cache_get_parked serves it, *mr_p set);
 *         0: not parked (go to the index; the lookup counted); -1: ask
 *         gdrc_cache_get_parked.
 */
static inline __attribute__((always_inline)) int
gdrc_cache_parked_host(struct gdrc_cache *c, uintptr_t start, uintptr_t end,
		       uint32_t access, int (*host_ok)(void),
		       int (*cuda_ok)(void), struct gdrc_mr **mr_p)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_parked *tab = t->parked;
	struct gdrc_tls_entry *p;

	if (!tab)
		return 0;
	if (t->parked_off) {
		t->parked_clock++;
		t->parked_off--;
		return 0;
	}
	if (gdrc_unlikely(t->parked_looks + 1 == GDRC_PARKED_REVIEW))
		return -1;
	p = &tab->e[gdrc_tls_parked_slot(start, tab->size)];
	if (gdrc_tls_covers(p, c, start, end, access)) {
		if (gdrc_unlikely((p->access & GDRC_TLS_CHECKED) ||
				  t->parked_last == p))
			return -1;
		t->parked_clock++;
		t->parked_looks++;
		if ((gdrc_unlikely(p->access & GDRC_TLS_CUDA) && !cuda_ok()) ||
		    !host_ok() || !gdrc_tls_live(c, t, p->r))
			return 0;
		t->parked_hits++;
		gdrc_entry_hit(p);
		p->last = t->parked_clock;
		t->parked_last = p;
		*mr_p = &p->h->pub;
		return 1;
	}
	t->parked_clock++;
	t->parked_looks++;
	return 0;
}

/* gdrc_cache_reget's checks for a region that needs more than a host
 * hit's (a BUFFER_ID to query, a kernel word), out of line so that the
 * host case makes no call.  (lookup.c) */
int gdrc_cache_reget_checked(struct gdrc_cache *c, struct gdrc_region *r,
			     const struct gdrc_tls *t, uintptr_t start,
			     uintptr_t end, int (*host_ok)(void));

/*
 * A get of [start, end) with access served by mr, which this thread
 * already holds, without taking another reference: mr must be one of
 * this thread's remembered handles of c, cover the request, and pass a
 * fast hit's checks.  Those are gdrc_cache_hit_ok's, written out here
 * for a host region without a kernel word, because the preload's
 * register-after-deregister runs every instruction of it.  Counted as a
 * hit.
 * @return 1 served; 0 not (the caller puts mr and gets anew).
 */
static inline __attribute__((always_inline)) int
gdrc_cache_reget(struct gdrc_cache *c, const struct gdrc_mr *mr,
		 uintptr_t start, uintptr_t end, uint32_t access,
		 int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e = gdrc_tls_holding(t, c, mr,
						    GDRC_TLS_ENTRIES);
	struct gdrc_region *r;

	if (!e || start < e->start || end > e->end || (access & ~e->access))
		return 0;
	r = e->r;
	if (gdrc_unlikely(r->tag_check || r->kern))
		return gdrc_cache_reget_checked(c, r, t, start, end, host_ok);
	/* gdrc_cache_hit_ok's order, and its proof. */
	if (!host_ok() || !gdrc_region_live(c, r))
		return 0;
	gdrc_cache_hit_count(c, r, t, &c->shards[t->shard].hits);
	return 1;
}

/*
 * A put of mr, which the caller says came from c.  Done here only when
 * mr is a handle in one of this thread's live entries of c: then it is
 * two plain stores, and mr's region is not read.  Everything else is
 * left to gdrc_cache_put_slow: a direct reference, another thread's
 * handle, a retired one, the wrong cache, a fork child (whose entries
 * were forgotten).  The entry is matched by comparing its handle's
 * address with mr, so nothing of mr is read before the match, and a
 * free entry (h NULL) never matches.
 * A put with no get outstanding (held no more than remote: the owner's
 * count is exact, and remote counts only other threads' puts of gets
 * still outstanding) is a double put: left to the slow path too, which
 * finds it again and changes nothing.
 * @return 1 put; 0 not done here.
 */
static inline __attribute__((always_inline)) int
gdrc_cache_put_fast(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	return gdrc_cache_put_from(c, mr, GDRC_TLS_ENTRIES);
}

/* The same, looking at the entries gdrc_tls_holding tries first and
 * then at most the first four (0: none) of the thread's entries:
 * gdrc_mr_put looks at none of the four before it checks whether mr is
 * a direct reference. */
static inline __attribute__((always_inline)) int
gdrc_cache_put_from(struct gdrc_cache *c, struct gdrc_mr *mr, int four)
{
	struct gdrc_tls_entry *e = gdrc_tls_holding(&gdrc_tls_cur, c, mr,
						    four);

	return e && gdrc_entry_put(e);
}

/*
 * gdrc_mr_put's hit path: a put of the handle in the entry the last
 * fast get served, or 0.  gdrc_tls_holds's two compares are two exits,
 * so that a put that matches runs straight through (gdrc_tls_find_mru
 * says why).
 */
static inline __attribute__((always_inline)) int
gdrc_cache_put_mru(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	struct gdrc_tls_entry *e = gdrc_tls_mru(&gdrc_tls_cur);

	if (gdrc_unlikely((const struct gdrc_mr *)e->h != mr))
		return 0;
	if (gdrc_unlikely(e->uid != c->uid))
		return 0;
	return gdrc_entry_put(e);
}

/* gdrc_mr_put's second try: the handle the last parked hit served (the
 * put after a parked hit), or 0. */
static inline __attribute__((always_inline)) int
gdrc_cache_put_parked(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	struct gdrc_tls_entry *e = gdrc_tls_cur.parked_last;

	if (!e || !gdrc_tls_holds(e, c, mr))
		return 0;
	return gdrc_entry_put(e);
}

/*
 * The put of e's handle, by its owner: taken back with two plain stores
 * (held, and the count in e's shard), unless no get is outstanding
 * (held no more than remote: a double put, left to the slow path).
 */
static inline __attribute__((always_inline)) int
gdrc_entry_put(struct gdrc_tls_entry *e)
{
	struct gdrc_handle *h = e->h;
	uint64_t held = atomic_load_explicit(&h->held, memory_order_relaxed);

	if (gdrc_unlikely(held <= atomic_load_explicit(&h->remote,
						       memory_order_relaxed)))
		return 0;
	gdrc_owned_add(&e->stats->puts, 1);
	atomic_store_explicit(&h->held, held - 1, memory_order_relaxed);
	return 1;
}

/* A put, fast or not.  @return GDRC_PUT_OK, or the fault found. */
static inline int gdrc_cache_put(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	return gdrc_cache_put_fast(c, mr) ? GDRC_PUT_OK :
					    gdrc_cache_put_slow(c, mr);
}

/* ====================================================================
 * What a hit checks on its region
 * ==================================================================== */

/* Does GPU region r still hold its allocation?  (See tag_query.) */
static inline int gdrc_region_tag_ok(const struct gdrc_cache *c,
				     const struct gdrc_region *r)
{
	unsigned long long tag = 0;

	return c->p.tag_query(&tag, c->p.tag_what, r->start) == 0 &&
	       tag == gdrc_region_ext(r)->buffer_id;
}

/* Did the kernel see any of r's further GPU pins (kpins) revoked? */
int gdrc_cache_kmore_stale(const struct gdrc_cache *c,
			   const struct gdrc_region *r);

/* Did the kernel see r's memory go?  One word per pin: a registration
 * over several VMM mappings holds one pin per mapping (nvidia_p2p pins
 * one allocation), and any of them revoked ends it.  The words are in
 * r's ext: a region the kernel channel tells about has one. */
static inline int gdrc_region_kstale(const struct gdrc_cache *c,
				     const struct gdrc_region *r)
{
	const struct gdrc_region_ext *x;

	if (!r->kern)
		return 0;
	x = gdrc_region_ext(r);
	return c->p.kgen[x->kslot] ||
	       (gdrc_unlikely(x->kmore) && gdrc_cache_kmore_stale(c, r));
}

/* Do the segments of r (REGION_TAG_MANY) that [start, end) touches
 * still hold their mappings?  A binary search for the first, then
 * gdrc_segs_check. */
int gdrc_cache_segs_ok(const struct gdrc_cache *c,
		       const struct gdrc_region *r, uintptr_t start,
		       uintptr_t end);

/*
 * Query the BUFFER_ID of segment g and each after it until one ends at
 * or past end.  The request lies inside its region's key, so inside its
 * segments: the walk never leaves the array, and needs no count.
 */
static inline int gdrc_segs_check(const struct gdrc_cache *c,
				  const struct gdrc_seg *g, uintptr_t end)
{
	for (;;) {
		unsigned long long tag = 0;

		if (c->p.tag_query(&tag, c->p.tag_what, g->start) ||
		    tag != g->buffer_id)
			return 0;
		if (g->end >= end)
			return 1;
		g++;
	}
}

/* The same for REGION_TAG_SEGS, inline: the first segment touched is
 * found by a walk from the first. */
static inline int gdrc_region_segs_walk(const struct gdrc_cache *c,
					const struct gdrc_region *r,
					uintptr_t start, uintptr_t end)
{
	const struct gdrc_seg *g = gdrc_region_ext(r)->segs;

	while (g->end <= start)
		g++;
	return gdrc_segs_check(c, g, end);
}

/* Does r still hold its memory where [start, end) touches it? */
static inline int gdrc_region_tags_ok(const struct gdrc_cache *c,
				      const struct gdrc_region *r,
				      uintptr_t start, uintptr_t end)
{
	if (gdrc_likely(r->tag_check == REGION_TAG_ONE))
		return gdrc_region_tag_ok(c, r);
	if (r->tag_check == REGION_TAG_SEGS)
		return gdrc_region_segs_walk(c, r, start, end);
	return gdrc_cache_segs_ok(c, r, start, end);
}

/*
 * No event queued, then r not INVALID: the two words every fast hit
 * reads after the hooks (gdrc_cache_hit_ok says why in this order).  Our
 * pin keeps r registered; INVALID says it left the cache, and the slow
 * path lets go of the handle.
 */
static inline __attribute__((always_inline)) int
gdrc_region_live(const struct gdrc_cache *c, const struct gdrc_region *r)
{
	return !atomic_load_explicit(&c->invq.pending, memory_order_acquire) &&
	       !(atomic_load_explicit(&r->word, memory_order_acquire) &
		 REGION_INVALID);
}

/*
 * gdrc_region_live for a region of one of this thread's entries, most
 * often without reading the region: no event queued, then no region of
 * c removed since this thread last looked over its entries for removed
 * ones (gdrc_tls_drop_invalid: c's removal stamp then, which no other
 * cache ever shows, so one compare says both "this cache" and "nothing
 * removed since").  That look let go of every entry whose region had
 * been taken out when it began; an entry made since holds a region its
 * get took, which tls_install checks once the entry is in place (found
 * INVALID, the look is not trusted: swept cleared); a region taken out
 * later gave c a new stamp after marking itself INVALID
 * (gdrc_region_take_out), so the stamp seen here differs.  Then, and
 * only then, r's word is read, as gdrc_region_live does.  The order
 * with the queue is the one gdrc_cache_hit_ok proves: a drain takes
 * regions out before it clears pending.  (A region taken out between
 * its get and its entry, with a look ending in between, was served
 * stale before tls_install checked: test_stress_remap_uffd under TSan,
 * 2 runs in 67.)
 */
static inline __attribute__((always_inline)) int
gdrc_tls_live(const struct gdrc_cache *c, const struct gdrc_tls *t,
	      const struct gdrc_region *r)
{
	if (atomic_load_explicit(&c->invq.pending, memory_order_acquire))
		return 0;
	if (gdrc_likely(t->swept == atomic_load_explicit(
					    &c->removal_stamp,
					    memory_order_acquire)))
		return 1;
	return !(atomic_load_explicit(&r->word, memory_order_acquire) &
		 REGION_INVALID);
}

/*
 * A hit through this thread's entry e, counted without touching its
 * region's line: one more get held, one more use of its handle (the
 * clock hand reads a handle's uses as its region's used mark: lru.c),
 * one more hit in e's shard (e->stats: an address in e, not computed
 * from the thread's shard number, which cost 0.27 ns of a 6.6 ns hit
 * and put).
 */
static inline __attribute__((always_inline)) void
gdrc_entry_hit(struct gdrc_tls_entry *e)
{
	struct gdrc_handle *h = e->h;

	gdrc_owned_add(&h->held, 1);
	atomic_store_explicit(&h->uses,
			      atomic_load_explicit(&h->uses,
						   memory_order_relaxed) + 1,
			      memory_order_relaxed);
	gdrc_owned_add(&e->stats->hits, 1);
}

/*
 * The checks of a fast hit on r for [start, end), by this thread (whose
 * shard t->shard is set).
 * host_ok: whether the free interception can be trusted right now (the
 * hooks intact and no unmap between its system call and its event); it
 * is asked only for a region without a tag check.  A tag-checked region
 * does not need it: the BUFFER_ID of each segment the request touches
 * answers for that memory whatever a hook has or has not posted yet.
 * It still goes slow while an event is queued, so that what the CUDA
 * hooks saw (a segment the request does not touch unmapped, say)
 * removes it in every GDRC_VALIDATE mode; that is one load of a line
 * this get reads anyway.
 * @return the shard counter to count the hit in, or NULL (go slow).
 */
static inline __attribute__((always_inline)) _Atomic uint64_t *
gdrc_cache_hit_ok(struct gdrc_cache *c, struct gdrc_region *r,
		  const struct gdrc_tls *t, uintptr_t start, uintptr_t end,
		  int (*host_ok)(void))
{
	struct gdrc_shard *s;

	/* Without a tag check, trust the hooks: no unmap in its window,
	 * then no event queued.  The order is the proof.  An unmap counts
	 * itself busy until its event is queued, so seeing it idle first
	 * means pending shows its event; a drain marks r INVALID before it
	 * clears pending, so seeing pending clear means the word below
	 * shows the mark.  Read the other way round, an event queued (or a
	 * drain finished) between two loads served a registration of
	 * memory that was already unmapped. */
	if ((!r->tag_check && !host_ok()) || !gdrc_region_live(c, r))
		return NULL;
	if (gdrc_region_kstale(c, r))
		return NULL; /* the kernel saw it go: slow path */
	s = &c->shards[t->shard];
	if (!r->tag_check)
		return &s->hits;
	if (!gdrc_region_tags_ok(c, r, start, end)) {
		gdrc_shard_inc(&s->tag_checks, t->shard);
		return NULL; /* the slow path drops it */
	}
	return &s->tag_hits;
}

/* ====================================================================
 * How an entry is matched
 * ==================================================================== */

/* Does entry e serve a get of [start, end) with access from c? */
static inline __attribute__((always_inline)) int
gdrc_tls_covers(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
		uintptr_t start, uintptr_t end, uint32_t access)
{
	return e->uid == c->uid && start >= e->start && end <= e->end &&
	       !(access & ~e->access);
}

/* Is e this thread's entry of c holding handle mr?  Compared with mr
 * itself (&h->pub): nothing of mr is read, and a free entry (h NULL) or
 * a direct reference never matches. */
static inline __attribute__((always_inline)) int
gdrc_tls_holds(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
	       const struct gdrc_mr *mr)
{
	return (const struct gdrc_mr *)e->h == mr && e->uid == c->uid;
}

/*
 * This thread's entry of c for handle mr, or NULL.  Tried in the order a
 * put most likely finds it: the entry the last fast get served (a put or
 * reget follows its get), then the parked entry the last parked hit
 * served (the get before a put that the first misses was most often a
 * parked hit: buffers taken in turn, more than four), then the first
 * four entries (all of them, but for gdrc_cache_put_from).
 */
static inline __attribute__((always_inline)) struct gdrc_tls_entry *
gdrc_tls_holding(struct gdrc_tls *t, const struct gdrc_cache *c,
		 const struct gdrc_mr *mr, int four)
{
	struct gdrc_tls_entry *e = gdrc_tls_mru(t);

	if (gdrc_likely(gdrc_tls_holds(e, c, mr)))
		return e;
	e = t->parked_last; /* NULL, or in this thread's parked table */
	if (e && gdrc_tls_holds(e, c, mr))
		return e;
	for (int i = 0; i < four; i++)
		if (gdrc_tls_holds(&t->e[i], c, mr))
			return &t->e[i];
	return NULL;
}

/* ====================================================================
 * How a hit is counted
 * ==================================================================== */

/* Mark r used (a store only when the clock hand cleared it): what every
 * hit, fast or through the index, writes for the replacement (lru.c). */
static inline __attribute__((always_inline)) void
gdrc_region_used(struct gdrc_region *r)
{
	if (!atomic_load_explicit(&r->used, memory_order_relaxed))
		atomic_store_explicit(&r->used, 1, memory_order_relaxed);
}

/* A hit on r: its used mark, and the counter. */
static inline __attribute__((always_inline)) void
gdrc_cache_hit_count(struct gdrc_cache *c, struct gdrc_region *r,
		     const struct gdrc_tls *t, _Atomic uint64_t *count)
{
	gdrc_region_used(r);
	gdrc_shard_inc(count, t->shard);
}

/* One more in counter v of shard: a plain increment in the shard this
 * thread owns, an atomic one in the shared last shard. */
static inline __attribute__((always_inline)) void
gdrc_shard_inc(_Atomic uint64_t *v, int shard)
{
	if (gdrc_likely(shard < GDRC_SHARDS))
		atomic_store_explicit(v,
				      atomic_load_explicit(
					      v, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(v, 1, memory_order_relaxed);
}

/* A plain increment of a counter only this thread writes. */
static inline __attribute__((always_inline)) void
gdrc_owned_add(_Atomic uint64_t *v, uint64_t n)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) +
				      n, memory_order_relaxed);
}

#endif /* GDRC_CACHE_HIT_H */
