# SPDX-License-Identifier: BSD-3-Clause
#
# check_exports.cmake - the shared library exports the public API and
# nothing else.
#
#   cmake -DLIB=<path to libgdrcache.so> -DHEADER=<path to gdrcache.h>
#         [-DMAP=<path to libgdrcache.map>] [-DNM=<nm>] -P check_exports.cmake
#
# Runs `nm -D --defined-only` on LIB and fails if an exported symbol
#   - does not start with "gdrc_",
#   - is a function not declared GDRC_API in HEADER, or a data symbol not
#     declared in HEADER at all,
# or if a function declared GDRC_API in HEADER is not exported; with MAP,
# also if the version script's global lists use a wildcard or miss a
# GDRC_API function.  Symbol
# versions (name@@GDRC_0.1), version nodes (GDRC_0.1, type A) and the
# linker's own symbols (_init, _fini, _edata, _end, __bss_start) are
# ignored.  Prints every symbol it checked.
cmake_minimum_required(VERSION 3.16)

foreach(_var LIB HEADER)
	if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
		message(FATAL_ERROR "check_exports: -D${_var}=<path> is required")
	endif()
	if(NOT EXISTS "${${_var}}")
		message(FATAL_ERROR "check_exports: ${_var} ${${_var}} does not exist")
	endif()
endforeach()

if(NOT NM)
	find_program(NM NAMES nm llvm-nm)
	if(NOT NM)
		message(FATAL_ERROR "check_exports: nm not found (pass -DNM=<nm>)")
	endif()
endif()

# ---- The header: functions declared GDRC_API, and the declared text ----

file(READ "${HEADER}" _hdr)
# Comments go first, so that names only mentioned in prose do not count;
# then preprocessor lines (joined across backslash-newlines), which
# include GDRC_API's own definition.
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " _hdr "${_hdr}")
string(REGEX REPLACE "//[^\n]*" " " _hdr "${_hdr}")
string(REGEX REPLACE "\\\\\n" " " _hdr "${_hdr}")
string(REGEX REPLACE "(^|\n)[ \t]*#[^\n]*" "\\1" _hdr "${_hdr}")

set(_api "")
string(REGEX MATCHALL "GDRC_API[^;{(]*\\(" _decls "${_hdr}")
foreach(_d IN LISTS _decls)
	if(NOT _d MATCHES "([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\\($")
		message(FATAL_ERROR "check_exports: cannot read a name in '${_d}'")
	endif()
	list(APPEND _api "${CMAKE_MATCH_1}")
endforeach()
list(REMOVE_DUPLICATES _api)
list(LENGTH _api _napi)
if(_napi EQUAL 0)
	message(FATAL_ERROR "check_exports: no GDRC_API declaration in ${HEADER}")
endif()

# ---- The library's dynamic symbol table ----

execute_process(COMMAND "${NM}" -D --defined-only "${LIB}"
	OUTPUT_VARIABLE _nm ERROR_VARIABLE _nm_err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
	message(FATAL_ERROR "check_exports: ${NM} -D --defined-only ${LIB} "
		"failed (${_rc}): ${_nm_err}")
endif()

set(_ignored _init _fini _edata _end __bss_start)
set(_exported "")
set(_errors "")
string(REPLACE "\n" ";" _lines "${_nm}")
foreach(_line IN LISTS _lines)
	if(_line STREQUAL "")
		continue()
	endif()
	# "<value> <type> <name>[@[@]<version>]"; the value may be blank.
	if(NOT _line MATCHES "^[0-9a-fA-F]* *([A-Za-z?]) +([^ ]+)$")
		list(APPEND _errors "cannot parse nm line '${_line}'")
		continue()
	endif()
	set(_type "${CMAKE_MATCH_1}")
	set(_name "${CMAKE_MATCH_2}")
	string(REGEX REPLACE "@.*$" "" _name "${_name}")
	if(_type STREQUAL "A" OR _name IN_LIST _ignored)
		continue()
	endif()
	list(APPEND _exported "${_name}")
	message(STATUS "exported: ${_name} (${_type})")

	if(NOT _name MATCHES "^gdrc_")
		list(APPEND _errors
			"${_name} (${_type}) is exported but lacks the gdrc_ prefix")
		continue()
	endif()
	if(NOT _name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
		list(APPEND _errors "${_name} (${_type}) is not a C identifier")
		continue()
	endif()
	if(_type MATCHES "^[TtWi]$")
		# A function: declared GDRC_API.
		if(NOT _name IN_LIST _api)
			list(APPEND _errors
				"function ${_name} is exported but not declared GDRC_API in ${HEADER}")
		endif()
	elseif(NOT _hdr MATCHES "[^A-Za-z0-9_]${_name}[ \t\r\n]*[(;[]")
		list(APPEND _errors
			"data symbol ${_name} (${_type}) is exported but not declared in ${HEADER}")
	endif()
endforeach()

list(LENGTH _exported _nexp)
if(_nexp EQUAL 0)
	list(APPEND _errors "no symbol exported by ${LIB} (nm output: '${_nm}')")
endif()

foreach(_fn IN LISTS _api)
	if(NOT _fn IN_LIST _exported)
		list(APPEND _errors
			"${_fn} is declared GDRC_API in ${HEADER} but not exported")
	endif()
endforeach()

# ---- The version script, when given: every symbol listed by name ----
# A wildcard in a released node would silently take in every function
# added later (docs/versioning.md); a symbol must be in exactly one node.
if(DEFINED MAP AND NOT MAP STREQUAL "")
	file(READ "${MAP}" _map)
	# ';' ends each name in the script but separates CMake list items.
	string(REPLACE ";" "," _map "${_map}")
	string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " _map "${_map}")
	string(REGEX MATCHALL "global:[^:}]*" _globals "${_map}")
	set(_listed "")
	foreach(_g IN LISTS _globals)
		string(REGEX REPLACE "local$" "" _g "${_g}")
		if(_g MATCHES "\\*")
			list(APPEND _errors "${MAP}: a global list has a wildcard")
		endif()
		string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*," _syms "${_g}")
		foreach(_s IN LISTS _syms)
			string(REPLACE "," "" _s "${_s}")
			if(_s IN_LIST _listed)
				list(APPEND _errors "${MAP}: ${_s} is listed twice")
			endif()
			list(APPEND _listed "${_s}")
		endforeach()
	endforeach()
	foreach(_fn IN LISTS _api)
		if(NOT _fn IN_LIST _listed)
			list(APPEND _errors "${_fn} is not listed by name in ${MAP}")
		endif()
	endforeach()
	message(STATUS "version script lists: ${_listed}")
endif()

message(STATUS "checked ${_nexp} exported symbols against ${_napi} GDRC_API "
	"declarations: ${_api}")
if(_errors)
	string(REPLACE ";" "\n  " _msg "${_errors}")
	message(FATAL_ERROR "check_exports: ${LIB}:\n  ${_msg}")
endif()
message(STATUS "check_exports: OK")
