// SPDX-License-Identifier: BSD-3-Clause
/*
 * handle.c - what a thread holds: its handles on regions, the four
 * entries that remember them for the fast path, and its parked table.
 *
 * A handle pins its region while it lives; its owner counts gets and its
 * own puts in "held" with plain stores, anyone else's put goes to the
 * atomic "remote", and the owner's retire adds HANDLE_RETIRED - held, so
 * that exactly one add (the owner's or a putter's) reaches
 * HANDLE_RETIRED and releases the handle (cache.h has the argument).
 * A put is checked here against what is outstanding (magic, context,
 * state, counts) and refused, changing nothing, when it does not match.
 *
 * The parked table.  When the fast path needs one of its four entries
 * for a new handle, the entry it gives up is not let go of: it is
 * parked, handle and all, in the thread's parked table, in the slot of
 * its region's first page (whatever was in that slot is let go of).  A
 * get the four entries do not serve looks there next
 * (gdrc_cache_get_parked).  So a thread that takes more buffers in turn
 * than four still hits each one without an atomic operation, instead of
 * retiring one handle and making another on every get.  The table
 * starts with GDRC_TLS_PARKED slots and grows when the thread's buffers
 * keep taking each other's slots, up to GDRC_TLS_PARKED_MAX; it is
 * switched off for a while when it is seldom hit (parked_review).  An
 * entry hit twice in a row goes back among the four.  A parked handle
 * is an idle live handle like any other (eviction may take its region).
 * When its region leaves the cache, the thread notices over its next
 * gets that the fast path does not serve: the cache counts its
 * removals, and each such get looks over PARKED_SWEEP slots for entries
 * whose region is INVALID (gdrc_tls_drop_invalid).
 *
 * Thread exit (shard.c's pthread key destructor) retires every
 * remembered and parked handle (gdrc_tls_drop_all); handles of a cache
 * destroyed since are skipped through the registry (cache.c).
 *
 * Locks: handles are atomics and take no lock;
 * gdrc_tls_drop_region_locked runs under cache->lock for writing
 * (asserted), the rest under no cache lock.
 * Callers: region.c (drop on removal), lookup.c and miss.c (serve),
 * inval.c, lru.c (busy), cache.c, shard.c (thread exit).
 */
#include <stdlib.h>

#include "cache_int.h"

/* ====================================================================
 * Handles (see cache.h)
 * ==================================================================== */

/* Drop h's pin and make h reusable: called once per life of h, by the
 * add that brought its remote count to HANDLE_RETIRED (cache.h).  d as
 * for gdrc_region_unpin_defer. */
static void handle_release(struct gdrc_cache *c, struct gdrc_handle *h,
			   struct gdrc_defer *d)
{
	struct gdrc_region *r = h->pub.r; /* reuse keeps the region */

	atomic_store_explicit(&h->state, HANDLE_RELEASED,
			      memory_order_release);
	gdrc_region_unpin_defer(c, r, d);
}

/* Add n to h's remote count; release h if that completed it. */
static void handle_remote_add(struct gdrc_cache *c, struct gdrc_handle *h,
			      uint64_t n, struct gdrc_defer *d)
{
	uint64_t now = atomic_fetch_add_explicit(&h->remote, n,
						 memory_order_acq_rel) + n;

	if (now == HANDLE_RETIRED)
		handle_release(c, h, d);
}

/* The owner lets go of h; its entry is already cleared. */
void gdrc_handle_retire(struct gdrc_cache *c, struct gdrc_handle *h,
			  struct gdrc_defer *d)
{
	uint64_t held = atomic_load_explicit(&h->held, memory_order_relaxed);

	handle_remote_add(c, h, HANDLE_RETIRED - held, d);
}

/*
 * A put of h by anyone but its owner's live entry: one more in remote,
 * unless that would exceed the gets outstanding.  Read remote, then held:
 * every put already in remote is a release that follows its get's count
 * in held, so held is seen at least that far, and a put of a get still
 * outstanding always finds held > remote (before the retire), or remote
 * below HANDLE_RETIRED (after it).  The compare-and-swap keeps two
 * racing extra puts from both passing.
 */
static int handle_put_remote(struct gdrc_cache *c, struct gdrc_handle *h)
{
	uint64_t rem = atomic_load_explicit(&h->remote, memory_order_acquire);

	for (;;) {
		if (rem >= HANDLE_RETIRED)
			return GDRC_PUT_RELEASED;
		if (rem < HANDLE_RETIRED / 2 && /* not retired yet */
		    atomic_load_explicit(&h->held, memory_order_relaxed) <= rem)
			return GDRC_PUT_TOO_MANY;
		if (atomic_compare_exchange_weak_explicit(
			    &h->remote, &rem, rem + 1, memory_order_acq_rel,
			    memory_order_acquire))
			break;
	}
	if (rem + 1 == HANDLE_RETIRED)
		handle_release(c, h, NULL);
	return GDRC_PUT_OK;
}

/* A put of a direct reference: one of those handed out, else nothing. */
static int region_put_direct(struct gdrc_cache *c, struct gdrc_region *r)
{
	return gdrc_region_unref(c, r) ? GDRC_PUT_TOO_MANY : GDRC_PUT_OK;
}

/* Count a put in this thread's shard (as gdrc_tls_count_hit a hit). */
static void count_put(struct gdrc_cache *c)
{
	int shard = gdrc_tls_shard();

	gdrc_shard_inc(&c->shards[shard].puts, shard);
}

int gdrc_cache_put_direct(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	struct gdrc_region *r = gdrc_mr_region(mr);

	if (r->cache != c ||
	    atomic_load_explicit(&c->forked, memory_order_relaxed) ||
	    gdrc_region_unref(c, r))
		return 0;
	count_put(c);
	return 1;
}

int gdrc_cache_put_slow(struct gdrc_cache *c, struct gdrc_mr *mr)
{
	struct gdrc_handle *h;
	int fault;

	if (mr->magic == GDRC_MR_CELL_MAGIC)
		return gdrc_cache_put_cell(c, mr);
	if (!gdrc_mr_live(mr))
		return GDRC_PUT_NOT_MR;
	if (gdrc_mr_region(mr)->cache != c)
		return GDRC_PUT_OTHER_CTX;
	if (atomic_load_explicit(&c->forked, memory_order_relaxed))
		return GDRC_PUT_OK; /* the parent's are never released */
	h = gdrc_mr_handle(mr);
	if (h && atomic_load_explicit(&h->state, memory_order_acquire) !=
			 HANDLE_IN_USE)
		return GDRC_PUT_RELEASED;
	fault = h ? handle_put_remote(c, h) :
		    region_put_direct(c, gdrc_mr_region(mr));
	if (fault)
		return fault;
	count_put(c);
	return GDRC_PUT_OK;
}

/* ====================================================================
 * A thread's entries: the four, and the parked table
 * ==================================================================== */

/* Empty entry e (its handle, if any, is the caller's to deal with). */
static void entry_clear(struct gdrc_tls_entry *e)
{
	e->uid = 0;
	e->h = NULL;
}

/* Clear e, an entry of c, and let go of its handle (d: as for
 * gdrc_handle_retire). */
static void entry_retire(struct gdrc_cache *c, struct gdrc_tls_entry *e,
			 struct gdrc_defer *d)
{
	struct gdrc_handle *h = e->h;

	entry_clear(e);
	gdrc_handle_retire(c, h, d);
}

/* Clear entry e, then let go of its handle if its cache still lives. */
static void tls_entry_drop(struct gdrc_cache *c, struct gdrc_tls_entry *e)
{
	struct gdrc_handle *h = e->h;
	uint64_t uid = e->uid;

	if (!uid)
		return;
	if (c && uid == c->uid) {
		entry_retire(c, e, NULL);
		return;
	}
	entry_clear(e);
	gdrc_cache_retire_foreign(uid, h);
}

/*
 * The parked table is reviewed every GDRC_PARKED_REVIEW lookups in it
 * (parked_review).  A table that is not earning its keep grows, or is
 * switched off for the next PARKED_OFF gets the four entries do not
 * serve (no lookup in it, no handle made to park).  Without that, a
 * pattern over many more buffers than the table holds (random pages of
 * a hundred thousand registrations) would pay for table lines that keep
 * evicting each other from the CPU's cache, and for handles made and
 * retired.  A table that just grew skips PARKED_FILL reviews: its
 * buffers need about two rounds to fill it (a handle is made on a
 * buffer's second index hit).
 */
#define PARKED_OFF 4096
#define PARKED_FILL(tab) (3 * (tab)->size / GDRC_PARKED_REVIEW)
/* A parked entry unused for this many gets the four entries did not
 * serve is cold: a handle may be made to take its slot. */
#define PARKED_COLD(tab) (4 * (tab)->size)
/* Entries one get looks over for invalid ones (gdrc_tls_drop_invalid):
 * a table this small is looked over at once. */
#define PARKED_SWEEP 256

/* The parked entry where an entry for a region starting at start goes. */
static unsigned parked_slot(const struct gdrc_tls *t, uintptr_t start)
{
	return gdrc_tls_parked_slot(start, t->parked->size);
}

static struct gdrc_tls_entry *parked_entry(const struct gdrc_tls *t,
					uintptr_t start)
{
	return &t->parked->e[parked_slot(t, start)];
}

/* A parked table of size entries, empty; NULL without memory. */
static struct gdrc_tls_parked *parked_new(unsigned size)
{
	struct gdrc_tls_parked *tab =
		calloc(1, sizeof(*tab) + size * (sizeof(tab->e[0]) +
						 sizeof(tab->seen[0])));

	if (tab) {
		tab->size = size;
		tab->seen = (const struct gdrc_region **)&tab->e[size];
	}
	return tab;
}

/* This thread's parked table, made now if need be (outside any cache lock);
 * NULL without memory. */
static struct gdrc_tls_parked *parked_table(void)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	if (!t->parked)
		t->parked = parked_new(GDRC_TLS_PARKED);
	return t->parked;
}

/* Is e this thread's entry of c for r? */
static int entry_of(const struct gdrc_tls_entry *e, const struct gdrc_cache *c,
		    const struct gdrc_region *r)
{
	return e->uid == c->uid && e->r == r;
}

/*
 * cache->lock held (write): r leaves the cache; let go of this thread's
 * handle on it now, so that its pinned bytes count as freed at once (the
 * evictor's arithmetic relies on it).  Other threads' handles go when
 * those threads next call, or exit.
 */
void gdrc_tls_drop_region_locked(struct gdrc_cache *c, struct gdrc_region *r,
				 struct gdrc_defer *d)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	gdrc_assert_wrlocked(c);
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (entry_of(&t->e[i], c, r))
			entry_retire(c, &t->e[i], d);
	if (t->parked) {
		struct gdrc_tls_entry *p = parked_entry(t, r->start);

		if (entry_of(p, c, r))
			entry_retire(c, p, d);
	}
}

/* Thread exit: let go of every remembered and parked handle. */
void gdrc_tls_drop_all(void)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_parked *tab = t->parked;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		tls_entry_drop(NULL, &t->e[i]);
	if (!tab)
		return;
	for (unsigned i = 0; i < tab->size; i++)
		tls_entry_drop(NULL, &tab->e[i]);
	t->parked_last = NULL;
	t->parked = NULL;
	free(tab);
}

/* The parked table's summary bit for a cache's entries (0 for none). */
static uint64_t uid_bit(uint64_t uid)
{
	return uid ? 1ULL << (uid % 64) : 0;
}

/* Is e an entry of c whose region left the cache? */
static int entry_invalid(const struct gdrc_tls_entry *e,
			 const struct gdrc_cache *c)
{
	return e->uid == c->uid &&
	       (atomic_load_explicit(&e->r->word, memory_order_acquire) &
		REGION_INVALID);
}

/*
 * Let go of this thread's handles on c's regions that left the cache,
 * remembered and parked, so that they are released now rather than at
 * the next replacement.  Only a removal makes a cached region INVALID,
 * so nothing is looked at while c has removed none since the last look
 * (its removal stamp is the one the look saw; the stamp is read first:
 * a removal it does not show is looked for again next time).  The
 * parked table is looked over only if it may hold entries of c,
 * PARKED_SWEEP entries a call from where the last call stopped: a look
 * at a large table takes several gets, and covers the removals made
 * before it began.  A get for another cache begins a
 * look of its own there (the first one's cache begins anew when it
 * comes back), so that a thread that moved to another context still
 * finishes its looks, and one that alternates lets go of both caches'
 * entries as the looks pass them.
 */
void gdrc_tls_sweep(struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_parked *tab = t->parked;
	uint64_t stamp = atomic_load_explicit(&c->removal_stamp,
					      memory_order_acquire);

	if (t->swept == stamp)
		return;
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (entry_invalid(&t->e[i], c))
			tls_entry_drop(c, &t->e[i]);
	if (tab && (tab->uids & uid_bit(c->uid))) {
		if (tab->sweep_uid != c->uid || !tab->sweep_left) {
			tab->sweep_uid = c->uid;
			tab->sweep_stamp = stamp;
			tab->sweep_left = tab->size;
			tab->sweep_uids = 0;
		}
		for (unsigned n = 0; n < PARKED_SWEEP && tab->sweep_left;
		     n++, tab->sweep_left--) {
			struct gdrc_tls_entry *p = &tab->e[tab->sweep_pos];

			tab->sweep_pos = (tab->sweep_pos + 1) & (tab->size - 1);
			if (entry_invalid(p, c))
				tls_entry_drop(c, p);
			tab->sweep_uids |= uid_bit(p->uid);
		}
		if (tab->sweep_left)
			return;
		tab->uids = tab->sweep_uids;
		stamp = tab->sweep_stamp;
	}
	t->swept = stamp;
}

/*
 * Park remembered entry e (live) with its handle, letting go of the one
 * it displaces; without memory for the table, let go of e's.  The table
 * is made here, on the first replacement, outside any cache lock.
 */
static void tls_park(struct gdrc_cache *c, struct gdrc_tls_entry *e)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *p;

	if (!parked_table()) {
		tls_entry_drop(c, e);
		return;
	}
	p = parked_entry(t, e->start);
	tls_entry_drop(c, p);
	*p = *e;
	p->last = t->parked_clock;
	t->parked->uids |= uid_bit(p->uid);
	t->parked->sweep_uids |= uid_bit(p->uid); /* a look under way */
	entry_clear(e);
}

/* A remembered entry to fill: a free one, else the next in turn, whose
 * handle is parked. */
static struct gdrc_tls_entry *tls_free_entry(struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *e;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (!t->e[i].uid)
			return &t->e[i];
	e = &t->e[t->next++ % GDRC_TLS_ENTRIES];
	tls_park(c, e);
	return e;
}

/* Remember h for this thread's fast path, in a free entry if any. */
static void tls_install(struct gdrc_cache *c, struct gdrc_handle *h)
{
	struct gdrc_tls_entry *e;
	struct gdrc_region *r = h->pub.r;

	/* The hit path counts an entry's hits and puts in its shard, the
	 * thread's own (gdrc_serve made no handle for a thread without). */
	int shard = gdrc_tls_shard();

	gdrc_tls_drop_invalid(c);
	e = tls_free_entry(c);
	e->start = r->start;
	e->end = r->end;
	e->access = r->access |
		    (r->tag_check || r->kern ? GDRC_TLS_CHECKED : 0) |
		    (r->kind != GDRC_PTR_HOST ? GDRC_TLS_CUDA : 0);
	e->h = h;
	e->r = r;
	e->stats = &c->shards[shard];
	e->uid = c->uid;
	/* The look just made may have ended after r was taken out (between
	 * the get that took r and now): then this entry was not in it, and
	 * the hit path must not trust that look for it (gdrc_tls_live).
	 * Read after the entry is in place: a removal this load does not
	 * see counts itself after it. */
	if (atomic_load_explicit(&r->word, memory_order_acquire) &
	    REGION_INVALID)
		gdrc_tls_cur.swept = 0;
}

/* Move parked entry p back among the remembered ones, where the fast
 * path (and a put) finds it first.  @return its handle. */
static struct gdrc_handle *tls_unpark(struct gdrc_cache *c,
				      struct gdrc_tls_entry *p)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry e = *p, *to;

	entry_clear(p);
	to = tls_free_entry(c); /* may park another entry where p was */
	*to = e;
	gdrc_tls_set_mru(t, to);
	return e.h;
}

/*
 * Make this thread's parked table eight times larger (at most
 * GDRC_TLS_PARKED_MAX), its entries moved
 * to their slots there (one that finds its slot taken is let go of);
 * without memory, leave it.  Outside any cache lock.
 */
static void parked_grow(struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_parked *old = t->parked;
	struct gdrc_tls_parked *tab = parked_new(
		old->size * 8 < GDRC_TLS_PARKED_MAX ? old->size * 8 :
						      GDRC_TLS_PARKED_MAX);

	if (!tab)
		return;
	for (unsigned i = 0; i < old->size; i++) {
		struct gdrc_tls_entry *e = &old->e[i], *p;

		if (!e->uid)
			continue;
		p = &tab->e[gdrc_tls_parked_slot(e->start, tab->size)];
		if (p->uid) {
			tls_entry_drop(c, e);
			continue;
		}
		*p = *e;
		tab->uids |= uid_bit(p->uid);
	}
	t->parked = tab;
	t->parked_last = NULL;
	t->swept = 0; /* look over it anew */
	t->parked_fill = PARKED_FILL(tab);
	free(old);
}

/*
 * The review, every GDRC_PARKED_REVIEW lookups in the parked table,
 * unless the table is still filling after it grew.  A table whose
 * lookups hit three times in four is left alone.  Below that, if an
 * eighth of the lookups went on to an index hit of a region other than
 * the one its slot remembers (clashes: the thread takes more buffers in
 * turn than the table holds), the table grows eightfold, up to
 * GDRC_TLS_PARKED_MAX; a table that cannot grow is switched off for the
 * next PARKED_OFF gets, as is one hit less than once in eight.  Why
 * those bounds (docs/design.md, the parked table; measured on the CPU
 * machine, random pages over n registrations): a parked hit reads three
 * lines (entry, handle, region) and an index hit two, so a table pays
 * only when it serves most gets; one that serves some and clashes on the
 * rest makes and retires handles for the clashing buffers on top of
 * their index hits (random pages over 10,000 registrations: 39-47 ns a
 * get with the 8,192-entry table that served about two thirds, 26-32
 * with the grown one that serves all).
 * It never grows under a limit of bytes: a parked handle keeps its
 * registration pinned after an eviction until its thread looks again
 * (an idle thread could hold what another thread's miss needs), so
 * there a thread parks at most GDRC_TLS_PARKED.
 */
static void parked_review(struct gdrc_cache *c, struct gdrc_tls *t)
{
	int clashing = t->parked_clashes >= GDRC_PARKED_REVIEW / 8;

	if (t->parked_fill) {
		t->parked_fill--;
	} else if (t->parked_hits < GDRC_PARKED_REVIEW * 3 / 4) {
		if (clashing && t->parked->size < GDRC_TLS_PARKED_MAX &&
		    c->p.max_bytes == GDRC_LIMIT_NONE &&
		    c->p.gpu_max_bytes == GDRC_LIMIT_NONE)
			parked_grow(c);
		else if (clashing ||
			 t->parked_hits < GDRC_PARKED_REVIEW / 8)
			t->parked_off = PARKED_OFF;
	}
	t->parked_looks = 0;
	t->parked_hits = 0;
	t->parked_clashes = 0;
}

void gdrc_cache_parked_review(struct gdrc_cache *c)
{
	parked_review(c, &gdrc_tls_cur);
}

/*
 * Parked entry p was hit (checked and counted) right after the parked
 * table's last hit, on p too: its second get in a row moves it back among
 * the four, where the fast path finds it.
 */
struct gdrc_mr *gdrc_cache_parked_again(struct gdrc_cache *c,
					struct gdrc_tls_entry *p)
{
	struct gdrc_handle *h = tls_unpark(c, p);

	gdrc_tls_cur.parked_last = NULL;
	gdrc_owned_add(&h->held, 1);
	return &h->pub;
}

/* ====================================================================
 * Serving a region through a handle, and which hits deserve one
 * ==================================================================== */

/* A released handle of r to reuse, claimed; or NULL. */
static struct gdrc_handle *handle_reuse(struct gdrc_region *r)
{
	struct gdrc_handle *h;

	for (h = atomic_load_explicit(&gdrc_region_ext(r)->handles,
				      memory_order_acquire);
	     h; h = h->next) {
		int expect = HANDLE_RELEASED;

		if (atomic_compare_exchange_strong_explicit(
			    &h->state, &expect, HANDLE_CLAIMED,
			    memory_order_acq_rel, memory_order_relaxed))
			return h;
	}
	return NULL;
}

static struct gdrc_handle *handle_alloc(struct gdrc_cache *c)
{
	return gdrc_pool_get(c, &c->handles);
}

/*
 * The ext r's handles hang on: its own.  A plain host registration has
 * none until a thread makes the first handle on it (most are got once
 * or by one thread in turn, and a million of them save 8 bytes each):
 * then a copy of the shared one, with the key as its registered range,
 * replaces it, once, by compare-and-swap.  Readers that loaded the
 * shared one read the same values there.  @return NULL: no memory.
 */
static struct gdrc_region_ext *ext_for_handles(struct gdrc_region *r)
{
	struct gdrc_region_ext *x = atomic_load_explicit(&r->ext,
							 memory_order_acquire);
	struct gdrc_region_ext *own;

	if (x != REGION_EXT_NONE)
		return x;
	own = malloc(sizeof(*own));
	if (!own)
		return NULL;
	*own = gdrc_region_ext_none;
	own->reg_start = r->start;
	own->reg_end = r->end;
	if (atomic_compare_exchange_strong_explicit(&r->ext, &x, own,
						    memory_order_acq_rel,
						    memory_order_acquire))
		return own;
	free(own); /* another thread's came first: x is it */
	return x;
}

/* Hand out r's own mr: the caller's direct reference is the get. */
struct gdrc_mr *gdrc_serve_direct(struct gdrc_region *r)
{
	return (struct gdrc_mr *)&r->self;
}

/*
 * Serve r to this thread through its handle, the caller's pin on r
 * becoming the get: this thread's live handle on r if it has one (the
 * pin is dropped: the handle holds its own), else a released handle of
 * r, else a new one, which keeps the pin.  Without memory for a handle,
 * or in a thread that keeps none (its exit hook ran or could not be
 * set, or it counts in the shared last shard: gdrc_tls_keeps_handles),
 * the pin becomes a direct reference, and r's own mr is served.
 */
struct gdrc_mr *gdrc_serve(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_handle *h = NULL;
	struct gdrc_tls_entry *p;

	gdrc_tls_shard();
	if (!gdrc_tls_keeps_handles(t) || c->p.direct_refs)
		goto direct;
	for (int i = 0; i < GDRC_TLS_ENTRIES && !h; i++)
		if (entry_of(&t->e[i], c, r))
			h = t->e[i].h;
	if (!h && t->parked) {
		p = parked_entry(t, r->start);
		if (entry_of(p, c, r))
			h = tls_unpark(c, p);
	}
	if (h) {
		gdrc_owned_add(&h->held, 1);
		/* The handle's pin keeps r. */
		gdrc_region_unpin(c, r);
		return &h->pub;
	}
	h = handle_reuse(r);
	if (!h) {
		struct gdrc_region_ext *x = ext_for_handles(r);

		h = x ? handle_alloc(c) : NULL;
		if (!h)
			goto direct;
		h->pub.r = r;
		h->pub.magic = GDRC_MR_MAGIC;
		atomic_init(&h->state, HANDLE_CLAIMED);
		atomic_init(&h->uses, 0);
		h->uses_seen = 0;
		h->next = atomic_load_explicit(&x->handles,
					       memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(
			&x->handles, &h->next, h, memory_order_release,
			memory_order_relaxed))
			;
	}
	atomic_store_explicit(&h->held, 1, memory_order_relaxed);
	atomic_store_explicit(&h->remote, 0, memory_order_relaxed);
	atomic_store_explicit(&h->state, HANDLE_IN_USE, memory_order_release);
	tls_install(c, h);
	return &h->pub;
direct:
	gdrc_region_pin_to_ref(r);
	return gdrc_serve_direct(r);
}

/*
 * How an index hit on r should hold it: through a handle, or as a direct
 * reference.  Decided before r is taken, so that the hit costs one
 * atomic operation.
 *
 * A handle pays off when the thread gets r again soon: the fast path
 * then finds it.  For a thread that walks many regions once each (random
 * access over more regions than its four entries), a handle per get
 * would cost several atomics to make and retire, and would push out the
 * handles that do repeat.  So a handle is made only when
 *   - the thread has one on r already (among the four, or parked);
 *   - r is among its last GDRC_TLS_SEEN index hits (a buffer's second
 *     get makes the handle, its third hits the fast path);
 *   - or the parked table saw r hit through the index before, and r's
 *     slot there is free or holds an entry unused for PARKED_COLD gets.
 *     Buffers taken in turn, more than four, then all end up parked and
 *     hit without an atomic from their third round on, and a new handle
 *     never displaces a parked one still in use.
 * Otherwise a direct reference is served.  Only r's address is compared
 * (r is not held yet: its fields may not be read).  entries: how many of
 * the four to look over for a handle on r (all: gdrc_hold_for; none
 * where the caller knows none holds r: gdrc_hold_direct).
 * @return REGION_PIN_ONE (serve with gdrc_serve) or 1 (a reference,
 *         served with gdrc_serve_direct).
 */
static inline __attribute__((always_inline)) uint64_t
hold_for(struct gdrc_cache *c, const struct gdrc_region *r, uintptr_t start,
	 int entries)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	const struct gdrc_tls_entry *p;
	const struct gdrc_region *seen;
	unsigned slot;

	if (!gdrc_tls_keeps_handles(t) || c->p.direct_refs)
		return 1;
	for (int i = 0; i < GDRC_TLS_SEEN; i++)
		if (t->seen[i] == r)
			return REGION_PIN_ONE;
	for (int i = 0; i < entries; i++)
		if (entry_of(&t->e[i], c, r))
			return REGION_PIN_ONE;
	if (!t->parked || t->parked_off)
		return 1;
	/* By the request's first page: r's own fields may not be read yet.
	 * (A region of several pages got from a later one is parked and
	 * seen where its first page says, and served directly here.) */
	slot = parked_slot(t, start);
	p = &t->parked->e[slot];
	seen = t->parked->seen[slot];
	if (entry_of(p, c, r) ||
	    ((!p->uid || t->parked_clock - p->last > PARKED_COLD(t->parked)) &&
	     seen == r))
		return REGION_PIN_ONE;
	/* Its slot remembers another region: this thread's buffers
	 * contend for the table's slots (parked_review). */
	t->parked_clashes += seen && seen != r;
	return 1;
}

uint64_t gdrc_hold_for(struct gdrc_cache *c, const struct gdrc_region *r,
		       uintptr_t start)
{
	return hold_for(c, r, start, GDRC_TLS_ENTRIES);
}

int gdrc_hold_direct(struct gdrc_cache *c, const struct gdrc_region *r,
		     uintptr_t start)
{
	return hold_for(c, r, start, 0) == 1;
}

/* An index hit on r held directly (a direct reference, or a cell),
 * remembered among this thread's index hits (gdrc_hold_for's seen) and
 * in the parked slot of page start: r->start, or for a cell the
 * request's page (the same page: a cell's region is one page, and its
 * line is not read). */
void gdrc_hit_seen(const struct gdrc_region *r, uintptr_t start)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	t->seen[t->seen_next++ % GDRC_TLS_SEEN] = r;
	/* The table is freed by the exit hook, set with the shard; a thread
	 * without one (or whose hook ran, or without a shard of its own)
	 * keeps no handle and no table. */
	gdrc_tls_shard();
	if (gdrc_tls_keeps_handles(t) && !t->parked_off && parked_table())
		t->parked->seen[parked_slot(t, start)] = r;
}

/* Serve a hit held as gdrc_hold_for said (hold); a direct reference is
 * remembered among this thread's index hits (gdrc_hit_seen). */
struct gdrc_mr *gdrc_serve_hit(struct gdrc_cache *c, struct gdrc_region *r,
			       uint64_t hold)
{
	if (hold == REGION_PIN_ONE)
		return gdrc_serve(c, r);
	gdrc_hit_seen(r, r->start);
	return gdrc_serve_direct(r);
}

/* Does a live handle on r have a get outstanding?  A hint: see cache.h. */
int gdrc_handles_busy(struct gdrc_region *r)
{
	struct gdrc_handle *h;

	for (h = atomic_load_explicit(&gdrc_region_ext(r)->handles,
				      memory_order_acquire);
	     h; h = h->next) {
		uint64_t remote;

		if (atomic_load_explicit(&h->state, memory_order_acquire) !=
		    HANDLE_IN_USE)
			continue;
		remote = atomic_load_explicit(&h->remote, memory_order_acquire);
		if (remote & HANDLE_RETIRED ?
			    remote != HANDLE_RETIRED :
			    remote != atomic_load_explicit(
					      &h->held, memory_order_relaxed))
			return 1;
	}
	return 0;
}

/*
 * Was r hit through a handle since the clock hand last asked?  The hits
 * gdrc_cache_get_host and gdrc_cache_parked_host serve count in their
 * handle's uses instead of marking r used (they do not read r's line);
 * each handle's count is compared with what the hand saw last time, and
 * remembered.  cache->lock held for writing (the hand's).
 */
int gdrc_handles_used(struct gdrc_region *r)
{
	struct gdrc_handle *h;
	int used = 0;

	for (h = atomic_load_explicit(&gdrc_region_ext(r)->handles,
				      memory_order_acquire);
	     h; h = h->next) {
		uint32_t uses = atomic_load_explicit(&h->uses,
						     memory_order_relaxed);

		if (uses != h->uses_seen) {
			h->uses_seen = uses;
			used = 1;
		}
	}
	return used;
}

/* A fork child: forget (let go of nothing) this thread's entries of c. */
void gdrc_tls_forget(const struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (t->e[i].uid == c->uid)
			t->e[i].uid = 0;
	for (unsigned i = 0; t->parked && i < t->parked->size; i++)
		if (t->parked->e[i].uid == c->uid)
			t->parked->e[i].uid = 0;
}
