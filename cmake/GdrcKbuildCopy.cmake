# SPDX-License-Identifier: BSD-3-Clause
# cmake -DSRC=<module sources> -DDST=<build folder> -P GdrcKbuildCopy.cmake
# Copies a Kbuild module's sources (Kbuild, Makefile, *.c, *.h, kept in
# their subfolders; generated *.mod.c left out) into DST, each only if it
# changed, so that Kbuild builds there and never in the source tree.
file(GLOB_RECURSE _files RELATIVE "${SRC}" "${SRC}/*.c" "${SRC}/*.h"
	"${SRC}/Kbuild" "${SRC}/Makefile")
foreach(_f ${_files})
	if(_f MATCHES "\\.mod\\.c$")
		continue()
	endif()
	get_filename_component(_dir "${DST}/${_f}" DIRECTORY)
	file(MAKE_DIRECTORY "${_dir}")
	file(COPY_FILE "${SRC}/${_f}" "${DST}/${_f}" ONLY_IF_DIFFERENT)
endforeach()
