# SPDX-License-Identifier: BSD-3-Clause
# Optional dependencies, each as an imported target the rest of the build
# links: PkgConfig::IBVERBS (registration), PkgConfig::URING (storage
# registration: io_uring fixed buffers), PkgConfig::CMOCKA (tests),
# PkgConfig::UCX (the benchmark's reference).  Found with pkg-config when
# there is one, else by header and library name, under the same target
# name (a machine with the Debian packages unpacked under
# CMAKE_PREFIX_PATH and no pkg-config: the GPU machine).
find_package(PkgConfig QUIET)
find_package(Threads REQUIRED)

# gdrc_find_dep(<NAME> <pkg-config module> <header> <library>...)
# Sets <NAME>_FOUND and defines PkgConfig::<NAME> when found.
function(gdrc_find_dep name module header)
	set(found FALSE)
	if(PKG_CONFIG_FOUND)
		pkg_check_modules(${name} QUIET IMPORTED_TARGET GLOBAL ${module})
		set(found ${${name}_FOUND})
	endif()
	if(NOT found)
		find_path(${name}_INCLUDE_DIR ${header})
		set(libs "")
		foreach(lib ${ARGN})
			find_library(${name}_LIB_${lib} ${lib})
			if(${name}_LIB_${lib})
				list(APPEND libs ${${name}_LIB_${lib}})
			endif()
		endforeach()
		list(LENGTH ARGN nwant)
		list(LENGTH libs nhave)
		if(${name}_INCLUDE_DIR AND nhave EQUAL nwant)
			add_library(PkgConfig::${name} INTERFACE IMPORTED GLOBAL)
			target_include_directories(PkgConfig::${name} INTERFACE
				${${name}_INCLUDE_DIR})
			target_link_libraries(PkgConfig::${name} INTERFACE ${libs})
			set(found TRUE)
		endif()
	endif()
	set(${name}_FOUND ${found} PARENT_SCOPE)
endfunction()

set(GDRC_HAVE_VERBS OFF)
if(NOT GDRC_WITH_VERBS STREQUAL "OFF")
	gdrc_find_dep(IBVERBS libibverbs infiniband/verbs.h ibverbs)
	set(GDRC_HAVE_VERBS ${IBVERBS_FOUND})
endif()
if(GDRC_WITH_VERBS STREQUAL "ON" AND NOT GDRC_HAVE_VERBS)
	message(FATAL_ERROR "GDRC_WITH_VERBS=ON but libibverbs was not found")
endif()
message(STATUS "gdrcache: verbs backend ${GDRC_HAVE_VERBS}")

set(GDRC_HAVE_URING OFF)
if(NOT GDRC_WITH_URING STREQUAL "OFF")
	gdrc_find_dep(URING liburing liburing.h uring)
	set(GDRC_HAVE_URING ${URING_FOUND})
endif()
if(GDRC_WITH_URING STREQUAL "ON" AND NOT GDRC_HAVE_URING)
	message(FATAL_ERROR "GDRC_WITH_URING=ON but liburing was not found")
endif()
message(STATUS "gdrcache: io_uring backend ${GDRC_HAVE_URING}")

gdrc_find_dep(CMOCKA cmocka cmocka.h cmocka)
gdrc_find_dep(UCX ucx ucs/memory/rcache.h ucp ucs ucm)
find_path(UTHASH_INCLUDE_DIR uthash.h)
if(NOT UTHASH_INCLUDE_DIR)
	message(FATAL_ERROR "uthash.h not found (Debian: uthash-dev)")
endif()
