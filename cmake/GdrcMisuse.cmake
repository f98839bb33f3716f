# SPDX-License-Identifier: BSD-3-Clause
# gdrc_tests_misuse_abort(): every test of the calling directory runs
# with GDRC_MISUSE=abort (docs/env.md), whatever the build type: a misuse
# the library detects stops the test at the faulty call.  Each directory
# that adds tests calls it last (CMake 3.25 sets test properties only in
# the directory that made the test).  Tests of misuse set warn themselves.
function(gdrc_tests_misuse_abort)
	get_property(_tests DIRECTORY PROPERTY TESTS)
	foreach(_t ${_tests})
		set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT
			GDRC_MISUSE=abort)
	endforeach()
endfunction()
