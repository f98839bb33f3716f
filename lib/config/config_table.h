/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config_table.h - the one table of GDRC_* knobs.  Included by config.c
 * only.  Add a row here and in docs/env.md (a test compares them).
 */
#ifndef GDRC_CONFIG_TABLE_H
#define GDRC_CONFIG_TABLE_H

#include "config.h"

#define GDRC_KNOB(_name, _def, _type, _choices, _field, _help)                \
	{                                                                    \
		.name = _name, .defval = _def, .help = _help, .type = _type, \
		.choices = _choices,                                         \
		.offset = offsetof(struct gdrc_knobs, _field),               \
	}

static const struct gdrc_knob_desc gdrc_knob_table[] = {
	GDRC_KNOB("GDRC_LOG_LEVEL", "warn", GDRC_KNOB_LEVEL, NULL, log_level,
		  "messages at this level and above are logged: error, warn, "
		  "info, debug or trace"),
	GDRC_KNOB("GDRC_MAX_REGIONS", "16384", GDRC_KNOB_UINT, NULL,
		  max_regions,
		  "registrations a context keeps cached; the least recently "
		  "used unused one is evicted first (inf: no limit)"),
	GDRC_KNOB("GDRC_MAX_BYTES", "inf", GDRC_KNOB_UINT, NULL, max_bytes,
		  "bytes a context keeps registered, cached or in use "
		  "(K, M, G, T suffixes; inf: no limit)"),
	GDRC_KNOB("GDRC_MEM_HOOKS", "auto", GDRC_KNOB_CHOICE, "auto|none|uffd",
		  mem_hooks,
		  "auto: watch host frees by patching glibc and CUDA frees by "
		  "detouring the driver's free functions, and cache no host "
		  "memory if the glibc hooks fail; none: the caller reports "
		  "frees with gdrc_invalidate; uffd: patch nothing, watch "
		  "each cached host range with userfaultfd (an unmap of a "
		  "watched range waits for gdrcache's reader thread; GPU hits "
		  "are tag checked)"),
	GDRC_KNOB("GDRC_BACKEND", "auto", GDRC_KNOB_LIST,
		  "auto|verbs|none|dmabuf|peermem|kmod|cufile", backend,
		  "how memory is registered: auto (host memory with ibv_reg_mr "
		  "when a PD is given; GPU memory by the first of dmabuf, "
		  "peermem, kmod that works, else tracked only), verbs (auto, "
		  "but a PD is required), none (track only, keys 0), cufile "
		  "(GPU and host memory with GPUDirect Storage's "
		  "cuFileBufRegister, as gdrc_config.cufile asks), or a "
		  "list of dmabuf, peermem, kmod, none: the GPU backends to try, "
		  "in order"),
	GDRC_KNOB("GDRC_STATS", "0", GDRC_KNOB_BOOL, NULL, stats,
		  "print every counter to the log sink at gdrc_fini, and at "
		  "exit for contexts still open"),
	GDRC_KNOB("GDRC_CHECK", "0", GDRC_KNOB_BOOL, NULL, check,
		  "check the cache's invariants after every change (slow; "
		  "for debugging)"),
	GDRC_KNOB("GDRC_CUDA_LIBRARY", "libcuda.so.1", GDRC_KNOB_STRING, NULL,
		  cuda_library,
		  "the CUDA driver library to load at run time; none turns "
		  "GPU support off"),
	GDRC_KNOB("GDRC_VALIDATE", "auto", GDRC_KNOB_CHOICE,
		  "auto|always|hooks", validate,
		  "always: check a GPU hit's BUFFER_ID against the driver; "
		  "hooks: trust the CUDA free hooks and make no CUDA call on a "
		  "hit (refused if they do not work); auto: always, unless a "
		  "kernel invalidation channel covers the registration"),
	GDRC_KNOB("GDRC_KMOD", "auto", GDRC_KNOB_CHOICE, "auto|off", kmod,
		  "auto: when /dev/gdrcache (gdrcache.ko) is there, cached "
		  "host registrations are watched by the kernel, which also "
		  "sees frees no hook sees; off: never open it"),
	GDRC_KNOB("GDRC_WHOLE_ALLOC_MAX", "64M", GDRC_KNOB_UINT, NULL,
		  whole_alloc_max,
		  "GPU allocations up to this size are registered whole; "
		  "larger ones by the requested range rounded to 64 KiB"),
	GDRC_KNOB("GDRC_GPU_MAX_BYTES", "inf", GDRC_KNOB_UINT, NULL,
		  gpu_max_bytes,
		  "bytes of each GPU a context keeps registered, cached or in "
		  "use; the device's least recently used unused registration "
		  "is evicted first (K, M, G, T suffixes; inf: no limit)"),
	GDRC_KNOB("GDRC_GPU_MAX_REGIONS", "inf", GDRC_KNOB_UINT, NULL,
		  gpu_max_regions,
		  "registrations of each GPU's memory a context keeps, cached "
		  "or in use: with the dmabuf backend, dma-bufs kept exported "
		  "(inf: no limit)"),
	GDRC_KNOB("GDRC_PRELOAD_MR", "1", GDRC_KNOB_BOOL, NULL, preload_mr,
		  "libgdrcache-preload.so serves the program's ibv_reg_mr and "
		  "ibv_dereg_mr from the cache; 0 passes them through and "
		  "only installs the hooks"),
	GDRC_KNOB("GDRC_MISUSE", "auto", GDRC_KNOB_CHOICE, "auto|abort|warn",
		  misuse,
		  "what a detected misuse does after its error line (a call "
		  "on a finished context, a second gdrc_fini, a double put, a "
		  "put of something that is not a registration): abort, or "
		  "warn and change nothing; auto: abort in a debug build (no "
		  "NDEBUG), warn in a release build; process-wide, the last "
		  "gdrc_init sets it"),
	GDRC_KNOB("GDRC_IO_URING_SLOTS", "16384", GDRC_KNOB_UINT, NULL,
		  io_uring_slots,
		  "slots of the buffer table a context with an io_uring ring "
		  "registers on it (1 to 16384, the kernel's most): its "
		  "registrations alive, cached or in use; the least recently "
		  "used unused one is evicted when the table is full"),
	GDRC_KNOB("GDRC_CUFILE_LIBRARY", "libcufile.so.0", GDRC_KNOB_STRING,
		  NULL, cufile_library,
		  "the GPUDirect Storage library a context that registers "
		  "with cuFile loads at run time; none turns the cufile "
		  "backend off"),
	GDRC_KNOB("GDRC_PRELOAD_CUFILE", "1", GDRC_KNOB_BOOL, NULL,
		  preload_cufile,
		  "libgdrcache-preload.so serves the program's "
		  "cuFileBufRegister, cuFileBufDeregister, cuFileRead and "
		  "cuFileWrite from a cache that registers with cuFile; 0 "
		  "passes them through"),
};

#endif /* GDRC_CONFIG_TABLE_H */
