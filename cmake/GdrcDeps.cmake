# SPDX-License-Identifier: BSD-3-Clause
# Optional dependencies: libibverbs (registration), cmocka (tests), UCX
# (the benchmark's reference).  Each is found through pkg-config.
find_package(PkgConfig)
find_package(Threads REQUIRED)

set(GDRC_HAVE_VERBS OFF)
if(NOT GDRC_WITH_VERBS STREQUAL "OFF" AND PKG_CONFIG_FOUND)
	pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
	if(IBVERBS_FOUND)
		set(GDRC_HAVE_VERBS ON)
	endif()
endif()
if(GDRC_WITH_VERBS STREQUAL "ON" AND NOT GDRC_HAVE_VERBS)
	message(FATAL_ERROR "GDRC_WITH_VERBS=ON but libibverbs was not found")
endif()
message(STATUS "gdrcache: verbs backend ${GDRC_HAVE_VERBS}")

if(PKG_CONFIG_FOUND)
	pkg_check_modules(CMOCKA IMPORTED_TARGET cmocka)
	pkg_check_modules(UCX IMPORTED_TARGET ucx)
endif()
