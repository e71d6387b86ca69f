// Catch2 (v2) entry point for ck_tests. Tags: [unit] [model] [slow] [cuda].
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
