# SPDX-License-Identifier: BSD-3-Clause
# Compiler flags shared by every target of the project.
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

set(GDRC_WARN_FLAGS -Wall -Wextra -Wmissing-prototypes -Wformat=2 -Wshadow
	-Wstrict-prototypes -Wno-unused-parameter)
if(GDRC_WERROR)
	list(APPEND GDRC_WARN_FLAGS -Werror)
endif()
add_compile_options(${GDRC_WARN_FLAGS})

if(GDRC_SANITIZE)
	string(REPLACE ";" "," _san "${GDRC_SANITIZE}")
	add_compile_options(-fsanitize=${_san} -fno-omit-frame-pointer
		-fno-sanitize-recover=all)
	add_link_options(-fsanitize=${_san})
endif()

# Coverage for libFuzzer in every object; the fuzz targets link the
# fuzzer's main themselves (tests/fuzz).
if(GDRC_FUZZ)
	if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
		message(FATAL_ERROR "GDRC_FUZZ needs clang (CC=clang-14)")
	endif()
	add_compile_options(-fsanitize=fuzzer-no-link)
endif()
