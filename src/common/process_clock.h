// How long this process has run, for timings that must cover a whole command (the dynamic
// loader, an exec of ourselves, flag parsing) rather than start at some point inside it.
// Thread-safety: a free function, no shared state.
#pragma once

namespace petal {

// Seconds since this process was created, from /proc/self/stat (an exec keeps the start time),
// with the kernel's clock-tick resolution (10 ms); 0 where it cannot be read.
double ProcessAgeSeconds();

}  // namespace petal
