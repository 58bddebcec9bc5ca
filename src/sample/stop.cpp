#include "fucina/sample/stop.hpp"

#include <algorithm>

namespace fucina::sample {

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  std::size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    cut = std::min(cut, held_.find(s));
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  std::size_t keep = 0;
  for (const auto& s : stops_)
    for (std::size_t n = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? std::string() : out;
}

}  // namespace fucina::sample
