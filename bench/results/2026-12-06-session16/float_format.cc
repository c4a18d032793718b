// Session 16 micro-benchmark behind JsonOut::FloatArray's in-place writes (issue 29): 1,024
// unit-norm floats formatted shortest-round-trip, (A) appended one by one through a temporary
// buffer as before, (B) written in place into one resized string as now. Build and run:
//   g++ -O2 -std=c++20 float_format.cc -o /tmp/float_format && /tmp/float_format
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>
static void A(std::string& s, const std::vector<float>& v) {
  s.reserve(s.size() + v.size() * 16 + 2);
  s.push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s.push_back(',');
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof(buf), v[i]);
    s.append(buf, r.ptr);
  }
  s.push_back(']');
}
static void B(std::string& s, const std::vector<float>& v) {
  size_t pos = s.size();
  s.resize(pos + v.size() * 16 + 2);
  char* p = s.data() + pos;
  char* end = s.data() + s.size();
  *p++ = '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) *p++ = ',';
    if (!std::isfinite(v[i])) {
      memcpy(p, "null", 4);
      p += 4;
      continue;
    }
    p = std::to_chars(p, end, v[i]).ptr;
  }
  *p++ = ']';
  s.resize(p - s.data());
}
int main() {
  std::mt19937 g(1);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> v(1024);
  double ss = 0;
  for (auto& x : v) {
    x = n(g);
    ss += x * x;
  }
  for (auto& x : v) x /= std::sqrt(ss);
  for (int rep = 0; rep < 3; ++rep)
    for (int k = 0; k < 2; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      size_t tot = 0;
      for (int it = 0; it < 2000; ++it) {
        std::string s;
        s.reserve(64);
        (k ? B : A)(s, v);
        tot += s.size();
      }
      double ns =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
          2000 / 1024;
      std::printf("%c %.1f ns/float (%zu)\n", k ? 'B' : 'A', ns, tot / 2000);
    }
}
