# tests/: each area's fragment adds its programs to TEST_TARGETS. Programs
# named t_* are run by tests/run; they print TAP.
-include tests/*/module.mk
