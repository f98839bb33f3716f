// SPDX-License-Identifier: BSD-3-Clause
/*
 * test_cuda_types.c - lib/cuda/cuda_types.h against the CUDA toolkit's
 * <cuda.h>: every constant we declare ourselves (so that building
 * libgdrcache needs no toolkit) must have the driver ABI's value, and
 * every type the size of the real one.  The names come from
 * cuda_types_list.h, valued twice: by our header (cuda_types_ours.c) and
 * by cuda.h (cuda_types_real.c).  A third test reads cuda_types.h itself
 * and fails on a constant the list forgot.
 *
 * Needs the toolkit's headers at build time only: no driver, no GPU.
 * Built and registered (label "unit") only where CMake finds a CUDA
 * toolkit; run it with: ctest -R test_cuda_types
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_types_list.h"

#define GDRC_ONE(name) +1
static const size_t nconst = 0 GDRC_CUDA_CONSTANTS(GDRC_ONE);
static const size_t ntypes = 0 GDRC_CUDA_TYPEDEFS(GDRC_ONE);

/* Compare two value tables; report every difference, fail on the first. */
static void compare(const char *what, const char *const *names,
		    const long long *ours, const long long *real, size_t n)
{
	const char *first = NULL;
	long long first_ours = 0, first_real = 0;

	for (size_t i = 0; i < n; i++) {
		if (ours[i] == real[i])
			continue;
		print_error("%s %s: cuda_types.h says %lld, cuda.h says %lld\n",
			    what, names[i], ours[i], real[i]);
		if (!first) {
			first = names[i];
			first_ours = ours[i];
			first_real = real[i];
		}
	}
	if (first)
		fail_msg("%s %s differs: ours %lld, cuda.h %lld", what, first,
			 first_ours, first_real);
}

static void test_cuda_types_constants(void **state)
{
	(void)state;
	assert_true(nconst > 0);
	compare("constant", gdrc_names, gdrc_ours, gdrc_real, nconst);
}

static void test_cuda_types_sizes(void **state)
{
	(void)state;
	assert_true(ntypes > 0);
	compare("sizeof", gdrc_type_names, gdrc_ours_sizes, gdrc_real_sizes,
		ntypes);
}

static int listed(const char *name)
{
	for (size_t i = 0; i < nconst; i++)
		if (!strcmp(gdrc_names[i], name))
			return 1;
	return 0;
}

/* Every "#define NAME value" of cuda_types.h, but our own GDRC_* names
 * (the include guard, GDRC_GPU_PAGE_SIZE), is in the list. */
static void test_cuda_types_list_complete(void **state)
{
	const char *path = GDRC_SOURCE_DIR "/lib/cuda/cuda_types.h";
	char line[512], name[128];
	unsigned seen = 0, missing = 0;
	FILE *f;

	(void)state;
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		const char *p = line;
		size_t n = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "#define", 7))
			continue;
		p += 7;
		while (*p == ' ' || *p == '\t')
			p++;
		while ((isalnum((unsigned char)*p) || *p == '_') &&
		       n < sizeof(name) - 1)
			name[n++] = *p++;
		name[n] = '\0';
		if (!n || !strncmp(name, "GDRC_", 5))
			continue;
		seen++;
		if (!listed(name)) {
			print_error("%s is in cuda_types.h but not in "
				    "tests/gpu/cuda_types_list.h\n", name);
			missing++;
		}
	}
	fclose(f);
	assert_int_equal(missing, 0);
	assert_int_equal(seen, nconst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuda_types_constants),
		cmocka_unit_test(test_cuda_types_sizes),
		cmocka_unit_test(test_cuda_types_list_complete),
	};

	return cmocka_run_group_tests_name("cuda_types", tests, NULL, NULL);
}
