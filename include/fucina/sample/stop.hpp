#pragma once
// Stop strings for streamed output: text is released only once it can no longer be the
// start of a stop string, and generation ends at the first full match (the stop string
// itself is never emitted).
#include <string>
#include <string_view>
#include <vector>

namespace fucina::sample {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends `text`; returns what may be printed now. After a match stopped() is true and
  // the returned text ends right before the stop string.
  std::string push(std::string_view text);
  // Whatever is still held back (call at the end of generation).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace fucina::sample
