/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vma.h - what kind of mapping holds a range of host memory.
 *
 * The cache needs one fact per host miss: can anything but a call on
 * this mapping take its pages?  Private memory (the heap, the stack,
 * mmap(MAP_PRIVATE | MAP_ANONYMOUS), anonymous huge pages, a private
 * mapping of a file such as a program's .data) loses pages through calls
 * on the mapping itself (munmap, mremap, madvise, brk, a mapping placed
 * over it), which the event sources see, and a private file mapping
 * through a truncation of its file too (docs/hooks.md lists that gap).
 * Shared memory (memfd, shm_open, tmpfs, hugetlbfs files, SysV shm,
 * MAP_SHARED | MAP_ANONYMOUS) also loses pages through the file (a hole
 * punched, a truncation) and through another process that maps it,
 * which only a kernel notifier sees (docs/design.md, "What takes the
 * pages").
 *
 * The answer comes from the kernel's own list of mappings: the
 * PROCMAP_QUERY ioctl on /proc/self/maps (Linux 6.11 and later, one
 * call per mapping), else a read of /proc/self/maps.  Ordinary context
 * only (it opens files, reads, may allocate nothing but a file).
 * Depends on log/.
 */
#ifndef GDRC_VMA_H
#define GDRC_VMA_H

#include <stdint.h>

enum gdrc_vma_kind {
	GDRC_VMA_PRIVATE = 0, /* every page of the range privately mapped */
	GDRC_VMA_SHARED,      /* some page in a shared mapping */
	GDRC_VMA_UNMAPPED,    /* some page of the range is not mapped */
	GDRC_VMA_UNKNOWN,     /* the kernel's list could not be read */
};

/*
 * The kind of [start, end) (start < end).  For GDRC_VMA_PRIVATE,
 * [*lo_p, *hi_p) is the run of private mappings around it
 * as the kernel listed them (it contains [start, end)); otherwise both
 * are set to start and end.  Thread safe.
 */
enum gdrc_vma_kind gdrc_vma_kind(uintptr_t start, uintptr_t end,
				 uintptr_t *lo_p, uintptr_t *hi_p);

/* How gdrc_vma_kind asks: "PROCMAP_QUERY", "/proc/self/maps", or
 * "unavailable: <why>" once a call found neither. */
const char *gdrc_vma_method(void);

/* Read the text of /proc/self/maps even where PROCMAP_QUERY works (on:
 * 1), or go back to trying the ioctl (0): what a kernel before 6.11
 * gets, for the tests of the text parser. */
void gdrc_vma_force_text(int on);

#endif /* GDRC_VMA_H */
