// Internal to keras/training/: Keras looks losses, metrics and optimizers up by name without
// regard to case ("Adam", "adam"); lower_ascii gives the key they are looked up by.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>

namespace kiln::training_detail {

inline std::string lower_ascii(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace kiln::training_detail
