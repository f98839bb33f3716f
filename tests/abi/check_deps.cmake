# SPDX-License-Identifier: BSD-3-Clause
#
# check_deps.cmake - the modules of lib/ keep their dependency rule.
#
#   cmake -DSRC=<path to lib/> -P check_deps.cmake
#
# Reads every #include "..." line of lib/**/*.c and *.h (system includes,
# <...>, are always fine), resolves the name the way the build does (the
# including file's directory first, then lib/), and checks it against
# the rule of the including file's module:
#
#   log     its own headers, gdrc_int.h
#   itree   its own headers, gdrc_int.h
#   stats   its own headers, gdrc_int.h, log/log.h
#   config  its own headers, gdrc_int.h, log/log.h
#   hooks   hooks/*, gdrc_int.h, log/log.h; hooks/uffd.c also
#           cache/invq.h (its reader marks itself a thread that never
#           waits for a queue's lock)
#   pin     pin/*, gdrc_int.h, log/log.h; cufile/* and cuda/* (the
#           cufile backend calls libcufile in the memory's own context)
#   cufile  cufile/*, cuda/cuda_types.h, gdrc_int.h, log/log.h
#   cache   cache/*, gdrc_int.h, log/log.h, itree/itree.h, pin/pin.h
#           (never hooks/ or config/)
#   req     req/*, cache/cache.h (the request type), classify/*, cuda/*,
#           gdrc_int.h, log/log.h
#   vma     vma/*, gdrc_int.h, log/log.h
#   preload preload/*, and the cuFile and CUDA type declarations
#           (cufile/cufile_types.h, cuda/cuda_types.h: types only; the
#           public header is not a module: it is a layer over
#           libgdrcache.so.0's public API)
#   lib/gdrc_int.h      nothing (it depends on the C library only)
#   lib/api.c, api_*.c, api_int.h   any header of lib/ (the API layer)
#   other files of lib/ gdrc_int.h and the headers of one module at most
#
# A directory of lib/ with no rule here fails too: add its rule.  Fails
# with one line per offending include, naming the file and the include.
cmake_minimum_required(VERSION 3.16)

if(NOT DEFINED SRC OR "${SRC}" STREQUAL "")
	message(FATAL_ERROR "check_deps: -DSRC=<path to lib/> is required")
endif()
get_filename_component(SRC "${SRC}" ABSOLUTE)
if(NOT IS_DIRECTORY "${SRC}")
	message(FATAL_ERROR "check_deps: SRC ${SRC} is not a directory")
endif()

# Allowed include targets (paths relative to lib/, as regexes) by module.
set(_allow_log "^log/" "^gdrc_int\\.h$")
set(_allow_itree "^itree/" "^gdrc_int\\.h$")
set(_allow_stats "^stats/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_config "^config/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_hooks "^hooks/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_pin "^pin/" "^gdrc_int\\.h$" "^log/log\\.h$" "^cufile/" "^cuda/")
set(_allow_cufile "^cufile/" "^cuda/cuda_types\\.h$" "^gdrc_int\\.h$"
	"^log/log\\.h$")
set(_allow_cache "^cache/" "^gdrc_int\\.h$" "^log/log\\.h$"
	"^itree/itree\\.h$" "^pin/pin\\.h$")
set(_allow_cuda "^cuda/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_classify "^classify/" "^cuda/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_kchan "^kchan/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_vma "^vma/" "^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_req "^req/" "^cache/cache\\.h$" "^classify/" "^cuda/"
	"^gdrc_int\\.h$" "^log/log\\.h$")
set(_allow_preload "^preload/" "^cufile/cufile_types\\.h$"
	"^cuda/cuda_types\\.h$")
set(_modules log itree stats config hooks pin cache cuda classify kchan
	req preload cufile vma)

file(GLOB_RECURSE _files RELATIVE "${SRC}" "${SRC}/*.c" "${SRC}/*.h")
list(SORT _files)
list(LENGTH _files _nfiles)
if(_nfiles EQUAL 0)
	message(FATAL_ERROR "check_deps: no .c or .h file under ${SRC}")
endif()

set(_errors "")
set(_nincludes 0)
foreach(_rel IN LISTS _files)
	get_filename_component(_dir "${_rel}" DIRECTORY)
	if(_dir STREQUAL "")
		set(_mod "")
	else()
		string(REGEX REPLACE "/.*$" "" _mod "${_dir}")
		if(NOT _mod IN_LIST _modules)
			list(APPEND _errors
				"lib/${_rel}: module lib/${_mod}/ has no dependency rule in check_deps.cmake")
			continue()
		endif()
	endif()

	file(STRINGS "${SRC}/${_rel}" _lines
		REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
	set(_other_mod "") # top-level files: the one module they use
	foreach(_line IN LISTS _lines)
		if(NOT _line MATCHES "\"([^\"]+)\"")
			continue()
		endif()
		set(_inc "${CMAKE_MATCH_1}")
		math(EXPR _nincludes "${_nincludes} + 1")

		# The kernel/user ABI header lives with the module, outside lib/;
		# only lib/kchan/ speaks to the module.
		if(_inc MATCHES "^kmod/uapi/" AND EXISTS "${SRC}/../${_inc}")
			if(NOT _rel MATCHES "^kchan/")
				list(APPEND _errors
					"lib/${_rel}: only lib/kchan/ may include ${_inc}")
			endif()
			continue()
		endif()
		# Resolve: the including file's directory, then lib/.
		if(NOT _dir STREQUAL "" AND EXISTS "${SRC}/${_dir}/${_inc}")
			get_filename_component(_abs "${SRC}/${_dir}/${_inc}" ABSOLUTE)
		elseif(EXISTS "${SRC}/${_inc}")
			get_filename_component(_abs "${SRC}/${_inc}" ABSOLUTE)
		else()
			list(APPEND _errors
				"lib/${_rel}: #include \"${_inc}\" is not a header of lib/")
			continue()
		endif()
		file(RELATIVE_PATH _target "${SRC}" "${_abs}")
		if(_target MATCHES "^\\.\\./")
			list(APPEND _errors
				"lib/${_rel}: #include \"${_inc}\" reaches outside lib/")
			continue()
		endif()

		set(_ok FALSE)
		if(_rel MATCHES "^api(_[a-z]+)?\\.[ch]$" OR _rel STREQUAL "api_int.h")
			set(_ok TRUE)
		elseif(_rel STREQUAL "hooks/uffd.c" AND
		       _target STREQUAL "cache/invq.h")
			set(_ok TRUE)
		elseif(_rel STREQUAL "gdrc_int.h")
			set(_why "gdrc_int.h may include no header of lib/")
		elseif(_mod STREQUAL "")
			# Another top-level file: gdrc_int.h and one module.
			if(_target STREQUAL "gdrc_int.h")
				set(_ok TRUE)
			else()
				string(REGEX REPLACE "/.*$" "" _tmod "${_target}")
				if(_target STREQUAL _tmod)
					set(_why "only api.c includes top-level headers other than gdrc_int.h")
				elseif(_other_mod STREQUAL "" OR _other_mod STREQUAL _tmod)
					set(_other_mod "${_tmod}")
					set(_ok TRUE)
				else()
					set(_why "it already includes ${_other_mod}/: only api.c may include more than one module")
				endif()
			endif()
		else()
			foreach(_re IN LISTS _allow_${_mod})
				if(_target MATCHES "${_re}")
					set(_ok TRUE)
				endif()
			endforeach()
			string(REPLACE ";" ", " _allowed "${_allow_${_mod}}")
			string(REPLACE "^" "" _allowed "${_allowed}")
			string(REPLACE "\\" "" _allowed "${_allowed}")
			string(REPLACE "$" "" _allowed "${_allowed}")
			set(_why "module ${_mod} may include only ${_allowed}")
		endif()
		if(NOT _ok)
			list(APPEND _errors
				"lib/${_rel}: #include \"${_inc}\" (lib/${_target}): ${_why}")
		endif()
	endforeach()
endforeach()

message(STATUS "check_deps: ${_nfiles} files, ${_nincludes} quoted includes under ${SRC}")
if(_errors)
	string(REPLACE ";" "\n  " _msg "${_errors}")
	message(FATAL_ERROR "check_deps: the module dependency rule is broken:\n  ${_msg}")
endif()
message(STATUS "check_deps: OK")
