#include "common/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <map>

namespace petal {

std::string PrometheusNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

void PrometheusText::Header(std::string_view name, std::string_view type, std::string_view help) {
  out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void PrometheusText::Sample(std::string_view name, double value, std::string_view extra) {
  out_.append(name).append(Labels(extra)).append(" ").append(PrometheusNumber(value)).append("\n");
}

void PrometheusText::Scalar(std::string_view name, std::string_view type, std::string_view help,
                            double value) {
  Header(name, type, help);
  Sample(name, value);
}

void PrometheusText::Histogram(std::string_view name, std::string_view help,
                               std::span<const double> bounds, std::span<const uint64_t> cumulative,
                               double sum, uint64_t count) {
  Header(name, "histogram", help);
  const std::string n(name);
  for (size_t i = 0; i < cumulative.size(); ++i) {
    const std::string le = i < bounds.size() ? PrometheusNumber(bounds[i]) : "+Inf";
    Sample(n + "_bucket", static_cast<double>(cumulative[i]), "le=\"" + le + "\"");
  }
  Sample(n + "_sum", sum);
  Sample(n + "_count", static_cast<double>(count));
}

std::string PrometheusText::Labels(std::string_view extra) const {
  if (labels_.empty() && extra.empty()) return "";
  // Appended piece by piece: g++ 12 warns falsely (-Wrestrict) on "{" + std::string(...).
  std::string out("{");
  out.append(labels_);
  if (!labels_.empty() && !extra.empty()) out.push_back(',');
  out.append(extra);
  out.push_back('}');
  return out;
}

std::string MergePrometheus(const std::vector<std::string>& pages) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::string>> families;  // name -> (head, samples)
  for (const std::string& page : pages) {
    std::string current;
    size_t pos = 0;
    while (pos < page.size()) {
      size_t end = page.find('\n', pos);
      if (end == std::string::npos) end = page.size();
      const std::string_view line(page.data() + pos, end - pos);
      pos = end + 1;
      if (line.empty()) continue;
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        const std::string_view rest = line.substr(7);
        current = std::string(rest.substr(0, rest.find(' ')));
        auto [it, inserted] = families.try_emplace(current);
        if (inserted) order.push_back(current);
        // The head comes from the first page that names the family.
        if (it->second.first.find(std::string(line.substr(0, 7))) == std::string::npos) {
          it->second.first.append(line).push_back('\n');
        }
        continue;
      }
      if (line.front() == '#') continue;
      auto [it, inserted] = families.try_emplace(current);
      if (inserted) order.push_back(current);
      it->second.second.append(line).push_back('\n');
    }
  }
  std::string out;
  for (const auto& name : order) out += families[name].first + families[name].second;
  return out;
}

}  // namespace petal
