#include "ws1/error.hpp"

namespace ws1 {

std::string Error::message() const {
  std::string out;
  for (const std::string* part : {&file, &where, &problem}) {
    if (part->empty()) continue;
    if (!out.empty()) out += ": ";
    out += *part;
  }
  // Keep it to one line whatever the inputs contained.
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

Error bad_input(std::string file, std::string where, std::string problem) {
  return Error{std::move(file), std::move(where), std::move(problem), ExitCode::kBadInput};
}

Error environment_error(std::string where, std::string problem) {
  return Error{"", std::move(where), std::move(problem), ExitCode::kEnvironment};
}

}  // namespace ws1
