# SPDX-License-Identifier: BSD-3-Clause
# Builds gdrcache.ko through kmod's own Kbuild makefile, as target
# gdrcache-kmod (part of "all" when enabled), in <build>/kmod: a copy of
# the sources, so that the source tree stays clean and two builds never
# race.  GDRC_BUILD_KMOD: ON fails without kernel headers, AUTO builds
# when they are there, OFF never.  The kernel is the running one unless
# GDRC_KMOD_KVER says otherwise (the VM lab's tests build their own).
set(GDRC_BUILD_KMOD AUTO CACHE STRING
	"Build kmod/gdrcache.ko: ON, OFF or AUTO (when kernel headers exist)")
set(GDRC_KMOD_KVER "" CACHE STRING
	"Kernel to build the module for (default: the running one)")
set(GDRC_NV_P2P_INCLUDE "" CACHE PATH
	"Folder holding nv-p2p.h for GPU pinning (empty: built without)")

if(GDRC_BUILD_KMOD STREQUAL "OFF")
	return()
endif()

set(_kver "${GDRC_KMOD_KVER}")
if(NOT _kver)
	execute_process(COMMAND uname -r OUTPUT_VARIABLE _kver
		OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
find_program(GDRC_MAKE NAMES make gmake)
if(NOT EXISTS /lib/modules/${_kver}/build OR NOT GDRC_MAKE)
	if(GDRC_BUILD_KMOD STREQUAL "ON")
		message(FATAL_ERROR "GDRC_BUILD_KMOD=ON: no headers in /lib/modules/${_kver}/build (Debian: linux-headers-amd64)")
	endif()
	message(STATUS "gdrcache: kernel module not built (no headers for ${_kver})")
	return()
endif()

set(_nv "")
if(GDRC_NV_P2P_INCLUDE)
	set(_nv NV_P2P_INCLUDE=${GDRC_NV_P2P_INCLUDE})
endif()
add_custom_target(gdrcache-kmod ALL
	COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}/kmod
		-DDST=${PROJECT_BINARY_DIR}/kmod
		-P ${PROJECT_SOURCE_DIR}/cmake/GdrcKbuildCopy.cmake
	COMMAND ${GDRC_MAKE} -s -C ${PROJECT_BINARY_DIR}/kmod KVER=${_kver}
		${_nv} modules
	COMMENT "Building ${PROJECT_BINARY_DIR}/kmod/gdrcache.ko for ${_kver}"
	VERBATIM)
message(STATUS "gdrcache: kernel module for ${_kver}"
	" (nv-p2p: ${GDRC_NV_P2P_INCLUDE})")
