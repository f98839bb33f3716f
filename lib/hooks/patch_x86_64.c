// SPDX-License-Identifier: BSD-3-Clause
/*
 * patch_x86_64.c - send glibc's own memory functions to ours (x86-64).
 *
 * Purpose: glibc calls its memory functions internally: free() of a large
 * block calls the hidden __munmap, malloc trimming calls __madvise and
 * __sbrk (which calls brk), a non-main arena may mmap MAP_FIXED.  Those
 * calls bind inside libc.so and never reach an interposed symbol, so the
 * first PATCH_LEN bytes of each function are overwritten with an absolute
 * jump to a replacement here.  Every alias (munmap, __munmap) is the same
 * code, so one patch covers them all.  A replacement performs the system
 * call itself, never returns into glibc's code, and reports what was lost
 * through gdrc_hooks_report().
 *
 * Never, in a replacement (hook context): allocate, log, take a lock, or
 * call anything that may be patched; touch errno except to report a
 * failure the way glibc does.
 *
 * Invariants: all six functions are patched or none.  A function is
 * patched only if its symbol is at least PATCH_LEN bytes long and it does
 * not already start with a jump (another copy of this library, or UCX,
 * libfabric or Open MPI got there first: patch_redirected).  The
 * replacement brk keeps glibc's __curbrk exactly as glibc's brk does,
 * because sbrk and malloc read it.
 *
 * Locks: none.  gdrc_patch_apply() and gdrc_patch_revert() run once,
 * under hooks.c's pthread_once.
 *
 * Callers: hooks.c at install; the replacements are entered from anywhere
 * in the process, in any thread or signal handler, through glibc.
 *
 * Known limit: a thread that is inside one of these functions while its
 * entry is rewritten (say, blocked in munmap's system call) resumes in the
 * middle of the new bytes and crashes.  New callers are parked on a
 * two-byte jump-to-self while the rest is written, which closes the window
 * for them only.  Install before the process gets busy: gdrc_init does.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gdrc_int.h"
#include "hooks_int.h"

#ifdef __x86_64__

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

/*
 * Two forms, 13 bytes each (docs/hooks.md, "Another library got there
 * first"):
 *   plain    movabs $target, %r10 ; jmp *%r10           49 ba .. 41 ff e2
 *   chained  movabs $target, %rax ; jmp *%rax ; nop     48 b8 .. ff e0 90
 * Neither is libfabric's or Open MPI's own (%r11), which libfabric takes
 * for its own patch and refuses to write over (and then keeps its MR
 * cache on without its events): so libfabric writes over our plain
 * patch, our probe sees it, and a retake chains over libfabric's.  The
 * chained form says, in the code itself, that the chain is to be
 * followed: when libfabric's cleanup writes back what it saved (our plain
 * patch), the replacements stop calling into it.
 */
#define PATCH_LEN 13
#define PATCH_IMM_OFF 2
#define PATCH_JMP_OFF 10
#define PATCH_OP_PLAIN 0xba   /* the byte after REX: mov imm64, %r10 */
#define PATCH_OP_CHAINED 0xb8 /* mov imm64, %rax */

/* The version every x86-64 glibc exports these symbols at. */
#define PATCH_GLIBC_VER "GLIBC_2.2.5"

struct patch_site {
	const char *name;       /* exported name */
	void *repl;             /* our replacement */
	uint8_t *addr;          /* libc's entry point; set at apply */
	uint8_t orig[PATCH_LEN]; /* its first bytes, to revert */
	uint8_t glibc[PATCH_LEN]; /* glibc's own first bytes, read the first
				   * time a resolve found them unpatched */
	int have_glibc;
	uint8_t applied[PATCH_LEN]; /* what we wrote last */
	int patched;
	/* Chained: the replacement of the library that patched this first
	 * (Open MPI's or libfabric's, which make the system call
	 * themselves), called instead of the system call; else NULL. */
	void *_Atomic chain;
	void *chain_next;       /* found by resolve, stored at apply */
};

/* glibc's __curbrk, the break as sbrk and malloc know it. */
static void **patch_curbrk;

/* ------------------------------------------------------------------
 * Hook context: the replacements.
 * ------------------------------------------------------------------ */

/*
 * A system call that cannot reach anything patched (nor a sanitizer's
 * interceptor).  Returns the kernel's value: -errno on failure.
 */
GDRC_HOOK_CONTEXT
static inline long patch_syscall6(long nr, long a1, long a2, long a3,
				  long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10),
			   "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The kernel's error window, as glibc tests it. */
GDRC_HOOK_CONTEXT
static inline int patch_failed(long ret)
{
	return (unsigned long)ret > -4096UL;
}

/*
 * Did a call that returned ret, on a range starting at addr, possibly
 * lose memory?  munmap, mremap and madvise refuse a start that is not
 * page aligned before doing anything; past that check they can fail
 * after part of the work (madvise(MADV_DONTNEED) over a hole zaps every
 * mapping it covers, then says ENOMEM; mremap(MREMAP_FIXED) unmaps the
 * target, then may fail), so such a failure is reported as if it had
 * succeeded.  The cost is only precision, on a rare path.
 */
GDRC_HOOK_CONTEXT
static inline int patch_may_have_lost(long ret, const void *addr)
{
	return !patch_failed(ret) || !((uintptr_t)addr & 4095); /* x86-64 */
}

enum {
	PATCH_MUNMAP, PATCH_MREMAP, PATCH_MADVISE, PATCH_BRK, PATCH_MMAP,
	PATCH_SHMAT, PATCH_COUNT
};

static struct patch_site patch_sites[PATCH_COUNT];

/*
 * Hook context: the chained function of site i, or NULL.  Followed only
 * while libc's entry holds our chained form: the library we chain to
 * may have put back our plain patch (its cleanup restores what it
 * saved), and its code may be gone by now.
 */
GDRC_HOOK_CONTEXT
static inline void *patch_chain(int i)
{
	const struct patch_site *site = &patch_sites[i];
	void *chain = atomic_load_explicit(&site->chain, memory_order_acquire);

	if (chain &&
	    ((const volatile uint8_t *)site->addr)[1] != PATCH_OP_CHAINED)
		return NULL;
	return chain;
}

/* Hook context: a libc-style result (-1 or MAP_FAILED with errno) in the
 * kernel's convention, as the system call would have returned it. */
GDRC_HOOK_CONTEXT
static inline long patch_kret(long r)
{
	return r == -1 ? -(long)errno : r;
}

/* Hook context. */
GDRC_HOOK_CONTEXT
static int patch_munmap(void *addr, size_t len)
{
	int (*chain)(void *, size_t) = patch_chain(PATCH_MUNMAP);
	unsigned busy = gdrc_hooks_enter();
	long ret = chain ? patch_kret(chain(addr, len)) :
			   patch_syscall6(SYS_munmap, (long)addr, (long)len,
					  0, 0, 0, 0);

	if (patch_may_have_lost(ret, addr))
		gdrc_hooks_report((uintptr_t)addr, len);
	gdrc_hooks_leave(busy);
	if (patch_failed(ret)) {
		errno = (int)-ret;
		return -1;
	}
	return 0;
}

/*
 * Hook context.  The fifth argument exists only with MREMAP_FIXED or
 * MREMAP_DONTUNMAP, as in glibc; unknown flags are the kernel's to refuse.
 */
GDRC_HOOK_CONTEXT
static void *patch_mremap(void *old, size_t old_len, size_t new_len,
			  int flags, ...)
{
	void *(*chain)(void *, size_t, size_t, int, void *) = patch_chain(PATCH_MREMAP);
	void *want = NULL;
	unsigned busy;
	va_list ap;
	long ret;

	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	busy = gdrc_hooks_enter();
	if (chain)
		ret = patch_kret(
			(long)chain(old, old_len, new_len, flags, want));
	else
		ret = patch_syscall6(SYS_mremap, (long)old, (long)old_len,
				     (long)new_len, (long)(unsigned int)flags,
				     (long)want, 0);
	if (patch_failed(ret)) {
		/* What may already be gone: the target, unmapped first, and
		 * a shrink's tail (see patch_may_have_lost). */
		if (patch_may_have_lost(ret, old)) {
			if (flags & MREMAP_FIXED)
				gdrc_hooks_report((uintptr_t)want, new_len);
			if (new_len < old_len)
				gdrc_hooks_report((uintptr_t)old + new_len,
						  old_len - new_len);
		}
		gdrc_hooks_leave(busy);
		errno = (int)-ret;
		return MAP_FAILED;
	}
	/*
	 * Moved: the old range is gone (with MREMAP_DONTUNMAP it stays
	 * mapped but its pages went with the move).  Shrunk in place: the
	 * cut-off tail is gone.  MREMAP_FIXED also replaced whatever was
	 * mapped at the target.
	 */
	if ((void *)ret != old)
		gdrc_hooks_report((uintptr_t)old, old_len);
	else if (new_len < old_len)
		gdrc_hooks_report((uintptr_t)old + new_len,
				  old_len - new_len);
	if (flags & MREMAP_FIXED)
		gdrc_hooks_report((uintptr_t)ret, new_len);
	gdrc_hooks_leave(busy);
	return (void *)ret;
}

/* Hook context.  Only advice that throws contents away is reported. */
GDRC_HOOK_CONTEXT
static int patch_madvise(void *addr, size_t len, int advice)
{
	int loses = gdrc_hooks_advice_loses(advice);
	int (*chain)(void *, size_t, int) = patch_chain(PATCH_MADVISE);
	unsigned busy = loses ? gdrc_hooks_enter() : 0;
	long ret = chain ? patch_kret(chain(addr, len, advice)) :
			   patch_syscall6(SYS_madvise, (long)addr, (long)len,
					  (long)advice, 0, 0, 0);

	if (loses) {
		if (patch_may_have_lost(ret, addr))
			gdrc_hooks_report((uintptr_t)addr, len);
		gdrc_hooks_leave(busy);
	}
	if (patch_failed(ret)) {
		errno = (int)-ret;
		return -1;
	}
	return 0;
}

/*
 * Hook context.  Keeps __curbrk as glibc's brk does: the kernel returns
 * the break it settled on, which is stored whether or not the request was
 * met.  sbrk calls brk, so this sees sbrk and malloc's trimming as well.
 */
GDRC_HOOK_CONTEXT
static int patch_brk(void *addr)
{
	uintptr_t old = (uintptr_t)*patch_curbrk;
	/* Only a shrink opens a window: the kernel never lowers the break
	 * when asked to raise it.  old is 0 before glibc first asked. */
	int shrink = (uintptr_t)addr < old;
	int (*chain)(void *) = patch_chain(PATCH_BRK);
	unsigned busy = shrink ? gdrc_hooks_enter() : 0;
	long ret;

	if (chain) {
		/* Open MPI's and libfabric's brk keep __curbrk themselves. */
		int r = chain(addr), e = errno;

		ret = (long)*patch_curbrk;
		if (old && (uintptr_t)ret < old)
			gdrc_hooks_report((uintptr_t)ret, old - (uintptr_t)ret);
		if (shrink)
			gdrc_hooks_leave(busy);
		errno = e;
		return r;
	}
	ret = patch_syscall6(SYS_brk, (long)addr, 0, 0, 0, 0, 0);
	*patch_curbrk = (void *)ret;
	/* Also a break found lower than glibc knew it (a raw brk). */
	if (old && (uintptr_t)ret < old)
		gdrc_hooks_report((uintptr_t)ret, old - (uintptr_t)ret);
	if (shrink)
		gdrc_hooks_leave(busy);
	if ((uintptr_t)ret < (uintptr_t)addr) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/*
 * Hook context.  MAP_FIXED replaces what was mapped there; without it (or
 * with MAP_FIXED_NOREPLACE alone) nothing old is lost.
 */
GDRC_HOOK_CONTEXT
static void *patch_mmap(void *addr, size_t len, int prot, int flags, int fd,
			off_t off)
{
	void *(*chain)(void *, size_t, int, int, int, off_t) = patch_chain(PATCH_MMAP);
	int fixed = (flags & MAP_FIXED) != 0;
	unsigned busy;
	long ret;

	/* glibc refuses an offset that is not 4 KiB aligned itself. */
	if (off & 4095) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	busy = fixed ? gdrc_hooks_enter() : 0;
	if (chain)
		ret = patch_kret((long)chain(addr, len, prot, flags, fd, off));
	else
		ret = patch_syscall6(SYS_mmap, (long)addr, (long)len,
				     (long)(unsigned int)prot,
				     (long)(unsigned int)flags, (long)fd,
				     (long)off);
	/* A failed MAP_FIXED may already have unmapped the old range. */
	if (fixed) {
		gdrc_hooks_report((uintptr_t)addr, len);
		gdrc_hooks_leave(busy);
	}
	if (patch_failed(ret)) {
		errno = (int)-ret;
		return MAP_FAILED;
	}
	return (void *)ret;
}

/*
 * Hook context.  With SHM_REMAP the segment replaces what was mapped at
 * addr (without it, shmat over a mapping fails and loses nothing).  The
 * segment's size comes from IPC_STAT before the call; a segment of huge
 * pages is mapped in whole huge pages, so the size reported is rounded
 * up to 1 GiB, the largest of them: only precision, on a rare call.
 */
#define PATCH_SHM_ROUND (1ul << 30)

GDRC_HOOK_CONTEXT
static void *patch_shmat(int shmid, const void *addr, int flags)
{
	void *(*chain)(int, const void *, int) = patch_chain(PATCH_SHMAT);
	int remap = (flags & SHM_REMAP) && addr;
	struct shmid_ds ds;
	unsigned busy = 0;
	uintptr_t at;
	size_t len = 0;
	long ret;

	if (remap) {
		if (!patch_syscall6(SYS_shmctl, shmid, IPC_STAT, (long)&ds, 0,
				    0, 0))
			len = (ds.shm_segsz + PATCH_SHM_ROUND - 1) &
			      ~(PATCH_SHM_ROUND - 1);
		busy = gdrc_hooks_enter();
	}
	ret = chain ? patch_kret((long)chain(shmid, addr, flags)) :
		      patch_syscall6(SYS_shmat, shmid, (long)addr, flags, 0,
				     0, 0);
	if (remap) {
		/* The address the kernel used: SHM_RND rounds down to
		 * SHMLBA, the page size here.  A failure may come after the
		 * old mapping went (as with MAP_FIXED). */
		at = patch_failed(ret) ? (uintptr_t)addr & ~4095ul :
					 (uintptr_t)ret;
		if (len)
			gdrc_hooks_report(at, len);
		gdrc_hooks_leave(busy);
	}
	if (patch_failed(ret)) {
		errno = (int)-ret;
		return (void *)-1;
	}
	return (void *)ret;
}

static struct patch_site patch_sites[PATCH_COUNT] = {
	[PATCH_MUNMAP] = { .name = "munmap", .repl = (void *)patch_munmap },
	[PATCH_MREMAP] = { .name = "mremap", .repl = (void *)patch_mremap },
	[PATCH_MADVISE] = { .name = "madvise", .repl = (void *)patch_madvise },
	[PATCH_BRK] = { .name = "brk", .repl = (void *)patch_brk },
	[PATCH_MMAP] = { .name = "mmap", .repl = (void *)patch_mmap },
	[PATCH_SHMAT] = { .name = "shmat", .repl = (void *)patch_shmat },
};

/* ------------------------------------------------------------------
 * Install time (under hooks.c's once; may log, allocate, lock).
 * ------------------------------------------------------------------ */

/* Copy PATCH_LEN bytes of code at src into our own buf. */
static void patch_read(uint8_t *buf, const uint8_t *src)
{
	gdrc_code_read(buf, src, PATCH_LEN);
}

static void patch_encode(uint8_t *buf, const void *target, int chained)
{
	uint64_t imm = (uint64_t)(uintptr_t)target;

	memcpy(buf + PATCH_IMM_OFF, &imm, sizeof(imm));
	if (chained) {
		buf[0] = 0x48; /* REX.W */
		buf[1] = PATCH_OP_CHAINED;
		buf[PATCH_JMP_OFF] = 0xff;
		buf[PATCH_JMP_OFF + 1] = 0xe0; /* jmp *%rax */
		buf[PATCH_JMP_OFF + 2] = 0x90; /* nop */
	} else {
		buf[0] = 0x49; /* REX.WB */
		buf[1] = PATCH_OP_PLAIN;
		buf[PATCH_JMP_OFF] = 0x41; /* REX.B */
		buf[PATCH_JMP_OFF + 1] = 0xff;
		buf[PATCH_JMP_OFF + 2] = 0xe2; /* jmp *%r10 */
	}
}

/* Bytes read to recognise a jump: an endbr64, then the longest form. */
#define PATCH_PEEK 20

/*
 * Does the code already leave at once, and for where?  Another copy of
 * this library, or another library's memory hooks (UCX's UCM, libfabric,
 * Open MPI), patched it first; overwriting that would silently take the
 * unmap events from their owner, whose cache would then serve
 * registrations of unmapped memory (seen with UCX 1.13: its far form
 * below went unrecognised here and was overwritten).  The forms, each
 * possibly after an endbr64:
 *   movabs $imm64, %reg; jmp *%reg   ours (%r10, %rax), UCM's far form
 *                                    (%rax), libfabric's and Open MPI's
 *                                    (%r11)
 *   jmp rel32 (e9), jmp rel8 (eb)    UCM's near form
 *   jmp *rel32(%rip) (ff 25)         a jump through a pointer
 * *target_p: where it goes (0 for a movabs that is not followed by its
 * jump, which is not a redirection).
 */
static int patch_redirected(const uint8_t *code, uintptr_t *target_p)
{
	uint8_t p[PATCH_PEEK];
	uint64_t imm;
	int32_t rel;
	size_t o = 0;

	gdrc_code_read(p, code, sizeof(p));
	*target_p = 0;
	if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa)
		o = 4; /* endbr64 */
	if ((p[o] == 0x48 || p[o] == 0x49) && (p[o + 1] & 0xf8) == 0xb8) {
		/* REX.W[B] b8+r imm64, then [REX.B] ff e0+r */
		unsigned reg = p[o + 1] & 7;
		size_t j = o + 10;

		if (p[o] == 0x49 && p[j++] != 0x41)
			return 0;
		if (p[j] != 0xff || p[j + 1] != (0xe0 | reg))
			return 0;
		memcpy(&imm, p + o + 2, sizeof(imm));
		*target_p = (uintptr_t)imm;
		return 1;
	}
	if (p[o] == 0xe9) {
		memcpy(&rel, p + o + 1, sizeof(rel));
		*target_p = (uintptr_t)code + o + 5 + (intptr_t)rel;
		return 1;
	}
	if (p[o] == 0xeb) {
		*target_p = (uintptr_t)code + o + 2 + (intptr_t)(int8_t)p[o + 1];
		return 1;
	}
	if (p[o] == 0xff && p[o + 1] == 0x25) {
		memcpy(&rel, p + o + 2, sizeof(rel));
		gdrc_code_read((uint8_t *)&imm,
			       code + o + 6 + (intptr_t)rel, sizeof(imm));
		*target_p = (uintptr_t)imm;
		return 1;
	}
	return 0;
}

/* The object our patch chains to ("" when none), for the log. */
static char patch_chained_to[256];

/*
 * May our patch go over this foreign one, calling the function it jumps
 * to?  Only over libraries whose replacements we have read to make the
 * system call themselves, never returning into libc's entry (which would
 * now lead back to us): Open MPI's memory patcher (libopen-pal, 4.x) and
 * libfabric's memhooks (1.x), both of which write exactly our 13 bytes
 * with their own target.  UCX's UCM is not chained: its events are used
 * (ucm.c).
 */
static int patch_chainable(const uint8_t *code, const char *who)
{
	static const char *const owners[] = { "libopen-pal.so",
					      "libfabric.so" };
	uint8_t p[PATCH_LEN];
	const char *base = strrchr(who, '/');

	base = base ? base + 1 : who;
	gdrc_code_read(p, code, sizeof(p));
	if (p[0] != 0x49 || p[1] != 0xbb || p[PATCH_JMP_OFF] != 0x41 ||
	    p[PATCH_JMP_OFF + 1] != 0xff || p[PATCH_JMP_OFF + 2] != 0xe3)
		return 0;
	for (size_t i = 0; i < GDRC_ARRAY_SIZE(owners); i++)
		if (!strncmp(base, owners[i], strlen(owners[i])))
			return 1;
	return 0;
}

/* The object holding addr, for messages ("an unknown object"). */
static const char *patch_owner(void *addr)
{
	Dl_info owner;

	if (addr && dladdr(addr, &owner) && owner.dli_fname &&
	    owner.dli_fname[0])
		return owner.dli_fname;
	return "an unknown object";
}

/*
 * libc's entry at addr jumps to site's own replacement: our chained
 * patch, still there (keep its chain and what it went over), or our
 * plain patch, put back by a library we had chained to (its cleanup
 * restores what it saved), whose revert is to glibc's own first bytes.
 */
static int patch_resolve_ours(struct patch_site *site, uint8_t *addr,
			      char *why, size_t why_len)
{
	uint8_t now[PATCH_LEN];

	patch_read(now, addr);
	site->addr = addr;
	if (now[1] == PATCH_OP_CHAINED) {
		site->chain_next = atomic_load_explicit(&site->chain,
							memory_order_relaxed);
		if (site->chain_next)
			snprintf(patch_chained_to, sizeof(patch_chained_to),
				 "%s", patch_owner(site->chain_next));
		return 0;
	}
	if (!site->have_glibc) {
		snprintf(why, why_len,
			 "libc's %s holds our patch, and its own first bytes were never seen",
			 site->name);
		return -1;
	}
	memcpy(site->orig, site->glibc, PATCH_LEN);
	return 0;
}

/*
 * Find libc's own definition (not a sanitizer's or preload's interposer,
 * which a handle lookup skips), check it can take the patch, and save its
 * first bytes.  base_p collects the object all of them must share.
 */
static int patch_resolve(struct patch_site *site, void *libc,
			 void **base_p, char *why, size_t why_len)
{
	const ElfW(Sym) *sym = NULL;
	uintptr_t target;
	int redirected;
	Dl_info info;
	void *addr;

	addr = dlvsym(libc, site->name, PATCH_GLIBC_VER);
	if (!addr)
		addr = dlsym(libc, site->name);
	if (!addr) {
		snprintf(why, why_len, "libc has no symbol %s", site->name);
		return -1;
	}
	if (!dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    info.dli_saddr != addr) {
		snprintf(why, why_len, "no symbol size for libc's %s",
			 site->name);
		return -1;
	}
	if (sym->st_size < PATCH_LEN) {
		snprintf(why, why_len,
			 "libc's %s is %zu bytes, shorter than the %d byte patch",
			 site->name, (size_t)sym->st_size, PATCH_LEN);
		return -1;
	}
	if (!*base_p) {
		*base_p = info.dli_fbase;
	} else if (*base_p != info.dli_fbase) {
		snprintf(why, why_len, "libc's %s is in another object (%s)",
			 site->name, info.dli_fname ? info.dli_fname : "?");
		return -1;
	}
	site->chain_next = NULL;
	redirected = patch_redirected(addr, &target);
	if (!redirected && !site->have_glibc) {
		patch_read(site->glibc, addr);
		site->have_glibc = 1;
	}
	if (redirected && target == (uintptr_t)site->repl)
		return patch_resolve_ours(site, addr, why, why_len);
	if (redirected) {
		const char *who = patch_owner((void *)target);

		if (!patch_chainable(addr, who)) {
			snprintf(why, why_len,
				 "libc's %s already jumps to %p in %s: another copy of libgdrcache or another hook library (ucx, libfabric, open mpi) owns it",
				 site->name, (void *)target, who);
			return -1;
		}
		site->chain_next = (void *)target;
		snprintf(patch_chained_to, sizeof(patch_chained_to), "%s",
			 who);
	}
	site->addr = addr;
	patch_read(site->orig, addr);
	return 0;
}

/* Write PATCH_LEN bytes of code at dst (see gdrc_code_write). */
static int patch_write(uint8_t *dst, const uint8_t *src)
{
	return gdrc_code_write(dst, src, PATCH_LEN);
}

/* Put back the original bytes of every site patched so far. */
static void patch_unwind(void)
{
	size_t i;

	for (i = GDRC_ARRAY_SIZE(patch_sites); i-- > 0;) {
		struct patch_site *site = &patch_sites[i];

		if (!site->patched)
			continue;
		/* Nothing better to do if this fails: the patch stays. */
		if (!patch_write(site->addr, site->orig))
			site->patched = 0;
	}
}

/*
 * Take __curbrk from the global scope, as libc's own GLOB_DAT relocation
 * did: an executable that copy-relocated it owns the live copy.
 */
static void **patch_find_curbrk(void *libc)
{
	void **cur = dlvsym(RTLD_DEFAULT, "__curbrk", PATCH_GLIBC_VER);

	if (!cur)
		cur = dlvsym(libc, "__curbrk", PATCH_GLIBC_VER);
	if (!cur)
		cur = dlsym(libc, "__curbrk");
	return cur;
}

int gdrc_patch_owner(const char *name, void **entry_p, char *owner,
		     size_t owner_len)
{
	uintptr_t target;
	Dl_info info;
	void *h, *addr;

	h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return -1;
	addr = dlvsym(h, name, PATCH_GLIBC_VER);
	dlclose(h);
	if (!addr)
		return -1;
	*entry_p = addr;
	if (!patch_redirected(addr, &target))
		return 0;
	owner[0] = '\0';
	if (target && dladdr((void *)target, &info) && info.dli_fname)
		snprintf(owner, owner_len, "%s", info.dli_fname);
	return 1;
}

int gdrc_patch_apply(struct gdrc_patch_libc *libc, char *why,
		     size_t why_len)
{
	uint8_t code[PATCH_LEN];
	void *base = NULL;
	Dl_info info;
	void *h;
	size_t i;
	int err;

	h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	if (!h) {
		snprintf(why, why_len,
			 "libc.so.6 is not loaded (static link or another libc)");
		return -1;
	}
	patch_chained_to[0] = '\0';
	for (i = 0; i < GDRC_ARRAY_SIZE(patch_sites); i++) {
		if (patch_resolve(&patch_sites[i], h, &base, why, why_len)) {
			dlclose(h);
			return -1;
		}
	}
	patch_curbrk = patch_find_curbrk(h);
	dlclose(h);
	if (!patch_curbrk) {
		snprintf(why, why_len, "libc exports no __curbrk");
		return -1;
	}

	for (i = 0; i < GDRC_ARRAY_SIZE(patch_sites); i++) {
		struct patch_site *site = &patch_sites[i];

		/* Before our jump goes in: its first caller must see it. */
		atomic_store_explicit(&site->chain, site->chain_next,
				      memory_order_release);
		patch_encode(code, site->repl, site->chain_next != NULL);
		if (patch_write(site->addr, code)) {
			err = errno;
			patch_unwind();
			snprintf(why, why_len,
				 "cannot write libc's %s (mprotect: %s)",
				 site->name, strerror(err));
			return -1;
		}
		memcpy(site->applied, code, PATCH_LEN);
		site->patched = 1;
	}

	libc->mmap = (void *)patch_sites[PATCH_MMAP].addr;
	libc->munmap = (void *)patch_sites[PATCH_MUNMAP].addr;
	libc->path = "libc.so.6";
	if (dladdr(patch_sites[PATCH_MUNMAP].addr, &info) && info.dli_fname)
		libc->path = info.dli_fname;
	libc->chained_to = patch_chained_to[0] ? patch_chained_to : NULL;
	return 0;
}

void gdrc_patch_revert(void)
{
	patch_unwind();
}

int gdrc_patch_intact(void)
{
	uint8_t now[PATCH_LEN];
	size_t i;

	for (i = 0; i < GDRC_ARRAY_SIZE(patch_sites); i++) {
		struct patch_site *site = &patch_sites[i];

		if (!site->patched)
			return 0;
		patch_read(now, site->addr);
		if (memcmp(now, site->applied, PATCH_LEN))
			return 0;
	}
	return 1;
}

#endif /* __x86_64__ */
