// Catch2's runner: its whole implementation, built once as attn_catch_main for every Catch2 test
// binary (tests/catch_main.cmake).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
