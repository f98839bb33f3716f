// SPDX-License-Identifier: BSD-3-Clause
/*
 * detour_x86_64.c - send a function's callers to ours, keeping the
 * original callable (x86-64), plus the code-writing primitives the glibc
 * patcher shares.
 *
 * Purpose: the CUDA free hooks must run before the driver's own code and
 * then call it.  Every way a program reaches a driver function (its
 * dynamic symbol, cuGetProcAddress, cudaGetDriverEntryPoint, dlsym, a
 * static cudart) ends at the same code inside libcuda (measured:
 * tests/gpu/free_probe.c, docs/hooks.md), so the first instructions of
 * that code are replaced by a five-byte relative jump to an "island"
 * page within +-2 GiB, which holds, per detour:
 *
 *   entry:       jmp *0(%rip); .quad repl        (to our replacement)
 *   trampoline:  the displaced instructions, relocated
 *                jmp *0(%rip); .quad fn + n      (back into fn)
 *
 * and the replacement calls the trampoline as "the original".
 *
 * Relocation: the displaced instructions (at least five bytes' worth)
 * are decoded with a small table that knows the prologue instructions
 * compilers emit (endbr64, push, mov/lea/arithmetic with a ModRM operand,
 * sub/add with an immediate, nops) and one final relative jmp (another
 * hook library got there first: we chain to it).  A RIP-relative operand
 * gets its displacement rebased to the island.  Anything else (a call, a
 * conditional branch, an unknown opcode) refuses the detour, and the
 * caller reports the hook unavailable: better no hook than a wrong one.
 *
 * Known limits: a thread executing the displaced bytes while they are
 * rewritten, or code that jumps into the middle of them, would run
 * garbage.  New callers are parked on a jump-to-self while the rest is
 * written (as in patch_x86_64.c); install before the process is busy.
 *
 * Locks: islands_lock guards the island list and the writes; detours are
 * installed and removed under the callers' own once or lock, never in
 * hook context.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdrc_int.h"
#include "hooks_int.h"

#ifdef __x86_64__

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define DETOUR_JMP_LEN 5          /* e9 rel32 */
#define DETOUR_ABS_LEN 14         /* ff 25 00000000 + .quad */
#define DETOUR_SLOT 64            /* entry + trampoline per detour */
#define DETOUR_RANGE (1L << 31)   /* reach of a rel32 */
/* Islands are looked for this far below (then above) the target. */
#define DETOUR_SEARCH (1L << 30)
#define DETOUR_STEP (1L << 20)

/* ------------------------------------------------------------------
 * Reading and writing code (install time).
 * ------------------------------------------------------------------ */

/*
 * Code is read and written only through asm: a sanitizer would check its
 * own shadow for these addresses, and TSan has none for text (it
 * faults).  An aligned two-byte mov is a single, atomic store, and x86
 * keeps stores in program order, so no fence is needed.
 */
static inline uint8_t code_peek8(const uint8_t *p)
{
	uint8_t v;

	__asm__ volatile("movb %1, %0" : "=q"(v) : "m"(*p));
	return v;
}

static inline void code_poke8(uint8_t *p, uint8_t v)
{
	__asm__ volatile("movb %1, %0" : "=m"(*p) : "q"(v) : "memory");
}

static inline void code_poke16(uint8_t *p, uint16_t v)
{
	__asm__ volatile("movw %1, %0"
			 : "=m"(*(uint16_t *)(void *)p)
			 : "r"(v)
			 : "memory");
}

void gdrc_code_read(uint8_t *buf, const uint8_t *src, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = code_peek8(src + i);
}

/*
 * The page stays executable throughout, because other threads may be
 * running code on it.  New callers spin on a jump-to-self (eb fe) until
 * the rest is in place; the two-byte stores are single, aligned writes,
 * so a caller sees either the park or the full new entry.  x86 keeps
 * instruction fetch coherent with these stores; no cache flush is needed.
 */
int gdrc_code_write(uint8_t *dst, const uint8_t *src, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t first = gdrc_align_down((uintptr_t)dst, page);
	uintptr_t last = gdrc_align_up((uintptr_t)dst + len, page);
	size_t i;

	if (mprotect((void *)first, last - first,
		     PROT_READ | PROT_WRITE | PROT_EXEC))
		return -1;
	if (len >= 2 && !((uintptr_t)dst & 1)) {
		code_poke16(dst, 0xfeeb);
		for (i = 2; i < len; i++)
			code_poke8(dst + i, src[i]);
		code_poke16(dst, (uint16_t)(src[0] | src[1] << 8));
	} else {
		for (i = 0; i < len; i++)
			code_poke8(dst + i, src[i]);
	}
	__builtin___clear_cache((char *)dst, (char *)dst + len);
	return mprotect((void *)first, last - first, PROT_READ | PROT_EXEC);
}

/* ------------------------------------------------------------------
 * The decoder: length of one prologue instruction, and whether it
 * addresses memory relative to RIP.
 * ------------------------------------------------------------------ */

struct insn {
	unsigned len;
	int rip_off;     /* offset of a RIP-relative disp32, or -1 */
	int jmp_rel32;   /* an e9 jump: ends the displaced code */
};

/* After the opcode: ModRM, SIB and displacement.  @return bytes or -1. */
static int insn_modrm(const uint8_t *p, int *rip_off_p)
{
	uint8_t modrm = p[0], mod = modrm >> 6, rm = modrm & 7;
	int n = 1;

	*rip_off_p = -1;
	if (mod == 3)
		return n;
	if (rm == 4) { /* SIB */
		uint8_t base = p[1] & 7;

		n++;
		if (mod == 0 && base == 5)
			return n + 4; /* disp32, no base */
	} else if (mod == 0 && rm == 5) {
		*rip_off_p = n;
		return n + 4;
	}
	if (mod == 1)
		n += 1;
	else if (mod == 2)
		n += 4;
	return n;
}

/* Decode the instruction at p (15 readable bytes).  @return 0 or -1. */
static int insn_decode(const uint8_t *p, struct insn *in)
{
	unsigned i = 0;
	int rexw = 0, rip = -1, m;
	uint8_t op;

	memset(in, 0, sizeof(*in));
	in->rip_off = -1;
	/* endbr64 */
	if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) {
		in->len = 4;
		return 0;
	}
	if (p[i] == 0x66)
		i++;
	if ((p[i] & 0xf0) == 0x40) {
		rexw = p[i] & 8;
		i++;
	}
	op = p[i++];
	switch (op) {
	case 0x50 ... 0x5f: /* push, pop */
	case 0x90:          /* nop */
		break;
	case 0x6a:          /* push imm8 */
		i += 1;
		break;
	case 0x68:          /* push imm32 */
		i += 4;
		break;
	case 0xb8 ... 0xbf: /* mov imm, reg */
		i += rexw ? 8 : 4;
		break;
	case 0x01: case 0x03: case 0x09: case 0x0b: case 0x21: case 0x23:
	case 0x29: case 0x2b: case 0x31: case 0x33: case 0x39: case 0x3b:
	case 0x85: case 0x88: case 0x89: case 0x8a: case 0x8b: case 0x8d:
		m = insn_modrm(p + i, &rip);
		if (rip >= 0)
			rip += (int)i;
		i += (unsigned)m;
		break;
	case 0x83: case 0xc6: /* group 1 imm8, mov imm8 */
		m = insn_modrm(p + i, &rip);
		if (rip >= 0)
			rip += (int)i;
		i += (unsigned)m + 1;
		break;
	case 0x81: case 0xc7: /* group 1 imm32, mov imm32 */
		m = insn_modrm(p + i, &rip);
		if (rip >= 0)
			rip += (int)i;
		i += (unsigned)m + 4;
		break;
	case 0x0f:
		if (p[i] != 0x1f) /* nopl */
			return -1;
		i++;
		m = insn_modrm(p + i, &rip);
		if (rip >= 0)
			rip += (int)i;
		i += (unsigned)m;
		break;
	case 0xe9:
		if (i != 1)
			return -1;
		in->jmp_rel32 = 1;
		i += 4;
		break;
	default:
		return -1;
	}
	if (i > 15)
		return -1;
	in->len = i;
	in->rip_off = rip;
	return 0;
}

/* ------------------------------------------------------------------
 * Islands: pages of entries and trampolines near their targets.
 * ------------------------------------------------------------------ */

struct island {
	uint8_t *base;
	size_t used;
	size_t size;
};

#define DETOUR_MAX_ISLANDS 8
static struct island islands[DETOUR_MAX_ISLANDS];
static unsigned island_count;
static pthread_mutex_t islands_lock = PTHREAD_MUTEX_INITIALIZER;

static int near(uintptr_t a, uintptr_t b)
{
	uintptr_t d = a > b ? a - b : b - a;

	return d < (uintptr_t)(DETOUR_RANGE - DETOUR_STEP);
}

/* Under islands_lock: a free slot within reach of target, or NULL. */
static uint8_t *island_slot(uintptr_t target)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct island *is;

	for (unsigned i = 0; i < island_count; i++) {
		is = &islands[i];
		if (near((uintptr_t)is->base, target) &&
		    is->used + DETOUR_SLOT <= is->size) {
			is->used += DETOUR_SLOT;
			return is->base + is->used - DETOUR_SLOT;
		}
	}
	if (island_count == DETOUR_MAX_ISLANDS)
		return NULL;
	for (long off = DETOUR_STEP; off < DETOUR_SEARCH; off += DETOUR_STEP) {
		for (int side = -1; side <= 1; side += 2) {
			uintptr_t want = gdrc_align_down(
				target + (uintptr_t)(side * off), page);
			void *p;

			if (side < 0 && target < (uintptr_t)off + page)
				continue;
			p = mmap((void *)want, page, PROT_READ | PROT_EXEC,
				 MAP_PRIVATE | MAP_ANONYMOUS |
					 MAP_FIXED_NOREPLACE,
				 -1, 0);
			if (p == MAP_FAILED)
				continue;
			if (!near((uintptr_t)p, target)) {
				/* An old kernel took the flag as a hint. */
				munmap(p, page);
				continue;
			}
			is = &islands[island_count++];
			is->base = p;
			is->size = page;
			is->used = DETOUR_SLOT;
			return p;
		}
	}
	return NULL;
}

static void put_abs_jmp(uint8_t *at, uintptr_t to)
{
	at[0] = 0xff;
	at[1] = 0x25;
	memset(at + 2, 0, 4);
	memcpy(at + 6, &to, sizeof(to));
}

static int island_protect(uint8_t *slot, int prot)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	return mprotect((void *)gdrc_align_down((uintptr_t)slot, page),
			(size_t)page, prot);
}

/* ------------------------------------------------------------------
 * Detours.
 * ------------------------------------------------------------------ */

/*
 * Relocate the instructions covering at least DETOUR_JMP_LEN bytes of
 * code into tramp.  @return bytes displaced, or -1 with why.
 */
static int relocate(const uint8_t *fn, const uint8_t *code, uint8_t *tramp,
		    char *why, size_t why_len)
{
	unsigned n = 0, out = 0;

	while (n < DETOUR_JMP_LEN) {
		struct insn in;

		if (insn_decode(code + n, &in)) {
			snprintf(why, why_len,
				 "cannot relocate the instruction at +%u (bytes %02x %02x %02x %02x)",
				 n, code[n], code[n + 1], code[n + 2],
				 code[n + 3]);
			return -1;
		}
		if (in.jmp_rel32) {
			int32_t rel;

			/* Someone's hook: our trampoline jumps where theirs
			 * did, and nothing after it runs. */
			memcpy(&rel, code + n + 1, sizeof(rel));
			put_abs_jmp(tramp + out,
				    (uintptr_t)(fn + n + 5) + (intptr_t)rel);
			return (int)(n + 5) | 0x10000;
		}
		memcpy(tramp + out, code + n, in.len);
		if (in.rip_off >= 0) {
			int32_t disp;
			intptr_t abs, ndisp;

			memcpy(&disp, code + n + in.rip_off, sizeof(disp));
			abs = (intptr_t)(fn + n + in.len) + disp;
			ndisp = abs - (intptr_t)(tramp + out + in.len);
			if (ndisp != (int32_t)ndisp) {
				snprintf(why, why_len,
					 "a rip-relative operand at +%u is out of the island's reach",
					 n);
				return -1;
			}
			disp = (int32_t)ndisp;
			memcpy(tramp + out + in.rip_off, &disp, sizeof(disp));
		}
		n += in.len;
		out += in.len;
	}
	put_abs_jmp(tramp + out, (uintptr_t)(fn + n));
	return (int)n;
}

int gdrc_detour_install(struct gdrc_detour *d, void *fn, void *repl,
			char *why, size_t why_len)
{
	uint8_t code[GDRC_DETOUR_SAVE + 8], jmp[DETOUR_JMP_LEN];
	uint8_t *slot, *entry, *tramp;
	int32_t rel;
	int n;

	memset(d, 0, sizeof(*d));
	gdrc_code_read(code, fn, sizeof(code));
	pthread_mutex_lock(&islands_lock);
	slot = island_slot((uintptr_t)fn);
	if (!slot) {
		pthread_mutex_unlock(&islands_lock);
		snprintf(why, why_len,
			 "no free page within 2 GiB of %p for the trampoline",
			 fn);
		return -1;
	}
	entry = slot;
	tramp = slot + DETOUR_ABS_LEN + 2;
	/* Other slots of the page may be running: it stays executable. */
	if (island_protect(slot, PROT_READ | PROT_WRITE | PROT_EXEC)) {
		pthread_mutex_unlock(&islands_lock);
		snprintf(why, why_len, "mprotect of the island: %s",
			 strerror(errno));
		return -1;
	}
	put_abs_jmp(entry, (uintptr_t)repl);
	n = relocate(fn, code, tramp, why, why_len);
	island_protect(slot, PROT_READ | PROT_EXEC);
	if (n < 0) {
		pthread_mutex_unlock(&islands_lock);
		return -1;
	}
	d->chained = !!(n & 0x10000);
	d->saved_len = (unsigned)(n & 0xffff);
	memcpy(d->saved, code, d->saved_len);
	jmp[0] = 0xe9;
	rel = (int32_t)((intptr_t)entry - (intptr_t)((uint8_t *)fn +
						      DETOUR_JMP_LEN));
	memcpy(jmp + 1, &rel, sizeof(rel));
	if (gdrc_code_write(fn, jmp, DETOUR_JMP_LEN)) {
		pthread_mutex_unlock(&islands_lock);
		snprintf(why, why_len, "cannot write the code at %p: %s", fn,
			 strerror(errno));
		return -1;
	}
	memcpy(d->jmp, jmp, DETOUR_JMP_LEN);
	d->fn = fn;
	d->orig = tramp;
	pthread_mutex_unlock(&islands_lock);
	return 0;
}

void gdrc_detour_remove(struct gdrc_detour *d)
{
	if (!d->fn)
		return;
	pthread_mutex_lock(&islands_lock);
	/* The trampoline stays: a caller may still be inside it. */
	if (!gdrc_code_write(d->fn, d->saved, DETOUR_JMP_LEN))
		d->fn = NULL;
	pthread_mutex_unlock(&islands_lock);
}

int gdrc_detour_intact(const struct gdrc_detour *d)
{
	uint8_t now[DETOUR_JMP_LEN];

	if (!d->fn)
		return 0;
	gdrc_code_read(now, d->fn, DETOUR_JMP_LEN);
	return !memcmp(now, d->jmp, DETOUR_JMP_LEN);
}

#endif /* __x86_64__ */
