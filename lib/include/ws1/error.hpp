// Errors and results of the ws1 library. Library code never exits: it returns an Error,
// and the CLI turns it into one line on stderr and an exit code (DESIGN §8).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace ws1 {

// Process exit codes (DESIGN §8).
enum class ExitCode : int { kGreen = 0, kRed = 1, kBadInput = 2, kEnvironment = 3 };

// One problem with one input: `file: where: problem`. `where` is a JSON path, a tensor
// name, a byte offset — whatever locates the fault inside `file`.
struct Error {
  std::string file;
  std::string where;
  std::string problem;
  ExitCode code = ExitCode::kBadInput;

  // The one-line form printed by the CLI. Empty parts are left out.
  std::string message() const;
};

Error bad_input(std::string file, std::string where, std::string problem);
Error environment_error(std::string where, std::string problem);

// Thrown where no Result can carry the failure — a lazy device-to-host copy inside a host read,
// the device judge — when the machine failed, not the input or the code (a CUDA error). The CLI
// reports it as an environment error (exit 3), not as an internal one.
struct EnvironmentFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A value or an Error (C++23's std::expected is not available with g++ 12 in C++20 mode).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace ws1
