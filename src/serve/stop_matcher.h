// Stop strings over streamed text: text is released as soon as it can no longer be the start of a
// stop string, so a stop that spans token boundaries is still caught and never shown in part.
//
// Works on bytes. The input is valid UTF-8 (StreamDecoder output) and so are the stop strings
// (they come from parsed JSON), so a held-back suffix that equals the start of a stop string
// begins at a character boundary and everything released is valid UTF-8 too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memra::serve {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; returns the text that is now safe to show. Once a stop string has
  // appeared, matched() is true, the returned text ends right before the earliest occurrence,
  // and later calls return nothing.
  std::string feed(std::string_view text);
  // End of generation without a match: releases the held-back tail.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace memra::serve
