// The test binary's entry point. SystemC owns main() and calls sc_main; Catch runs inside it.
// ctest runs every test case as its own process (catch_discover_tests), so each case gets a
// fresh SystemC kernel: SystemC cannot restart a simulation inside one process.
#if VSPYRE_CATCH_MAJOR < 3
#define CATCH_CONFIG_RUNNER
#endif
#include "catch.h"

#include <cstdlib>
#include <systemc>

int sc_main(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}

// SystemC prints a banner on stdout when its kernel starts, which would corrupt --json output;
// our own main() switches it off before handing over to SystemC, which then calls sc_main.
int main(int argc, char** argv) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
