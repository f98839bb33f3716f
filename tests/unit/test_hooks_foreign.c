// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_hooks_foreign.c - another library patched glibc's munmap before
 * us, in each of the forms the field's hook libraries write: ours and
 * libfabric's and Open MPI's (movabs $imm64, %r11; jmp *%r11), UCX
 * 1.13's far form (movabs $imm64, %rax; jmp *%rax), its near form (jmp
 * rel32), a jump through a pointer (jmp *rel32(%rip)), and the far form
 * after an endbr64.  Our hooks must leave the patch alone (overwriting
 * it would take the events from their owner, whose cache would then
 * serve registrations of unmapped memory: what UCX's far form suffered
 * before patch_redirected knew it), say so with the jump's target and,
 * where there is one, its object, and the foreign function must still
 * get every munmap.  Each form runs in a forked child, since the hooks
 * install once per process.
 */
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gdrcache.h>

#define PAGE 4096UL

enum form {
	FORM_R11,        /* 49 bb imm64 41 ff e3 */
	FORM_RAX,        /* 48 b8 imm64 ff e0 (UCX 1.13, far) */
	FORM_REL32,      /* e9 rel32 to a trampoline (UCX, near) */
	FORM_RIP_SLOT,   /* ff 25 rel32: jmp *slot(%rip) */
	FORM_ENDBR_RAX,  /* f3 0f 1e fa, then FORM_RAX */
};

static volatile int foreign_calls;

/* The foreign library's munmap: counts, then the system call. */
static int foreign_munmap(void *addr, size_t len)
{
	foreign_calls++;
	return (int)syscall(SYS_munmap, addr, len);
}

static void write_code(uint8_t *dst, const uint8_t *src, size_t n)
{
	uintptr_t page = (uintptr_t)dst & ~(PAGE - 1);

	if (mprotect((void *)page, 2 * PAGE,
		     PROT_READ | PROT_WRITE | PROT_EXEC))
		_exit(90);
	memcpy(dst, src, n);
	if (mprotect((void *)page, 2 * PAGE, PROT_READ | PROT_EXEC))
		_exit(91);
}

static size_t movabs_jmp(uint8_t *b, int r11, uint64_t dest)
{
	size_t n = 0;

	b[n++] = r11 ? 0x49 : 0x48;
	b[n++] = r11 ? 0xbb : 0xb8;
	memcpy(b + n, &dest, 8);
	n += 8;
	if (r11)
		b[n++] = 0x41;
	b[n++] = 0xff;
	b[n++] = r11 ? 0xe3 : 0xe0;
	return n;
}

/* A page within 2 GiB of near, for rel32 jumps; exits if none. */
static uint8_t *page_near(const uint8_t *near)
{
	uintptr_t base = (uintptr_t)near & ~(PAGE - 1);

	for (uintptr_t d = 64UL << 20; d < (1UL << 31); d += 64UL << 20) {
		void *p = mmap((void *)(base - d), PAGE,
			       PROT_READ | PROT_WRITE | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS |
				       MAP_FIXED_NOREPLACE,
			       -1, 0);

		if (p != MAP_FAILED && (uintptr_t)p == base - d)
			return p;
		if (p != MAP_FAILED)
			munmap(p, PAGE);
	}
	_exit(92);
}

/* In the child: patch munmap in form f, then check everything. */
static int child(enum form f)
{
	void *h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	uint8_t *fn = h ? dlvsym(h, "munmap", "GLIBC_2.2.5") : NULL;
	uint64_t dest = (uintptr_t)foreign_munmap;
	uint8_t code[32], *tramp;
	const ElfW(Sym) *sym = NULL;
	size_t n = 0;
	int32_t rel;
	Dl_info info;
	struct gdrc_ctx *ctx;
	const char *why = NULL;
	char want[64];
	gdrc_status_t s;
	void *page;

	if (!fn || !dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
		return 80;
	switch (f) {
	case FORM_R11:
	case FORM_RAX:
		n = movabs_jmp(code, f == FORM_R11, dest);
		break;
	case FORM_ENDBR_RAX:
		memcpy(code, "\xf3\x0f\x1e\xfa", 4);
		n = 4 + movabs_jmp(code + 4, 0, dest);
		if (sym->st_size < n)
			return 77; /* this libc's munmap is too short */
		break;
	case FORM_REL32:
		tramp = page_near(fn);
		movabs_jmp(tramp, 0, dest);
		rel = (int32_t)((intptr_t)tramp - ((intptr_t)fn + 5));
		code[0] = 0xe9;
		memcpy(code + 1, &rel, 4);
		n = 5;
		dest = (uintptr_t)tramp;
		break;
	case FORM_RIP_SLOT:
		tramp = page_near(fn);
		memcpy(tramp, &dest, 8); /* the pointer the jump reads */
		rel = (int32_t)((intptr_t)tramp - ((intptr_t)fn + 6));
		code[0] = 0xff;
		code[1] = 0x25;
		memcpy(code + 2, &rel, 4);
		n = 6;
		break;
	}
	write_code(fn, code, n);

	s = gdrc_init(NULL, &ctx);
	if (s)
		return 81;
	s = gdrc_hooks_status(ctx, &why);
	printf("    form %d: %s: %s\n", (int)f, gdrc_status_str(s),
	       why ? why : "(no reason)");
	if (s != GDRC_ERR_UNSUPPORTED || !why)
		return 82; /* the foreign patch was not seen */
	snprintf(want, sizeof(want), "%p", (void *)(uintptr_t)dest);
	if (!strstr(why, "already jumps to") || !strstr(why, want) ||
	    strstr(why, "(nil)"))
		return 83; /* the target is not named */
	if (f != FORM_REL32 && !strstr(why, "test_hooks_foreign"))
		return 84; /* the owner's object is not named */
	if (memcmp(fn, code, n))
		return 85; /* the foreign patch was overwritten */
	/* gdrc_init's own unmaps (its region arena's reservation) went
	 * to the owner too: count from here. */
	foreign_calls = 0;
	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || munmap(page, PAGE) || foreign_calls != 1)
		return 86; /* munmap no longer reaches its owner */
	gdrc_fini(ctx);
	return 0;
}

static void run_form(enum form f)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		int rc = child(f);

		fflush(stdout);
		_exit(rc);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message("    form %d: skipped (munmap too short)\n",
			      (int)f);
		return;
	}
	if (WEXITSTATUS(status))
		fail_msg("form %d: child exit %d", (int)f,
			 WEXITSTATUS(status));
}

static void test_hooks_foreign_r11(void **state)
{
	(void)state;
	run_form(FORM_R11);
}

static void test_hooks_foreign_ucx_far_rax(void **state)
{
	(void)state;
	run_form(FORM_RAX);
}

static void test_hooks_foreign_ucx_near_rel32(void **state)
{
	(void)state;
	run_form(FORM_REL32);
}

static void test_hooks_foreign_rip_slot(void **state)
{
	(void)state;
	run_form(FORM_RIP_SLOT);
}

static void test_hooks_foreign_after_endbr64(void **state)
{
	(void)state;
	run_form(FORM_ENDBR_RAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hooks_foreign_r11),
		cmocka_unit_test(test_hooks_foreign_ucx_far_rax),
		cmocka_unit_test(test_hooks_foreign_ucx_near_rel32),
		cmocka_unit_test(test_hooks_foreign_rip_slot),
		cmocka_unit_test(test_hooks_foreign_after_endbr64),
	};

	/* The parent never installs the hooks: each child starts clean. */
	setenv("GDRC_CUDA_LIBRARY", "none", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
