// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_detour.c - the x86-64 detour (lib/hooks/detour_x86_64.c) on
 * functions written in assembly, one per kind of entry it must relocate:
 * libcuda 580's prologue, endbr64, a RIP-relative load, a RIP-relative
 * compare with an immediate after the displacement (libcuda's fifth
 * instruction), a 32-bit stack adjustment, and a relative jump left by
 * another hook (chained).  A call or a conditional branch among the
 * displaced bytes is refused and leaves the code as it was.  Each
 * detoured function is called directly and through its trampoline, and
 * removal puts the original bytes back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hooks/hooks_int.h"

#ifdef __x86_64__

/* Each returns its argument plus a constant (or a flag test). */
long det_libcuda(long a);
long det_endbr(long a);
long det_riprel(long a);
long det_cmp(long a);
long det_sub32(long a);
long det_chain(long a);
long det_target(long a);
long det_call(long a);
long det_jcc(long a);

long det_value = 100;
int det_flag = 7;

__asm__(".text\n"
	".globl det_libcuda\n.p2align 4\ndet_libcuda:\n"
	"\tpush %rbp\n\tmov %rsp, %rbp\n\tpush %r12\n\tsub $8, %rsp\n"
	"\tlea 1(%rdi), %rax\n\tadd $8, %rsp\n\tpop %r12\n\tpop %rbp\n"
	"\tret\n"
	".globl det_endbr\n.p2align 4\ndet_endbr:\n"
	"\tendbr64\n\tpush %rbx\n\tlea 2(%rdi), %rax\n\tpop %rbx\n\tret\n"
	".globl det_riprel\n.p2align 4\ndet_riprel:\n"
	"\tmov det_value(%rip), %rax\n\tadd %rdi, %rax\n\tret\n"
	".globl det_cmp\n.p2align 4\ndet_cmp:\n"
	"\tcmpl $7, det_flag(%rip)\n\tsete %al\n\tmovzbl %al, %eax\n"
	"\tadd %rdi, %rax\n\tret\n"
	".globl det_sub32\n.p2align 4\ndet_sub32:\n"
	"\tsub $0x1000, %rsp\n\tlea 3(%rdi), %rax\n\tadd $0x1000, %rsp\n"
	"\tret\n"
	".globl det_target\n.p2align 4\ndet_target:\n"
	"\tlea 4(%rdi), %rax\n\tret\n"
	".globl det_chain\n.p2align 4\ndet_chain:\n"
	"\t.byte 0xe9\n\t.long det_target - . - 4\n\tud2\n"
	".globl det_call\n.p2align 4\ndet_call:\n"
	"\tcall det_target\n\tret\n"
	".globl det_jcc\n.p2align 4\ndet_jcc:\n"
	"\ttest %rdi, %rdi\n\tje 1f\n\tlea 5(%rdi), %rax\n\tret\n"
	"1:\n\txor %eax, %eax\n\tret\n");

typedef long (*det_fn)(long);

static struct gdrc_detour det;
static int repl_calls;

/* Through the trampoline, times ten: tells the two paths apart. */
static long det_repl(long a)
{
	repl_calls++;
	return ((det_fn)det.orig)(a) * 10;
}

/*
 * Detour fn; a call then goes through det_repl and the original code
 * (want * 10); after removal fn's bytes and result are the original.
 */
static void detour_roundtrip(det_fn fn, long arg, long want)
{
	volatile det_fn call = fn; /* no constant folding of the call */
	uint8_t before[16], after[16];
	char why[200] = "";

	gdrc_code_read(before, (const uint8_t *)fn, sizeof(before));
	assert_int_equal(call(arg), want);
	repl_calls = 0;
	assert_int_equal(gdrc_detour_install(&det, (void *)fn,
					     (void *)det_repl, why,
					     sizeof(why)),
			 0);
	assert_true(gdrc_detour_intact(&det));
	assert_int_equal(call(arg), want * 10);
	assert_int_equal(repl_calls, 1);
	assert_int_equal(((det_fn)det.orig)(arg), want);
	assert_int_equal(repl_calls, 1);
	gdrc_detour_remove(&det);
	assert_false(gdrc_detour_intact(&det));
	gdrc_code_read(after, (const uint8_t *)fn, sizeof(after));
	assert_memory_equal(before, after, sizeof(before));
	assert_int_equal(call(arg), want);
	assert_int_equal(repl_calls, 1);
}

static void test_detour_libcuda_prologue(void **state)
{
	(void)state;
	detour_roundtrip(det_libcuda, 41, 42);
}

static void test_detour_endbr64(void **state)
{
	(void)state;
	detour_roundtrip(det_endbr, 40, 42);
}

static void test_detour_riprel_load(void **state)
{
	(void)state;
	det_value = 100;
	detour_roundtrip(det_riprel, 5, 105);
}

static void test_detour_riprel_compare_with_immediate(void **state)
{
	(void)state;
	det_flag = 7;
	detour_roundtrip(det_cmp, 10, 11);
	det_flag = 6;
	detour_roundtrip(det_cmp, 10, 10);
}

static void test_detour_stack_adjust_imm32(void **state)
{
	(void)state;
	detour_roundtrip(det_sub32, 39, 42);
}

/* Another hook's jump: the trampoline goes where it went. */
static void test_detour_chains_to_an_earlier_hook(void **state)
{
	char why[200] = "";

	(void)state;
	detour_roundtrip(det_chain, 38, 42);
	assert_int_equal(gdrc_detour_install(&det, (void *)det_chain,
					     (void *)det_repl, why,
					     sizeof(why)),
			 0);
	assert_true(det.chained);
	gdrc_detour_remove(&det);
}

static void detour_refused(det_fn fn, const char *what)
{
	uint8_t before[16], after[16];
	char why[200] = "";

	gdrc_code_read(before, (const uint8_t *)fn, sizeof(before));
	assert_int_equal(gdrc_detour_install(&det, (void *)fn,
					     (void *)det_repl, why,
					     sizeof(why)),
			 -1);
	assert_non_null(strstr(why, what));
	assert_null(det.fn);
	assert_false(gdrc_detour_intact(&det));
	gdrc_code_read(after, (const uint8_t *)fn, sizeof(after));
	assert_memory_equal(before, after, sizeof(before));
}

static void test_detour_refuses_a_call(void **state)
{
	(void)state;
	detour_refused(det_call, "cannot relocate the instruction at +0");
	assert_int_equal(det_call(38), 42);
}

static void test_detour_refuses_a_conditional_branch(void **state)
{
	(void)state;
	detour_refused(det_jcc, "cannot relocate the instruction at +3");
	assert_int_equal(det_jcc(37), 42);
	assert_int_equal(det_jcc(0), 0);
}

/* Many detours share islands; each keeps its own trampoline. */
static void test_detour_many_at_once(void **state)
{
	static struct gdrc_detour d[3];
	det_fn fns[3] = { det_libcuda, det_endbr, det_sub32 };
	long want[3] = { 2, 3, 4 };
	char why[200];

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(gdrc_detour_install(&d[i], (void *)fns[i],
						     (void *)det_target, why,
						     sizeof(why)),
				 0);
	for (int i = 0; i < 3; i++) {
		volatile det_fn call = fns[i];

		assert_int_equal(call(1), 5); /* det_target: +4 */
		assert_int_equal(((det_fn)d[i].orig)(1), want[i]);
	}
	for (int i = 0; i < 3; i++)
		gdrc_detour_remove(&d[i]);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fns[i](1), want[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detour_libcuda_prologue),
		cmocka_unit_test(test_detour_endbr64),
		cmocka_unit_test(test_detour_riprel_load),
		cmocka_unit_test(test_detour_riprel_compare_with_immediate),
		cmocka_unit_test(test_detour_stack_adjust_imm32),
		cmocka_unit_test(test_detour_chains_to_an_earlier_hook),
		cmocka_unit_test(test_detour_refuses_a_call),
		cmocka_unit_test(test_detour_refuses_a_conditional_branch),
		cmocka_unit_test(test_detour_many_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void)
{
	return 77; /* detours are x86-64 only */
}
#endif
