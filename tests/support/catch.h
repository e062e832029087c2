// One include for Catch2 2.x (Debian 12) and 3.x (Debian 13).
#pragma once
#if VSPYRE_CATCH_MAJOR >= 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
#endif
#if VSPYRE_CATCH_MAJOR >= 3
using Catch::Approx;
#endif
// Catch2 2.x already declares ::Approx (Catch::Detail::Approx); `using Catch::Approx` there would
// bring in the vector matcher Catch::Matchers::Approx instead, which hides the class.
