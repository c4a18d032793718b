// The fused-GEMM ladder's mode (fused_ladder.h) as an environment variable gives it: plain C++, so
// that the parsing is tested without a GPU. Thread-safety: stateless.
#pragma once

namespace petal {

// A ladder mode: 0 off; N > 0 fused at sizes >= N, the configuration timed; -N fused where
// timing says so at sizes >= N (kFusedAuto = -1: at every size).
constexpr int kFusedAuto = -1;

// `value` as a mode: null -> `fallback`; "auto" -> kFusedAuto; "auto:N" -> -N ("auto:0" is
// "auto"); "N" -> N (0 = off). Anything else (a sign, trailing text, no digits) reads as 0.
int ParseFusedMode(const char* value, int fallback);

// ParseFusedMode of the environment variable `name`.
int FusedModeFromEnv(const char* name, int fallback);

}  // namespace petal
