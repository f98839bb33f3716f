/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.h - every GDRC_* knob, parsed once at gdrc_init.
 *
 * The knobs live in one table (config_table.h) with their default and
 * help text; docs/env.md is kept in sync with it by a test.  An invalid
 * value is an error, never silently replaced by the default.
 *
 * Depends only on log/.
 */
#ifndef GDRC_CONFIG_H
#define GDRC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <gdrcache.h>

enum gdrc_knob_hooks {
	GDRC_KNOB_HOOKS_AUTO = 0, /* install; uncached host memory if not */
	GDRC_KNOB_HOOKS_NONE = 1, /* caller reports frees (gdrc_invalidate) */
	GDRC_KNOB_HOOKS_UFFD = 2, /* userfaultfd watches cached host ranges */
};

/*
 * GDRC_BACKEND is a list (GDRC_KNOB_LIST): up to GDRC_KNOB_LIST_MAX of
 * these, the first in the lowest four bits of the field, 0 ending it.
 * A list of one entry reads as that entry's value.
 */
enum gdrc_knob_backend {
	GDRC_KNOB_BACKEND_AUTO = 1,    /* GPU: dmabuf, peermem, kmod, none;
					* host: verbs with a PD, else none */
	GDRC_KNOB_BACKEND_VERBS = 2,   /* as auto, but a PD is required */
	GDRC_KNOB_BACKEND_NONE = 3,    /* track only, register nothing */
	GDRC_KNOB_BACKEND_DMABUF = 4,  /* GPU backends, in a list */
	GDRC_KNOB_BACKEND_PEERMEM = 5,
	GDRC_KNOB_BACKEND_KMOD = 6,
	GDRC_KNOB_BACKEND_CUFILE = 7,  /* GPU and host memory with cuFile;
					* alone in the list */
};

/* Choices (bit: choice index) a GDRC_KNOB_LIST value takes only alone:
 * auto, verbs, cufile. */
#define GDRC_KNOB_LIST_ALONE                                                \
	((1u << (GDRC_KNOB_BACKEND_AUTO - 1)) |                              \
	 (1u << (GDRC_KNOB_BACKEND_VERBS - 1)) |                             \
	 (1u << (GDRC_KNOB_BACKEND_CUFILE - 1)))

#define GDRC_KNOB_LIST_MAX 4

/* Entry i (0-based) of a list knob's value, 0 past its end. */
static inline int gdrc_knob_list_at(uint32_t list, int i)
{
	return i < GDRC_KNOB_LIST_MAX ? (int)((list >> (4 * i)) & 0xf) : 0;
}

enum gdrc_knob_validate {
	GDRC_KNOB_VALIDATE_AUTO = 0,   /* always, until a kernel channel */
	GDRC_KNOB_VALIDATE_ALWAYS = 1, /* BUFFER_ID check on every GPU hit */
	GDRC_KNOB_VALIDATE_HOOKS = 2,  /* trust free interception; no check */
};

enum gdrc_knob_kmod {
	GDRC_KNOB_KMOD_AUTO = 0, /* use /dev/gdrcache when it is there */
	GDRC_KNOB_KMOD_OFF = 1,
};

enum gdrc_knob_misuse {
	GDRC_KNOB_MISUSE_AUTO = 0,  /* debug build: abort; release: warn */
	GDRC_KNOB_MISUSE_ABORT = 1, /* log, then abort() */
	GDRC_KNOB_MISUSE_WARN = 2,  /* log, count, change nothing */
};

#define GDRC_KNOB_STR_MAX 256

/* Effective values of every knob. */
struct gdrc_knobs {
	int log_level;        /* enum gdrc_log_level */
	uint64_t max_regions; /* GDRC_LIMIT_NONE for no limit */
	uint64_t max_bytes;   /* GDRC_LIMIT_NONE for no limit */
	int mem_hooks;        /* enum gdrc_knob_hooks */
	uint32_t backend;     /* a list of enum gdrc_knob_backend */
	int stats;            /* print counters at fini */
	int check;            /* check invariants after every change */
	char cuda_library[GDRC_KNOB_STR_MAX]; /* "none": no GPU support */
	int validate;         /* enum gdrc_knob_validate */
	uint64_t whole_alloc_max; /* bytes */
	uint64_t gpu_max_bytes;   /* per device; GDRC_LIMIT_NONE: none */
	uint64_t gpu_max_regions; /* per device; GDRC_LIMIT_NONE: none */
	int kmod;             /* enum gdrc_knob_kmod */
	int preload_mr;       /* libgdrcache-preload caches ibv_reg_mr */
	int misuse;           /* enum gdrc_knob_misuse */
	uint64_t io_uring_slots; /* a ring's buffer table */
	char cufile_library[GDRC_KNOB_STR_MAX]; /* "none": no cuFile */
	int preload_cufile;   /* libgdrcache-preload serves cuFile calls */
};

enum gdrc_knob_type {
	GDRC_KNOB_UINT,   /* decimal, K/M/G/T suffix (powers of 1024), inf */
	GDRC_KNOB_BOOL,   /* 1/0, y/n, yes/no, on/off, true/false */
	GDRC_KNOB_CHOICE, /* one word of a '|'-separated list */
	GDRC_KNOB_LEVEL,  /* a log level name or 0..4 */
	GDRC_KNOB_STRING, /* any text shorter than GDRC_KNOB_STR_MAX */
	GDRC_KNOB_LIST,   /* words of choices joined by ',', each at most
			   * once; those of GDRC_KNOB_LIST_ALONE only
			   * alone (uint32_t,
			   * 4 bits an entry: choice index + 1) */
};

struct gdrc_knob_desc {
	const char *name;     /* environment variable */
	const char *defval;   /* default, in the same syntax */
	const char *help;     /* one sentence */
	int type;             /* enum gdrc_knob_type */
	const char *choices;  /* CHOICE, LIST: "auto|none" */
	size_t offset;        /* in struct gdrc_knobs */
};

/*
 * Fill knobs from the environment, then the defaults.
 * @return GDRC_OK, or GDRC_ERR_INVALID_PARAM after logging the knob and
 *         its bad value.
 */
gdrc_status_t gdrc_config_load(struct gdrc_knobs *knobs);

/* Parse one value as the knob at index i would; for tests. */
gdrc_status_t gdrc_config_parse(size_t i, const char *value,
				struct gdrc_knobs *knobs);

size_t gdrc_config_count(void);
const struct gdrc_knob_desc *gdrc_config_desc(size_t i);

#endif /* GDRC_CONFIG_H */
