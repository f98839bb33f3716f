// SPDX-License-Identifier: BSD-3-Clause
/*
 * shard.c - a thread's stats shard and its exit hook.
 *
 * Each thread counts its fast hits and puts in a shard of the cache's
 * counters that it alone writes (struct gdrc_shard, types.h): the first
 * GDRC_SHARDS threads alive at once get one each, the others share the
 * last one, counted atomically.  A thread in the shared shard keeps no
 * handles (gdrc_tls_keeps_handles): the hit path counts with plain
 * stores, through the shard its entry names; its gets are served as
 * hazard cells and direct references instead.  A thread is given its
 * shard on its first get (gdrc_tls_shard, handle.c, calls
 * gdrc_cache_tls_shard here), and with it a pthread key whose
 * destructor, at thread exit, lets go of every handle the thread
 * remembers or parked (gdrc_tls_drop_all, handle.c) and gives the shard
 * back.  A thread for which the key cannot
 * be set keeps no handle: nothing would let them go.
 *
 * Locks: shard_lock, a leaf taken alone, guards the bitmap of owned
 * shards.  Callers: handle.c (first assignment), cache.c (fork child).
 */
#include <stdint.h>

#include "cache_int.h"

static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shard_used; /* bitmap of owned shards; under shard_lock */
static pthread_key_t shard_key;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;

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
	gdrc_tls_drop_all();
	gdrc_cells_release();
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

/* A fork child: another thread may have held shard_lock at the fork
 * (taking or giving back a shard); its bitmap is one word, whole. */
void gdrc_tls_fork_child(void)
{
	pthread_mutex_init(&shard_lock, NULL);
	gdrc_cells_fork_child();
}
