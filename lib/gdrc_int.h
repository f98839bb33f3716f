/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gdrc_int.h - compiler helpers shared by every module of libgdrcache.
 * Depends on nothing but the C library; every module may include it.
 */
#ifndef GDRC_INT_H
#define GDRC_INT_H

#include <stddef.h>
#include <stdint.h>

#define gdrc_likely(x) __builtin_expect(!!(x), 1)
#define gdrc_unlikely(x) __builtin_expect(!!(x), 0)

/* Kept out of its caller, so a fast path does not pay for its frame. */
#define GDRC_NOINLINE __attribute__((noinline, cold))
/* The same for a step that is not rare (not cold: compiled for speed,
 * not size). */
#define GDRC_OUTLINE __attribute__((noinline))
/* A hit path's entry point, at the start of a cache line: its layout
 * then does not move with the code before it (api_get.c says why). */
#define GDRC_HOT_ALIGN __attribute__((aligned(64)))

#define GDRC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define gdrc_container_of(ptr, type, member)                                 \
	((type *)((char *)(ptr) - offsetof(type, member)))

#if defined(__x86_64__) || defined(__i386__)
#define gdrc_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define gdrc_cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define gdrc_cpu_relax() __asm__ volatile("" ::: "memory")
#endif

/* Internal symbols are hidden by -fvisibility=hidden; GDRC_API exports.
 * That option marks definitions only: a variable a hit path reads from
 * another file is declared GDRC_HIDDEN too, so that the compiler reads
 * it directly rather than through the GOT (one load, not two). */
#define GDRC_HIDDEN __attribute__((visibility("hidden")))
#define GDRC_CACHELINE 64
#define GDRC_ALIGNED_CL __attribute__((aligned(GDRC_CACHELINE)))

/*
 * Hook context (lib/README.md) is left out of ThreadSanitizer's
 * instrumentation: glibc calls it in exiting threads whose TSan state is
 * already gone (madvise of the thread's stack), where any TSan call would
 * crash.  What such code does is small and lock-free by design.
 */
#define GDRC_HOOK_CONTEXT __attribute__((no_sanitize("thread")))

/*
 * One piece of GPU memory with its own identity: a VMM mapping (one
 * cuMemMap of one physical allocation; a reservation may hold many), or
 * a whole allocation of any other kind.  classify/ finds them, cache/
 * keeps them with the registrations that cover them.
 */
struct gdrc_seg {
	uintptr_t start;
	uintptr_t end;
	uint64_t buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: new for every
			     * cuMemMap, even of the same handle again */
};

static inline uintptr_t gdrc_align_down(uintptr_t v, uintptr_t a)
{
	return v & ~(a - 1);
}

/* Rounds up; the caller has checked that v + a - 1 does not wrap. */
static inline uintptr_t gdrc_align_up(uintptr_t v, uintptr_t a)
{
	return (v + a - 1) & ~(a - 1);
}

#endif /* GDRC_INT_H */
