# Every dependency comes from a Debian package (bookworm or trixie).
find_package(PkgConfig REQUIRED)
pkg_check_modules(SYSTEMC REQUIRED IMPORTED_TARGET systemc>=2.3.3)
# SystemC checks at link time that its users were compiled for the same C++ standard as the
# library (sc_api_version_..._cxxNNNNNNL). Read the library's and compile against that.
find_library(VSPYRE_SYSTEMC_LIB NAMES systemc HINTS ${SYSTEMC_LIBRARY_DIRS} REQUIRED)
file(STRINGS ${VSPYRE_SYSTEMC_LIB} _sc_api LIMIT_COUNT 1 REGEX "sc_api_version_[0-9_]+_cxx[0-9]+L")
string(REGEX MATCH "cxx([0-9]+)L" _sc_cxx "${_sc_api}")
if(CMAKE_MATCH_1)
  message(STATUS "vspyre: SystemC library built for C++ ${CMAKE_MATCH_1}")
  set_property(TARGET PkgConfig::SYSTEMC APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS SC_CPLUSPLUS=${CMAKE_MATCH_1}L)
endif()
# The cores spawn their engine threads with sc_spawn.
set_property(TARGET PkgConfig::SYSTEMC APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS SC_INCLUDE_DYNAMIC_PROCESSES)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)

# yaml-cpp 0.7 (bookworm) exports `yaml-cpp`, 0.8 (trixie) exports `yaml-cpp::yaml-cpp`.
if(TARGET yaml-cpp::yaml-cpp)
  set(VSPYRE_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(VSPYRE_YAML_TARGET yaml-cpp)
endif()

if(VSPYRE_BUILD_TESTS)
  find_package(Catch2 REQUIRED)
  if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
    set(VSPYRE_CATCH_MAJOR 3)
  else()
    set(VSPYRE_CATCH_MAJOR 2)
  endif()
  message(STATUS "vspyre: Catch2 ${Catch2_VERSION} (API ${VSPYRE_CATCH_MAJOR})")
endif()
if(VSPYRE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
