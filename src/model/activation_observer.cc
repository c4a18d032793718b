// Fp8Input names and the CPU forward's row-amax reporter (activation_observer.h).
#include "model/activation_observer.h"

#include <cmath>
#include <vector>

namespace petal {

const char* Fp8InputName(Fp8Input which) {
  switch (which) {
    case Fp8Input::kQkv:
      return "qkv_in";
    case Fp8Input::kO:
      return "o_in";
    case Fp8Input::kGateUp:
      return "gate_up_in";
    case Fp8Input::kDown:
      return "down_in";
  }
  return "?";
}

void ObserveRows(ActivationObserver* observer, int layer, Fp8Input which, const float* v, int rows,
                 int dim) {
  if (observer == nullptr || rows <= 0) return;
  std::vector<float> amax(rows, 0.f);
  for (int r = 0; r < rows; ++r) {
    const float* row = v + static_cast<int64_t>(r) * dim;
    float m = 0.f;
    for (int i = 0; i < dim; ++i) m = std::fmax(m, std::fabs(row[i]));
    amax[r] = m;
  }
  observer->ObserveRowAmax(layer, which, amax.data(), rows);
}

}  // namespace petal
