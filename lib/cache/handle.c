// SPDX-License-Identifier: BSD-3-Clause
/*
 * handle.c - what a thread holds: its handles on regions, the entries
 * that remember them for the fast path, and its stats shard.
 *
 * A handle pins its region while it lives; its owner counts gets and its
 * own puts in "held" with plain stores, anyone else's put goes to the
 * atomic "remote", and the owner's retire adds HANDLE_RETIRED - held, so
 * that exactly one add (the owner's or a putter's) reaches
 * HANDLE_RETIRED and releases the handle (cache.h has the argument).
 * A put is checked here against what is outstanding (magic, context,
 * state, counts) and refused, changing nothing, when it does not match.
 *
 * An entry the fast path replaces is not let go of but parked, handle
 * and all, in a table of GDRC_TLS_PARKED entries by its region's first
 * page (what it displaces there is let go of), and the fast path looks
 * there when none of its four entries serves (gdrc_cache_get_parked): a
 * thread that takes more buffers in turn than the four hits each
 * without an atomic operation, instead of retiring one handle and
 * claiming another per get.  The table grows (far_judge) when the
 * thread's buffers keep contending for its slots, up to
 * GDRC_TLS_PARKED_MAX; an entry hit twice in a row goes back among the
 * four.  A parked handle is an idle live handle like any other
 * (eviction may take its region); its region leaving the cache is
 * noticed over the thread's next gets the fast path does not serve, by
 * the cache's count of removals (FAR_SWEEP entries a get).
 *
 * Thread exit (a pthread key destructor, set with the thread's first
 * shard) retires every remembered and parked handle; handles of a cache
 * destroyed since are skipped through the registry (cache.c).
 *
 * Locks: shard_lock (a leaf) guards the shard bitmap; handles are
 * atomics and take no lock; gdrc_tls_drop_region_locked runs under
 * cache->lock for writing (asserted), the rest under no cache lock.
 * Callers: region.c (drop on removal), lookup.c and miss.c (serve),
 * inval.c, lru.c (busy), cache.c.
 */
#include <stdlib.h>

#include "cache_int.h"

/* ====================================================================
 * Per-thread stats shards and the thread-exit hook
 * ==================================================================== */

static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shard_used; /* bitmap of owned shards; under shard_lock */
static pthread_key_t shard_key;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;

static void tls_drop_all(void);

/*
 * Thread exit (pthread key destructor): let go of every handle, free
 * the shard.  Destructors of other keys may still call the library
 * after this one: from now on the thread keeps no handle (nothing would
 * let it go) and counts in the shared shard.
 */
static void shard_release(void *arg)
{
	int shard = (int)(intptr_t)arg - 1;

	gdrc_tls_cur.no_handles = 1;
	gdrc_tls_cur.shard = GDRC_SHARDS;
	tls_drop_all();
	if (shard >= GDRC_SHARDS)
		return;
	pthread_mutex_lock(&shard_lock);
	shard_used &= ~(1ULL << shard);
	pthread_mutex_unlock(&shard_lock);
}

static int shard_key_failed; /* set once, under shard_once */

static void shard_key_create(void)
{
	if (pthread_key_create(&shard_key, shard_release)) {
		shard_used = ~0ULL; /* share one shard */
		shard_key_failed = 1;
	}
}

int gdrc_cache_tls_shard(void)
{
	int shard = GDRC_SHARDS;

	pthread_once(&shard_once, shard_key_create);
	pthread_mutex_lock(&shard_lock);
	if (shard_used != ~0ULL) {
		shard = __builtin_ctzll(~shard_used);
		shard_used |= 1ULL << shard;
	}
	pthread_mutex_unlock(&shard_lock);
	/* Without the exit hook, handles this thread kept would never be
	 * let go: it keeps none. */
	if (shard_key_failed ||
	    pthread_setspecific(shard_key, (void *)(intptr_t)(shard + 1))) {
		if (shard < GDRC_SHARDS) {
			pthread_mutex_lock(&shard_lock);
			shard_used &= ~(1ULL << shard);
			pthread_mutex_unlock(&shard_lock);
		}
		shard = GDRC_SHARDS;
		gdrc_tls_cur.no_handles = 1;
	}
	gdrc_tls_cur.shard = shard;
	return shard;
}

int gdrc_tls_shard(void)
{
	int shard = gdrc_tls_cur.shard;

	return shard >= 0 ? shard : gdrc_cache_tls_shard();
}

void gdrc_tls_count_hit(struct gdrc_cache *c)
{
	int shard = gdrc_tls_shard();

	gdrc_shard_inc(&c->shards[shard].hits, shard);
}

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

/* Every FAR_JUDGE looks at the parked entries, fewer than an eighth of
 * them hits: the table grows, or the next FAR_SKIP gets the four entries
 * do not serve neither look there nor make handles to park (far_judge).
 * A pattern over many more buffers than the table can hold (random pages
 * of a hundred thousand registrations) would otherwise pay for lines of
 * it that its other lines keep out of the CPU's cache.  A table that
 * grew is not judged for FAR_FILL windows: its buffers take it in over
 * about two rounds (a handle is made on a buffer's second index hit). */
#define FAR_JUDGE 256
#define FAR_SKIP 4096
#define FAR_FILL(far) (3 * (far)->size / FAR_JUDGE)
/* A parked entry unused for this many gets the four entries did not
 * serve is cold: a handle may be made to take its slot. */
#define FAR_COLD(far) (4 * (far)->size)
/* Entries one get looks over for invalid ones (gdrc_tls_drop_invalid):
 * a table this small is looked over at once. */
#define FAR_SWEEP 256

/* The slot of a table of size entries for a region starting at start. */
static unsigned slot_of(uintptr_t start, unsigned size)
{
	return (unsigned)(start >> 12) & (size - 1);
}

/* The parked entry where an entry for a region starting at start goes. */
static unsigned far_slot(const struct gdrc_tls *t, uintptr_t start)
{
	return slot_of(start, t->far->size);
}

static struct gdrc_tls_entry *parked_at(const struct gdrc_tls *t,
					uintptr_t start)
{
	return &t->far->parked[far_slot(t, start)];
}

/* A far table of size entries, empty; NULL without memory. */
static struct gdrc_tls_far *far_new(unsigned size)
{
	struct gdrc_tls_far *far =
		calloc(1, sizeof(*far) + size * (sizeof(far->parked[0]) +
						 sizeof(far->seen[0])));

	if (far) {
		far->size = size;
		far->seen = (const struct gdrc_region **)&far->parked[size];
	}
	return far;
}

/* This thread's far table, made now if need be (outside any cache lock);
 * NULL without memory. */
static struct gdrc_tls_far *tls_far(void)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	if (!t->far)
		t->far = far_new(GDRC_TLS_PARKED);
	return t->far;
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
	if (t->far) {
		struct gdrc_tls_entry *p = parked_at(t, r->start);

		if (entry_of(p, c, r))
			entry_retire(c, p, d);
	}
}

/* Thread exit: let go of every remembered and parked handle. */
static void tls_drop_all(void)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_far *far = t->far;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		tls_entry_drop(NULL, &t->e[i]);
	if (!far)
		return;
	for (unsigned i = 0; i < far->size; i++)
		tls_entry_drop(NULL, &far->parked[i]);
	t->parked_last = NULL;
	t->far = NULL;
	free(far);
}

/* The far table's summary bit for a cache's entries (0 for none). */
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
 * (the count is read first: a removal it does not show is looked for
 * again next time).  The parked table is looked over only if it may
 * hold entries of c, FAR_SWEEP entries a call from where the last call
 * stopped: a look at a large table takes several gets, and covers the
 * removals counted when it began.  A get for another cache begins a
 * look of its own there (the first one's cache begins anew when it
 * comes back), so that a thread that moved to another context still
 * finishes its looks, and one that alternates lets go of both caches'
 * entries as the looks pass them.
 */
void gdrc_tls_drop_invalid(struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_far *far = t->far;
	uint64_t gen = atomic_load_explicit(&c->removals,
					    memory_order_acquire);

	if (t->swept_uid == c->uid && t->swept_gen == gen)
		return;
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (entry_invalid(&t->e[i], c))
			tls_entry_drop(c, &t->e[i]);
	if (far && (far->uids & uid_bit(c->uid))) {
		if (far->sweep_uid != c->uid || !far->sweep_left) {
			far->sweep_uid = c->uid;
			far->sweep_gen = gen;
			far->sweep_left = far->size;
			far->sweep_uids = 0;
		}
		for (unsigned n = 0; n < FAR_SWEEP && far->sweep_left;
		     n++, far->sweep_left--) {
			struct gdrc_tls_entry *p = &far->parked[far->sweep_pos];

			far->sweep_pos = (far->sweep_pos + 1) & (far->size - 1);
			if (entry_invalid(p, c))
				tls_entry_drop(c, p);
			far->sweep_uids |= uid_bit(p->uid);
		}
		if (far->sweep_left)
			return;
		far->uids = far->sweep_uids;
		gen = far->sweep_gen;
	}
	t->swept_uid = c->uid;
	t->swept_gen = gen;
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

	if (!tls_far()) {
		tls_entry_drop(c, e);
		return;
	}
	p = parked_at(t, e->start);
	tls_entry_drop(c, p);
	*p = *e;
	p->last = t->far_clock;
	t->far->uids |= uid_bit(p->uid);
	t->far->sweep_uids |= uid_bit(p->uid); /* a look under way */
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

	/* gdrc_cache_put_fast counts a live entry's puts in its shard. */
	gdrc_tls_shard();
	gdrc_tls_drop_invalid(c);
	e = tls_free_entry(c);
	e->start = r->start;
	e->end = r->end;
	e->access = r->access;
	e->h = h;
	e->r = r;
	e->uid = c->uid;
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
	t->mru = (unsigned)(to - t->e);
	return e.h;
}

/*
 * Make this thread's parked table eight times larger, its entries moved
 * to their slots there (one that finds its slot taken is let go of);
 * without memory, leave it.  Outside any cache lock.
 */
static void far_grow(struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_far *old = t->far, *far = far_new(old->size * 8);

	if (!far)
		return;
	for (unsigned i = 0; i < old->size; i++) {
		struct gdrc_tls_entry *e = &old->parked[i], *p;

		if (!e->uid)
			continue;
		p = &far->parked[slot_of(e->start, far->size)];
		if (p->uid) {
			tls_entry_drop(c, e);
			continue;
		}
		*p = *e;
		far->uids |= uid_bit(p->uid);
	}
	t->far = far;
	t->parked_last = NULL;
	t->swept_uid = 0; /* look over it anew */
	t->far_fill = FAR_FILL(far);
	free(old);
}

/*
 * Every FAR_JUDGE looks at the parked table: fewer than an eighth of
 * them hits, and the table is not filling after it grew.  If half of
 * them found the request's slot held for another region, the thread
 * takes more buffers in turn than the table holds: it grows, up to
 * GDRC_TLS_PARKED_MAX.  Else the next FAR_SKIP gets leave it alone.
 * Not under a limit of bytes: a parked handle keeps its registration
 * pinned after an eviction until its thread looks again (an idle thread
 * could hold what another thread's miss needs), so such a context keeps
 * that to GDRC_TLS_PARKED a thread.
 */
static void far_judge(struct gdrc_cache *c, struct gdrc_tls *t)
{
	if (t->far_fill) {
		t->far_fill--;
	} else if (t->far_hits < FAR_JUDGE / 8) {
		if (t->far_taken >= FAR_JUDGE / 2 &&
		    t->far->size < GDRC_TLS_PARKED_MAX &&
		    c->p.max_bytes == GDRC_LIMIT_NONE &&
		    c->p.gpu_max_bytes == GDRC_LIMIT_NONE)
			far_grow(c);
		else
			t->far_skip = FAR_SKIP;
	}
	t->far_tries = 0;
	t->far_hits = 0;
	t->far_taken = 0;
}

/*
 * The fast path's second look (cache.h's gdrc_cache_get_parked, past its
 * early exits), when none of the four entries
 * served: this thread's parked entry for the request's page, with the
 * same checks and the same plain count in its handle; the entry stays
 * where it is, and the put that follows finds it as t->parked_last.
 * Judged by its hits (far_judge).
 */
struct gdrc_mr *gdrc_cache_get_parked_at(struct gdrc_cache *c,
					 uintptr_t start, uintptr_t end,
					 uint32_t access,
					 int (*host_ok)(void))
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_tls_entry *p;
	struct gdrc_handle *h;
	_Atomic uint64_t *count;

	if (++t->far_tries == FAR_JUDGE)
		far_judge(c, t);
	p = parked_at(t, start);
	if (!gdrc_tls_covers(p, c, start, end, access))
		return NULL;
	count = gdrc_cache_hit_ok(c, p->r, t, start, end, host_ok);
	if (!count)
		return NULL;
	t->far_hits++;
	gdrc_cache_hit_count(c, p->r, t, count);
	if (t->parked_last == p) {
		/* Its second get in a row: back among the four, where the
		 * fast path finds it. */
		h = tls_unpark(c, p);
		t->parked_last = NULL;
	} else {
		h = p->h;
		p->last = t->far_clock;
		t->parked_last = p;
	}
	gdrc_owned_add(&h->held, 1);
	return &h->pub;
}

/* A released handle of r to reuse, claimed; or NULL. */
static struct gdrc_handle *handle_reuse(struct gdrc_region *r)
{
	struct gdrc_handle *h;

	for (h = atomic_load_explicit(&r->handles, memory_order_acquire); h;
	     h = h->next) {
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
 * set), the pin becomes a direct reference, and r's own mr is served.
 */
struct gdrc_mr *gdrc_serve(struct gdrc_cache *c, struct gdrc_region *r)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	struct gdrc_handle *h = NULL;
	struct gdrc_tls_entry *p;

	gdrc_tls_shard();
	if (t->no_handles || c->p.direct_refs)
		goto direct;
	for (int i = 0; i < GDRC_TLS_ENTRIES && !h; i++)
		if (entry_of(&t->e[i], c, r))
			h = t->e[i].h;
	if (!h && t->far) {
		p = parked_at(t, r->start);
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
		h = handle_alloc(c);
		if (!h)
			goto direct;
		h->pub.r = r;
		h->pub.magic = GDRC_MR_MAGIC;
		atomic_init(&h->state, HANDLE_CLAIMED);
		h->next = atomic_load_explicit(&r->handles,
					       memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(
			&r->handles, &h->next, h, memory_order_release,
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
 * How an index hit on r should hold it (before it is taken, so that a
 * hit costs one atomic).  A thread that will get r again soon is best
 * served through a handle, which the fast path then finds; one that
 * walks many regions once each (a random access pattern over more
 * regions than its GDRC_TLS_ENTRIES) would make and retire a handle per
 * get, several atomics each, and evict the handles that do repeat.  So
 * a handle is made when the thread has one on r already (remembered or
 * parked), or hit r through the index among its last GDRC_TLS_SEEN index
 * hits (the second get of a buffer reaches the fast path from the third
 * on), or hit r through the index before and r's parking slot is free
 * or holds an entry unused for FAR_COLD gets (buffers taken in turn,
 * more than the fast path remembers, are then all parked and hit
 * without an atomic from their third round on, and a handle made never
 * displaces a parked one in use).  Otherwise a direct
 * reference is served.  Compares r's address only.
 * @return REGION_PIN_ONE (serve with gdrc_serve) or 1 (a reference,
 *         served with gdrc_serve_direct).
 */
uint64_t gdrc_hold_for(struct gdrc_cache *c, const struct gdrc_region *r,
		       uintptr_t start)
{
	struct gdrc_tls *t = &gdrc_tls_cur;
	const struct gdrc_tls_entry *p;
	const struct gdrc_region *seen;
	unsigned slot;

	if (t->no_handles || c->p.direct_refs)
		return 1;
	for (int i = 0; i < GDRC_TLS_SEEN; i++)
		if (t->seen[i] == r)
			return REGION_PIN_ONE;
	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (entry_of(&t->e[i], c, r))
			return REGION_PIN_ONE;
	if (!t->far || t->far_skip)
		return 1;
	/* By the request's first page: r's own fields may not be read yet.
	 * (A region of several pages got from a later one is parked and
	 * seen where its first page says, and served directly here.) */
	slot = far_slot(t, start);
	p = &t->far->parked[slot];
	seen = t->far->seen[slot];
	if (entry_of(p, c, r) ||
	    ((!p->uid || t->far_clock - p->last > FAR_COLD(t->far)) &&
	     seen == r))
		return REGION_PIN_ONE;
	/* Its slot remembers another region: this thread's buffers
	 * contend for the table's slots (far_judge). */
	t->far_taken += seen && seen != r;
	return 1;
}

/* Serve a hit held as gdrc_hold_for said (hold); a direct reference is
 * remembered among this thread's index hits (gdrc_hold_for's seen). */
struct gdrc_mr *gdrc_serve_hit(struct gdrc_cache *c, struct gdrc_region *r,
			       uint64_t hold)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	if (hold == REGION_PIN_ONE)
		return gdrc_serve(c, r);
	t->seen[t->seen_next++ % GDRC_TLS_SEEN] = r;
	/* The table is freed by the exit hook, set with the shard; a thread
	 * without one (or whose hook ran) keeps no handle and no table. */
	gdrc_tls_shard();
	if (!t->no_handles && !t->far_skip && tls_far())
		t->far->seen[far_slot(t, r->start)] = r;
	return gdrc_serve_direct(r);
}

/* Does a live handle on r have a get outstanding?  A hint: see cache.h. */
int gdrc_handles_busy(struct gdrc_region *r)
{
	struct gdrc_handle *h;

	for (h = atomic_load_explicit(&r->handles, memory_order_acquire); h;
	     h = h->next) {
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

/* A fork child: another thread may have held shard_lock at the fork
 * (taking or giving back a shard); its bitmap is one word, whole. */
void gdrc_tls_fork_child(void)
{
	pthread_mutex_init(&shard_lock, NULL);
}

/* A fork child: forget (let go of nothing) this thread's entries of c. */
void gdrc_tls_forget(const struct gdrc_cache *c)
{
	struct gdrc_tls *t = &gdrc_tls_cur;

	for (int i = 0; i < GDRC_TLS_ENTRIES; i++)
		if (t->e[i].uid == c->uid)
			t->e[i].uid = 0;
	for (unsigned i = 0; t->far && i < t->far->size; i++)
		if (t->far->parked[i].uid == c->uid)
			t->far->parked[i].uid = 0;
}
