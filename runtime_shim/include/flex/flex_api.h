// Symbol visibility for libflex.so (vspyre runtime shim). The library is built with hidden
// visibility; everything a client may name is marked FLEX_API.
#pragma once

#if defined(VSPYRE_FLEX_BUILDING)
#define FLEX_API __attribute__((visibility("default")))
#else
#define FLEX_API __attribute__((visibility("default")))
#endif
